"""What CDT's training does and what its scorer costs: the denoising sweep (CD-Fig8), the fine-tune curves (CD-Fig10),
IG's memory (CD-Mem) and the attention maps after training (CD-Fig14), each judged by its declared headline
(:mod:`repro.claims.cdt`)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import numpy as np

from repro.profiles import Profile
from repro.reports.cdt_analysis import SE, _fmt, exact_se, headline, paired_se, seed_note, seed_widened
from repro.reports.common import Report, model_note
from repro.reports.seeds import seed_groups
from repro.stats import mean_se


FIG8_MEANS = {"before": "before", "after_denoising": "after denoising", "after_emphasizing": "after emphasizing"}
"""CD-Fig8's attention means (record key -> column) whose SEs over samples the figure draws as bars."""


def _round(v: float | None, digits: int) -> float | str:
    """``v`` rounded, or an empty cell where the record has no value."""
    return "" if v is None else round(v, digits)


def cd_fig8(rows: Sequence[Mapping], p: Profile) -> Report:
    """CD-Fig8: attention per critical token before, after denoising and after the emphasizing step, by lr."""
    out = [{"lr (beta = 1)": r["lr"], "before": round(r["before"], 5),
            "after denoising": round(r["after_denoising"], 5),
            "after emphasizing": round(r["after_emphasizing"], 5),
            "irrelevant before": round(r["irrelevant_before"], 5),
            "irrelevant after denoising": round(r["irrelevant_after_denoising"], 5),
            "gain after denoising (mean ± SE over samples)": _fmt(r["gain"], r["gain_se"]),
            "gain after emphasizing (mean ± SE over samples)": "n/a" if r.get("emphasis_gain") is None
            else _fmt(r["emphasis_gain"], r.get("emphasis_gain_se") or 0.0),
            **{f"{col} SE (unpaired)": _round(r.get(f"{key}_se"), 5) for key, col in FIG8_MEANS.items()},
            "noise fraction": round(r["noise_fraction"], 3)} for r in rows]
    ours, se, how = fig8_claims(rows)
    verdict, note = judged = headline("CD-Fig8", ours, se, how)
    n = len(rows[0]["gain_samples"]) if rows and rows[0].get("gain_samples") else p.cdt.analysis_samples
    cap = (f"CD-Fig8: CDT's detection (Eq. 2) and denoising (Eq. 3, beta = 1, step = lr) on the task model; attention "
           f"mass per critical token from the answer rows, mean over {n} samples: before, after "
           f"the denoising step, and after one emphasizing AdamW step at lr {p.cdt.task_lr:g} on the denoised "
           f"inputs. The {p.name} profile's beta ({p.cdt.beta:g}) puts lr x beta at {p.extend.lr * p.cdt.beta:g} at "
           f"the peak lr. The figure's error bars are each mean's SE over the samples (unpaired: the SE columns, "
           f"its attention panel) and the gains' SEs, which pair the samples (its gains panel). Scale: "
           f"{model_note(p)}; {n} fresh prompts of {p.cdt.task} at the base window.")
    ours_text = "; ".join(f"lr {r['lr']:g}: {r['before']:.4f} -> {r['after_denoising']:.4f}" for r in rows)
    return Report("CD-Fig8", [{"name": "CD-Fig8", "rows": out, "columns": list(out[0]), "caption": cap}],
                  ours=ours_text, agrees=verdict, claims=judged.claims, note=note)


def _mean_over_lrs(rows: Sequence[Mapping], key: str) -> tuple[float | None, float | None, str]:
    """The mean over the sweep of a per-sample relative gain (``<key>_samples``, else ``key`` and ``key_se``) and its
    SE: over the samples' own means across the lrs where every row has the samples; else the mean of the rows' SEs
    (an upper bound: exact when the lrs' gains are perfectly correlated); ``(None, None, why)`` without it."""
    if rows and all(r.get(f"{key}_samples") for r in rows):
        x = np.asarray([r[f"{key}_samples"] for r in rows], dtype=float).mean(axis=0)
        return float(x.mean()), (float(x.std(ddof=1) / math.sqrt(x.size)) if x.size > 1 else None), "paired"
    if rows and all(r.get(key) is not None and r.get(f"{key}_se") is not None for r in rows):
        return (float(np.mean([r[key] for r in rows])), float(np.mean([r[f"{key}_se"] for r in rows])),
                "mean of the rows' SEs (upper bound)")
    return None, None, "not in the records"


