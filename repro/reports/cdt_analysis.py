"""Context Denoising Training's analysis tables: the task's construction (CD-TaskB), FR vs IG (CD-Fig3), manual
denoising (CD-Fig4), IG vs embedding gradient (CD-Fig5), critical-token detectors (CD-Fig7), the denoising sweep
(CD-Fig8), the EM curve (CD-Fig10), the IG score's memory (CD-Mem) and the chunked attention map (CD-Fig14).

Inputs are the records of ``stages.cdt_analysis`` (one per sample: :func:`repro.analysis.cdt_scores`).
Means over samples carry their standard error (SE = sd / sqrt(n)). Each verdict is its target's declared headline
(:mod:`repro.claims.cdt`) judged by :func:`repro.reports.headline.judge`: the claims' gaps against their standard
errors (paired over the same samples where the records allow, :func:`paired_se`), Holm-corrected within a table;
other comparisons are shown in the note after the headline and never decide.
"""

from __future__ import annotations

import math
from itertools import combinations
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from repro.analysis.cdt_scores import DETECTORS
from repro.analysis.ig import CRITICAL, TYPES
from repro.claims import headline_of
from repro.claims.cdt import HEADLINES
from repro.profiles import Profile
from repro.reports.common import Report, model_note
from repro.reports.headline import Judgement, judge
from repro.stats import BOOTSTRAP, Z, mean_se, seed_spread

SE = Callable[[str, str], "float | None"]
"""``se(a, b)``: the standard error of ``ours[a] - ours[b]``, None without an estimate."""


def paired_se(per_sample: Mapping[str, Sequence[float]]) -> SE:
    """``se(a, b)`` of the mean of ``a - b`` over the samples where both are finite (``per_sample``: arm -> one
    value per sample, the same samples in the same order; NaN where an arm has none): ``sd(a - b) / sqrt(n)``
    (ddof 1), None below two such samples or for an unknown arm."""
    def se(a: str, b: str) -> float | None:
        if a not in per_sample or b not in per_sample:
            return None
        x, y = np.asarray(per_sample[a], dtype=float), np.asarray(per_sample[b], dtype=float)
        if x.shape != y.shape:
            raise ValueError(f"{x.size} samples of {a!r} but {y.size} of {b!r}; allowed: the same samples")
        d = (x - y)[np.isfinite(x) & np.isfinite(y)]
        return float(d.std(ddof=1) / math.sqrt(d.size)) if d.size > 1 else None

    return se


def sample_means(per_sample: Mapping[str, Sequence[float]]) -> dict[str, float | None]:
    """Arm -> mean over its finite values (None without any)."""
    out = {}
    for arm, v in per_sample.items():
        x = np.asarray(v, dtype=float)
        x = x[np.isfinite(x)]
        out[arm] = float(x.mean()) if x.size else None
    return out


def exact_se(a: str, b: str) -> float:
    """``se(a, b)`` of exact counts (a census, not a sample): 0."""
    return 0.0


def headline(target: str, ours: Mapping[str, float | None], se: SE, context: str = "") -> Judgement:
    """``(verdict, note)``: ``target``'s declared headline judged on ``ours`` (:func:`repro.reports.headline.judge`),
    the note the headline's result followed by ``context`` (pairs shown, never deciding)."""
    h = headline_of(target)
    if h is None:
        raise ValueError(f"target {target!r} has no declared headline; allowed: {', '.join(HEADLINES)}")
    return judge(h, ours, se).with_context(f"Shown, not deciding: {context}" if context else "")


def seed_widened(eval_se: float | None, replicates: Mapping[str, Sequence[float]], a: str, b: str) -> float | None:
    """``eval_se`` of ``a - b`` widened by the training-seed spread: ``+ s^2 / k`` per arm with ``k >= 2`` replicate
    values (``replicates``: arm -> its replicates' values) and the pooled spread of those arms (``+ s^2``) for a
    single-seed arm; nothing when no arm has several seeds (as :class:`repro.reports.noise.GapTest`)."""
    if eval_se is None:
        return None
    own = {arm: seed_spread(v) for arm, v in replicates.items() if len(v) > 1}
    pooled = math.sqrt(sum(s ** 2 for s in own.values()) / len(own)) if own else None
    var = eval_se ** 2
    for arm in (a, b):
        if arm in own:
            var += own[arm] ** 2 / len(replicates[arm])
        elif pooled is not None:
            var += pooled ** 2
    return math.sqrt(var)


def seed_note(replicates: Mapping[str, Sequence[float]]) -> str:
    """How the training-seed spread entered, for the notes."""
    own = {arm: v for arm, v in replicates.items() if len(v) > 1}
    if not own:
        return "training-seed spread not measured (one checkpoint per arm): the standard errors are over prompts only"
    return ("widened by the training-seed spread (" + ", ".join(f"{a} {seed_spread(v):.3g} over {len(v)} seeds"
                                                                for a, v in own.items())
            + "; single-seed arms: the pooled spread)")



PAPER_FIG3_TOP30 = {"correct": {"supporting": 0.21, "interference": 0.07, "irrelevant": 0.72, "low_frequency": 0.0},
                    "wrong": {"supporting": 0.11, "interference": 0.17, "irrelevant": 0.72, "low_frequency": 0.0}}
"""App. B Table 5, top-30 heads: the FR score's shares per type (the paper's Fig. 3a in numbers)."""


def _fmt(m: float, se: float, digits: int = 3) -> str:
    return "n/a" if not math.isfinite(m) else f"{m:.{digits}f} ± {se:.{digits}f}"


def _groups(records: Sequence[Mapping], correct: Sequence[bool]) -> dict[str, list[Mapping]]:
    return {"correct": [r for r, c in zip(records, correct) if c],
            "wrong": [r for r, c in zip(records, correct) if not c]}


def cd_taskb(rows: Sequence[Mapping[str, Any]], p: Profile) -> Report:
    """CD-TaskB: the multi-hop task as the generator builds it (:func:`repro.analysis.typed_samples.construction`)."""
    cap = ("CD-TaskB: CDT's multi-hop task as our generator builds it (App. B.1): per hop count and prompt length, "
           "mean tokens per type and fact counts over the listed prompts; supporting facts go to the boundaries of "
           "10 equal chunks of the filler (slots 0/10 .. 9/10, the first at the sample's depth), 1-2x as many "
           "interference facts with at least one after the last supporting fact, a few emoji as low-frequency "
           f"tokens, one shared filler per length; every listed prompt is counted (a census). Scale: "
           f"{model_note(p)}.")
    built = [r for r in rows if r["prompts"]]
    count = sum(not (r["hops"] <= r["interference_min"] and r["interference_max"] <= 2 * r["hops"]) for r in built)
    after = sum(r["interference_after_last_min"] < 1 for r in built)
    ok = bool(built) and count == after == 0
    ours = {"cells breaking the 1-2x interference count": count if built else None,
            "cells without interference after the last supporting fact": after if built else None, "none": 0}
    verdict, note = judged = headline("CD-TaskB", ours, exact_se,
                             "the rules are checked on every generated prompt (exact counts, standard error 0)")
    cols = list(dict.fromkeys(k for r in [*built, *rows] for k in r))
    return Report("CD-TaskB", [{"name": "CD-TaskB", "rows": list(rows), "columns": cols,
                                "caption": cap}],
                  ours=f"{len(built)} (hops, length) cells built ({len(rows) - len(built)} too short); construction "
                       f"rules hold in every prompt: {ok}",
                  agrees=verdict, claims=judged.claims, note=note)