def fig8_claims(rows: Sequence[Mapping]) -> tuple[dict[str, float | None], SE, str]:
    """CD-Fig8's headline on the sweep's rows (sorted by lr): ``(ours, se, context)``. The gains are each sample's
    relative change of the attention per critical token: ``gain`` after the denoising step (against before) and
    ``emphasis_gain`` after the emphasizing step (against after denoising), each with its SE over samples and,
    in newer records, the per-sample values (``*_samples``) that pair the lrs."""
    rows = sorted(rows, key=lambda r: r["lr"])
    den, den_se, den_how = _mean_over_lrs(rows, "gain")
    emph, emph_se, emph_how = _mean_over_lrs(rows, "emphasis_gain")
    ours = {"gain after denoising (mean over lrs)": den, "gain after emphasizing (mean over lrs)": emph,
            "0 (unchanged)": 0.0, "gain at the largest lr": rows[-1]["gain"] if rows else None,
            "gain at the smallest lr": rows[0]["gain"] if rows else None}
    ends = None
    if len(rows) > 1:
        lo, hi = rows[0], rows[-1]
        if lo.get("gain_samples") and hi.get("gain_samples"):
            ends = paired_se({"hi": hi["gain_samples"], "lo": lo["gain_samples"]})("hi", "lo")
        else:
            ends = math.hypot(hi["gain_se"], lo["gain_se"])  # unpaired: an upper bound for positively correlated
    ses = {"gain after denoising (mean over lrs)": den_se, "gain after emphasizing (mean over lrs)": emph_se,
           "gain at the largest lr": ends}

    def se(a: str, b: str) -> float | None:
        return ses.get(a if a in ses else b)

    rising = " -> ".join(f"{r['gain']:+.3f}" for r in rows)
    return ours, se, (f"denoising gain by lr {rising}; SE of the mean over lrs: denoising {den_how}, emphasizing "
                      f"{emph_how}")


def cd_fig10(curve: Mapping[str, Mapping[int, Mapping]], p: Profile) -> tuple[dict, Report]:
    """CD-Fig10: along the task fine-tunes (CE and CDT), answer accuracy and the IG / attention shares of critical
    tokens, per checkpoint."""
    rows, data = [], {}
    for obj, by_step in curve.items():
        data[obj] = {}
        for step in sorted(by_step):
            c = by_step[step]
            data[obj][step] = c
            rows.append({"objective": obj.upper(), "step": step, "accuracy": _fmt(c["accuracy"], c["accuracy_se"]),
                         "IG share on critical": _fmt(*c["ig_critical"]),
                         "attention share on critical": _fmt(*c["attention_critical"])})
    last = {o: data[o][max(data[o])] for o in data if data[o]}
    ours, se = fig10_claims(last)
    verdict, note = judged = headline("CD-Fig10", ours, se, f"{rising_note(data)}; one fine-tune per objective: the "
                             "training-seed spread is not measured, the standard errors are over prompts only "
                             "(unpaired: the records keep no per-prompt scores)")
    cap = (f"CD-Fig10: the EM view along training. The base fine-tuned on the multi-hop task ({p.cdt.task}, "
           f"{p.cdt.task_steps} steps) with CE and with CDT (beta {p.cdt.beta:g}), checkpoints every "
           f"{p.cdt.task_curve_every} steps: accuracy on {p.cdt.analysis_samples} fresh prompts (binomial SE) and the "
           f"IG / attention shares of critical tokens (mean ± SE), on prompts at the base window "
           f"({p.base.window} tokens). Scale: {model_note(p)}.")
    ours_text = "; ".join(f"{o}: accuracy {last[o]['accuracy']:.2f}, IG critical {last[o]['ig_critical'][0]:.3f}"
                          for o in last)
    return data, Report("CD-Fig10", [{"name": "CD-Fig10", "rows": rows, "columns": list(rows[0]), "caption": cap}],
                        ours=ours_text, agrees=verdict, claims=judged.claims, note=note)


FIG10_METRICS = {"accuracy": ("accuracy", "accuracy_se"), "IG critical": ("ig_critical", None),
                 "attention critical": ("attention_critical", None)}
"""Headline metric -> (record key, its SE key; None: the record holds (mean, SE))."""