def cd_fig3(records: Sequence[Mapping], correct: Sequence[bool], p: Profile) -> tuple[dict, Report]:
    """CD-Fig3: per answer group and type, the normalized FR (all heads; top heads), IG and the authors' L1 proxy.
    Returns ``(plot data: group -> metric -> type -> (mean, se), report)``."""
    metrics = {"FR (all heads)": "fr_share", "FR (top heads)": "fr_top_share", "IG (Eq. 1)": "ig_share",
               "embedding-grad L1 (authors' proxy)": "grad_l1_share"}
    data: dict = {}
    rows = []
    for g, recs in _groups(records, correct).items():
        data[g] = {}
        for label, key in metrics.items():
            data[g][label] = {t: mean_se([r[key][t] for r in recs]) for t in TYPES}
            rows.append({"answers": g, "n": len(recs), "score": label,
                         **{t: _fmt(*data[g][label][t]) for t in TYPES},
                         "paper (FR top-30, Table 5)": (", ".join(f"{t} {v}" for t, v in PAPER_FIG3_TOP30[g].items())
                                                        if label == "FR (top heads)" else "")})
    # context: the gaps over every sample (both answer groups pooled)
    crit_gap = [sum(r["ig_share"][t] for t in CRITICAL) - r["ig_share"]["irrelevant"] for r in records]
    fr_gap = [r["fr_share"]["irrelevant"] - r["ig_share"]["irrelevant"] for r in records]
    (cg, cs), (fg, fs) = mean_se(crit_gap), mean_se(fr_gap)
    per_sample = fig3_per_sample(records, correct)
    verdict, note = judged = headline("CD-Fig3", sample_means(per_sample), paired_se(per_sample),
                             f"over all answers, IG share critical - irrelevant {cg:+.3f} ± {cs:.3f}, FR share "
                             f"irrelevant - IG share irrelevant {fg:+.3f} ± {fs:.3f} (SE over samples)")
    top = records[0]["top_heads_used"] if records else 0
    total = records[0].get("heads_total", top) if records else 0
    cap = (f"CD-Fig3: shares per token type (each score's per-token mean, normalized over the four types), mean ± SE "
           f"over samples, for answers the model gets right and wrong. FR: top-{p.cdt.top_k} keys per answer "
           f"row; 'top heads': the {top} of the model's {total} heads giving the most attention to critical tokens "
           f"(App. B: 30 of 1,024). Scale: {model_note(p)}; {len(correct)} fresh prompts of {p.cdt.task} at the base "
           f"window ({sum(correct)} right, {len(correct) - sum(correct)} wrong), one per sample.")
    ours = (f"IG share critical - irrelevant {cg:+.3f} ± {cs:.3f}; FR share irrelevant - IG share irrelevant "
            f"{fg:+.3f} ± {fs:.3f}; {sum(correct)} right / {len(correct) - sum(correct)} wrong answers")
    return data, Report("CD-Fig3", [{"name": "CD-Fig3", "rows": rows, "columns": list(rows[0]), "caption": cap}],
                        ours=ours, agrees=verdict, claims=judged.claims, note=note)


def fig3_per_sample(records: Sequence[Mapping], correct: Sequence[bool]) -> dict[str, list[float]]:
    """CD-Fig3's headline arms per sample, per answer group: ``"<group>: IG critical"`` (supporting + interference
    IG shares), ``IG irrelevant``, ``FR noise`` and ``IG noise`` (irrelevant + low-frequency shares)."""
    noise = ("irrelevant", "low_frequency")
    out: dict[str, list[float]] = {}
    for g, recs in _groups(records, correct).items():
        out[f"{g}: IG critical"] = [sum(r["ig_share"][t] for t in CRITICAL) for r in recs]
        out[f"{g}: IG irrelevant"] = [r["ig_share"]["irrelevant"] for r in recs]
        out[f"{g}: FR noise"] = [sum(r["fr_share"][t] for t in noise) for r in recs]
        out[f"{g}: IG noise"] = [sum(r["ig_share"][t] for t in noise) for r in recs]
    return out


def cd_fig4(manual: Sequence[Mapping], p: Profile, step: float) -> tuple[dict, Report]:
    """CD-Fig4: attention per token (mean over heads and layers, summed over the answer rows) before and after
    manual denoising, per type; the ratio after / before per sample, mean ± SE."""
    data, rows = {}, []
    for t in TYPES:
        b = mean_se([m["before"][t] for m in manual])
        a = mean_se([m["after"][t] for m in manual])
        ratio = mean_se([m["after"][t] / m["before"][t] for m in manual if m["before"][t] > 0])
        data[t] = {"before": b, "after": a, "ratio": ratio}
        rows.append({"type": t, "attention before": _fmt(*b, 4), "attention after": _fmt(*a, 4),
                     "after / before": _fmt(*ratio), "paper": "x10" if t in CRITICAL else "slight decrease"
                     if t == "irrelevant" else ""})
    per_sample = fig4_per_sample(manual)
    crit = mean_se(per_sample["critical: after / before"])
    verdict, note = judged = headline("CD-Fig4", sample_means(per_sample), paired_se(per_sample),
                             f"critical tokens after / before {_fmt(*crit)} against the paper's x10 (magnitude "
                             "not tested)")
    noise = np.mean([m["noise_tokens"] / max(m["context_tokens"], 1) for m in manual])
    cap = (f"CD-Fig4: manual denoising (§3.2). Noise = context tokens whose IG (mean over heads and layers) is below "
           f"the context's mean IG ({noise:.0%} of context tokens); their embeddings move by -{step:g} x dL/dE (answer "
           f"loss). Attention mass per token from the answer rows, before and after, mean ± SE over "
           f"{len(manual)} samples. Scale: {model_note(p)}; {len(manual)} fresh prompts of {p.cdt.task} at the base "
           f"window ({p.base.window} tokens).")
    return data, Report("CD-Fig4", [{"name": "CD-Fig4", "rows": rows, "columns": list(rows[0]), "caption": cap}],
                        ours=f"critical tokens' attention after / before: {_fmt(*crit)} (paper: about x10)",
                        agrees=verdict, claims=judged.claims, note=note)


def _ratio(after: float, before: float) -> float:
    return after / before if before > 0 else float("nan")


def fig4_per_sample(manual: Sequence[Mapping]) -> dict[str, list[float]]:
    """CD-Fig4's headline arms per sample: ``critical: after / before`` (the mean over the critical types of each
    type's ratio), ``irrelevant: after / before`` (NaN where the attention before is 0) and the reference
    ``1 (unchanged)``."""
    return {"critical: after / before": [float(np.mean([_ratio(m["after"][t], m["before"][t]) for t in CRITICAL]))
                                         for m in manual],
            "irrelevant: after / before": [_ratio(m["after"]["irrelevant"], m["before"]["irrelevant"])
                                           for m in manual],
            "1 (unchanged)": [1.0] * len(manual)}