def _value_se(c: Mapping, key: str, se_key: str | None) -> tuple[float, float]:
    return (c[key], c[se_key]) if se_key else tuple(c[key])


def fig10_claims(last: Mapping[str, Mapping]) -> tuple[dict[str, float], SE]:
    """CD-Fig10's headline at each objective's last checkpoint (``last``: objective -> record): ``ours`` and
    ``se(a, b) = sqrt(se_a^2 + se_b^2)`` (two fine-tunes, evaluated on the same prompts but without per-prompt
    scores in the records: unpaired)."""
    ours, ses = {}, {}
    for obj, c in last.items():
        for name, (key, se_key) in FIG10_METRICS.items():
            ours[f"{obj}: {name}"], ses[f"{obj}: {name}"] = _value_se(c, key, se_key)

    def se(a: str, b: str) -> float | None:
        return math.hypot(ses[a], ses[b]) if a in ses and b in ses else None

    return ours, se


def rising_note(data: Mapping[str, Mapping[int, Mapping]]) -> str:
    """Per objective, first -> last checkpoint of accuracy and IG share on critical tokens, the gap against its
    unpaired SE (rising alone is not the claim: any fine-tune may rise)."""
    out = []
    for obj, by_step in data.items():
        steps = sorted(by_step)
        if len(steps) < 2:
            continue
        a, b = by_step[steps[0]], by_step[steps[-1]]
        parts = []
        for name in ("accuracy", "IG critical"):
            key, se_key = FIG10_METRICS[name]
            (va, sa), (vb, sb) = _value_se(a, key, se_key), _value_se(b, key, se_key)
            parts.append(f"{name} {vb - va:+.3f} ± {math.hypot(sa, sb):.3f}")
        out.append(f"{obj} step {steps[0]} -> {steps[-1]}: " + ", ".join(parts))
    return "; ".join(out) or "no curve with two checkpoints"


def cd_mem(rows: Sequence[Mapping], p: Profile) -> Report:
    """CD-Mem: peak memory and time of the naive and the memory-linear IG score by length."""
    ours_max = max((r["length"] for r in rows if r["method"] == "ours" and r["status"] == "ok"), default=0)
    naive_max = max((r["length"] for r in rows if r["method"] == "naive" and r["status"] == "ok"), default=0)
    target = max(p.cdt.mem_lengths)
    ran = {r["method"] for r in rows}
    verdict, note = judged = headline("CD-Mem", {"ours: longest length": ours_max if "ours" in ran else None,
                                        "naive: longest length": naive_max if "naive" in ran else None}, exact_se,
                             f"goal: ours at >= {min(32_768, target)} tokens within the cap: "
                             f"{'met' if ours_max >= min(32_768, target) else 'not met'}; lengths double, one "
                             "measurement each (a peak memory repeats for a fixed computation: standard error 0)")
    cap = (f"CD-Mem: one IG scoring (forward + backward, answer of 8 tokens) of the tiny model per length, each in a "
           f"fresh process capped at {p.cdt.mem_cap_gib:g} GiB: peak resident memory and seconds, naive (eager "
           f"attention, output_attentions + retain_grad: Eq. 1 as written) vs ours (answer rows only). The paper "
           f"stopped at 12K tokens on 8 x 92 GB for an 8B model. Scale: {model_note(p)}: the base model "
           f"scored on one random token sequence per length, lengths doubling from {min(p.cdt.mem_lengths)} to "
           f"{max(p.cdt.mem_lengths)}.")
    cols = list(rows[0]) if rows else []
    return Report("CD-Mem", [{"name": "CD-Mem", "rows": list(rows), "columns": cols, "caption": cap}],
                  ours=f"ours up to {ours_max} tokens, naive up to {naive_max}", agrees=verdict,
                  note=note, claims=judged.claims)