def cd_fig5(records: Sequence[Mapping], types_of: Sequence[Sequence[str]], p: Profile) -> tuple[dict, Report]:
    """CD-Fig5: per type, mean IG and mean embedding-gradient L2 norm (per token), and the Pearson correlation of
    the two over every context token of every sample (pooled, and within each type)."""
    ig, gr, lab = [], [], []
    for r, types in zip(records, types_of):
        for i, t in enumerate(types):
            if t in TYPES:
                ig.append(r["ig_token"][i])
                gr.append(r["grad_token"][i])
                lab.append(t)
    ig, gr, lab = np.asarray(ig), np.asarray(gr), np.asarray(lab)

    def corr(m):
        return float(np.corrcoef(ig[m], gr[m])[0, 1]) if m.sum() > 2 and ig[m].std() > 0 and gr[m].std() > 0 \
            else float("nan")

    rows = [{"type": t, "tokens": int((lab == t).sum()), "mean IG": f"{ig[lab == t].mean():.3e}",
             "mean grad L2": f"{gr[lab == t].mean():.3e}", "Pearson r (within type)": round(corr(lab == t), 3)}
            for t in TYPES if (lab == t).any()]
    r_all = corr(np.ones_like(lab, dtype=bool))
    rows.append({"type": "all context tokens", "tokens": int(lab.size), "mean IG": f"{ig.mean():.3e}",
                 "mean grad L2": f"{gr.mean():.3e}", "Pearson r (within type)": round(r_all, 3)})
    n = len(ig)
    r_se = pearson_bootstrap_se(records, types_of)
    order = type_order(records, types_of)
    verdict, note = judged = headline("CD-Fig5", {"Pearson r (IG, grad L2)": r_all if math.isfinite(r_all) else None,
                                         "0 (uncorrelated)": 0.0}, lambda a, b: r_se, order)
    cap = (f"CD-Fig5: per context token, IG (Eq. 1, mean over heads and layers) against the L2 norm of the loss "
           f"gradient at its input embedding; {len(records)} samples. Pearson r over all tokens and within each "
           f"type. Scale: {model_note(p)}; {len(records)} fresh prompts of {p.cdt.task} at the base window "
           f"({p.base.window} tokens).")
    se_text = "n/a" if r_se is None else f"{r_se:.3f}"
    return ({"ig": ig, "grad": gr, "types": lab},
            Report("CD-Fig5", [{"name": "CD-Fig5", "rows": rows, "columns": list(rows[0]), "caption": cap}],
                   ours=f"r = {r_all:.3f} over {n} tokens (bootstrap SE over samples {se_text}); {order}",
                   agrees=verdict, claims=judged.claims, note=note))


def _context_tokens(records: Sequence[Mapping], types_of: Sequence[Sequence[str]]):
    """Per sample: (IG, grad L2, type) arrays of its context tokens."""
    out = []
    for r, types in zip(records, types_of):
        keep = [i for i, t in enumerate(types) if t in TYPES]
        out.append((np.asarray([r["ig_token"][i] for i in keep], dtype=float),
                    np.asarray([r["grad_token"][i] for i in keep], dtype=float),
                    np.asarray([types[i] for i in keep], dtype=object)))
    return out


def _resamples(n: int, B: int, seed: int) -> np.ndarray:
    """(B, n) indices of ``B`` bootstrap resamples of ``n`` samples."""
    return np.random.default_rng(seed).integers(0, n, (B, n))


def pearson_bootstrap_se(records: Sequence[Mapping], types_of: Sequence[Sequence[str]], B: int = BOOTSTRAP,
                         seed: int = 0) -> float | None:
    """Bootstrap SE of the Pearson r of IG against the gradient norm over every context token, resampling samples
    (the tokens of one sample are not independent); None below two samples or where r is undefined."""
    toks = _context_tokens(records, types_of)
    if len(toks) < 2:
        return None
    # per sample: n, sum x, sum y, sum xx, sum yy, sum xy; r of a resample from the summed moments
    m = np.array([[x.size, x.sum(), y.sum(), (x * x).sum(), (y * y).sum(), (x * y).sum()] for x, y, _ in toks])
    n, sx, sy, sxx, syy, sxy = m[_resamples(len(toks), B, seed)].sum(axis=1).T
    with np.errstate(invalid="ignore", divide="ignore"):
        r = (n * sxy - sx * sy) / np.sqrt((n * sxx - sx ** 2) * (n * syy - sy ** 2))
    r = r[np.isfinite(r)]
    return float(r.std(ddof=1)) if r.size > 1 else None