def cd_fig14(maps: Mapping[str, Mapping], p: Profile, before: str = "rp_standard", after: str = "cdt") -> Report:
    """CD-Fig14: per layer, the share of the last chunk's attention (the question's queries) on chunks that hold
    critical tokens, before (CE) and after CDT, mean ± SE over the same prompts, and the paired gap. ``maps`` may
    hold training-seed replicates (``cdt@seed1``, ...): an arm's per-prompt shares are averaged over them and the
    headline's gap is widened by their spread (:func:`seed_widened`)."""
    groups = seed_groups(maps)
    shares = {arm: arm_shares(maps, groups[arm]) for arm in (before, after) if arm in groups}
    rows = []
    gaps = {}
    layers = next(iter(shares.values())).shape[1] if shares else 0
    for layer in range(layers):
        row = {"layer": layer}
        for name, x in shares.items():
            row[name] = _fmt(*mean_se(list(x[:, layer])))
        if len(shares) == 2:
            gaps[layer] = mean_se(list(shares[after][:, layer] - shares[before][:, layer]))
            row["after - before (paired)"] = _fmt(*gaps[layer])
        rows.append(row)
    ours, se, how = fig14_claims(maps, groups, before, after)
    verdict, note = judged = headline("CD-Fig14", ours, se, "per layer, after - before (paired over prompts): " + (
        "; ".join(f"layer {k}: {v[0]:+.3f} ± {v[1]:.3f}" for k, v in gaps.items()) or "n/a") + f"; {how}")
    first = next(iter(maps.values()), {})
    cap = (f"CD-Fig14: chunked attention maps ({first.get('chunks', p.cdt.map_chunks)} chunks of "
           f"{first.get('length', p.extend.target_window)}-token multi-hop prompts, mean over heads and "
           f"{first.get('samples', p.cdt.map_samples)} prompts): the share of the last chunk's attention (the "
           f"question) on chunks holding supporting or interference facts, before ({before}: CE) and after CDT "
           f"({after}), per layer; paired over the same prompts. Scale: {model_note(p)}.")
    gap = None if ours["after CDT"] is None or ours["before CDT (CE)"] is None else \
        ours["after CDT"] - ours["before CDT (CE)"]
    s_ = se("after CDT", "before CDT (CE)")
    head = "needs both checkpoints" if gap is None else \
        f"mean over layers {gap:+.4f} ± {s_:.4f}" if s_ is not None else f"mean over layers {gap:+.4f} (no SE)"
    per_layer = "; ".join(f"layer {k}: {v[0]:+.3f} ± {v[1]:.3f}" for k, v in gaps.items())
    return Report("CD-Fig14", [{"name": "CD-Fig14", "rows": rows, "columns": list(rows[0]) if rows else [],
                                "caption": cap}],
                  ours=f"after - before: {head}" + (f"; {per_layer}" if per_layer else ""), agrees=verdict,
                  note=note, claims=judged.claims)


def arm_shares(maps: Mapping[str, Mapping], replicates: Sequence[str]) -> np.ndarray:
    """(prompts, layers) shares of one arm, averaged over its replicates (which must hold the same prompts)."""
    x = [np.asarray(maps[n]["last_row_critical"], dtype=float) for n in replicates]
    if len({a.shape for a in x}) > 1:
        raise ValueError(f"replicates {list(replicates)} have (prompts, layers) shapes {[a.shape for a in x]}; "
                         "allowed: the same prompts and layers in each")
    return np.mean(x, axis=0)


def fig14_claims(maps: Mapping[str, Mapping], groups: Mapping[str, Sequence[str]], before: str,
                 after: str) -> tuple[dict[str, float | None], SE, str]:
    """CD-Fig14's headline: each arm's share averaged over layers and prompts (and replicates), the gap's SE paired
    over the prompts and widened by the training-seed spread of the replicates' values; ``(ours, se, how)``."""
    names = {"after CDT": after, "before CDT (CE)": before}
    mean = {label: (float(arm_shares(maps, groups[a]).mean()) if a in groups else None) for label, a in names.items()}
    if None in mean.values():
        return mean, lambda a, b: None, "needs both checkpoints"
    per_prompt = {label: arm_shares(maps, groups[a]).mean(axis=1) for label, a in names.items()}
    if per_prompt["after CDT"].shape != per_prompt["before CDT (CE)"].shape:
        raise ValueError(f"{after} and {before} hold {per_prompt['after CDT'].size} and "
                         f"{per_prompt['before CDT (CE)'].size} prompts; allowed: the same prompts")
    eval_se = paired_se(per_prompt)("after CDT", "before CDT (CE)")
    reps = {label: [float(np.asarray(maps[n]["last_row_critical"], dtype=float).mean()) for n in groups[a]]
            for label, a in names.items()}
    wide = seed_widened(eval_se, reps, "after CDT", "before CDT (CE)")

    def se(a: str, b: str) -> float | None:
        return wide if {a, b} == set(names) else None

    return mean, se, seed_note({names[k]: v for k, v in reps.items()})