def type_order(records: Sequence[Mapping], types_of: Sequence[Sequence[str]], B: int = BOOTSTRAP,
               seed: int = 0) -> str:
    """Whether IG and the gradient norm order the types' means alike, pair by pair of types, each gap against its
    bootstrap SE over samples: how many pairs both order beyond ``Z`` SE, and how many of those alike."""
    toks = _context_tokens(records, types_of)
    if len(toks) < 2:
        return "type means' order: n/a (fewer than two samples, no standard error)"
    # per sample and type: token count, IG sum, grad sum
    m = np.array([[[(t == ty).sum(), x[t == ty].sum(), y[t == ty].sum()] for ty in TYPES] for x, y, t in toks])
    boot = m[_resamples(len(toks), B, seed)].sum(axis=1)  # (B, types, 3)
    full = m.sum(axis=0)
    have = [i for i in range(len(TYPES)) if full[i, 0] > 0 and (boot[:, i, 0] > 0).all()]
    alike = both = 0
    for i, j in combinations(have, 2):
        signs = []
        for col in (1, 2):
            gap = full[i, col] / full[i, 0] - full[j, col] / full[j, 0]
            reps = boot[:, i, col] / boot[:, i, 0] - boot[:, j, col] / boot[:, j, 0]
            signs.append(np.sign(gap) if abs(gap) > Z * float(reps.std(ddof=1)) else 0)
        if 0 not in signs:
            both += 1
            alike += int(signs[0] == signs[1])
    pairs = len(have) * (len(have) - 1) // 2
    return (f"type means ordered alike by IG and the gradient norm on {alike} of the {both} type pairs that both "
            f"order beyond {Z:g} bootstrap SE over samples ({pairs - both} of {pairs} pairs within noise in one "
            "or both)")


def cd_fig7(records: Sequence[Mapping], p: Profile, evaluator: str) -> tuple[dict, Report]:
    """CD-Fig7: the share of each type among each detector's top-k context tokens, mean ± SE over samples."""
    data, rows = {}, []
    for d in DETECTORS:
        key = f"detect_{d}"
        recs = [r[key] for r in records if key in r]
        if not recs:
            continue
        data[d] = {t: mean_se([x[t] for x in recs]) for t in TYPES}
        rows.append({"detector": {"attention": "attention top-k", "gradient": "embedding gradient top-k (CDT)",
                                  "longppl": f"LongPPL gap top-k (evaluator: {evaluator})"}[d],
                     **{t: _fmt(*data[d][t]) for t in TYPES}})
    crit = {d: mean_se([sum(r[f"detect_{d}"][t] for t in CRITICAL) for r in records if f"detect_{d}" in r])
            for d in data}
    irr = {d: v["irrelevant"] for d, v in data.items()}
    best_crit = max(crit, key=lambda d: crit[d][0]) if crit else None
    best_irr = min(irr, key=lambda d: irr[d][0]) if irr else None
    per_sample = {f"{d}: {kind}": [sum(r[f"detect_{d}"][t] for t in types) if f"detect_{d}" in r else float("nan")
                                    for r in records]
                  for d in DETECTORS for kind, types in (("critical", CRITICAL), ("irrelevant", ("irrelevant",)))}
    lp = paired_se(per_sample)("gradient: irrelevant", "longppl: irrelevant")
    means = sample_means(per_sample)
    lp_text = "n/a" if lp is None or means["longppl: irrelevant"] is None else \
        f"{means['gradient: irrelevant'] - means['longppl: irrelevant']:+.3f} ± {lp:.3f}"
    verdict, note = judged = headline("CD-Fig7", means, paired_se(per_sample),
                             f"most critical: {best_crit}, fewest irrelevant: {best_irr} (raw means); gradient - "
                             f"LongPPL irrelevant share {lp_text} (paired SE over samples)")
    cap = (f"CD-Fig7: critical-token detection on the multi-hop task: the share of each type among the top "
           f"{p.cdt.top_k} context tokens by attention (summed over the answer rows, heads and layers), by the "
           f"embedding-gradient L2 norm (CDT's detector), and by LongPPL's short-vs-long log-probability gap; "
           f"mean ± SE over {len(records)} samples. Scale: {model_note(p)}; {len(records)} fresh prompts of "
           f"{p.cdt.task} at the base window ({p.base.window} tokens).")
    ours = "; ".join(f"{d}: critical {crit[d][0]:.2f}, irrelevant {irr[d][0]:.2f}" for d in data)
    return data, Report("CD-Fig7", [{"name": "CD-Fig7", "rows": rows, "columns": list(rows[0]), "caption": cap}],
                        ours=ours, agrees=verdict, claims=judged.claims, note=note)
