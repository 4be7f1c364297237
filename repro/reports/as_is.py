"""Verdicts of a pretrained base evaluated as it is (the ``smol`` profile): ``TB-NIAH`` by needle depth within its
window and ``RP-Tab4/5``'s extrapolation setting without training (training-free RoPE scaling past the window).

Both read the smol profile's evaluation records (``evaluate_as_is``: ``evaluate``'s prediction rows, 0/1 scores).
The same prompts (seeds) are scored at every length and under every scaling, so each claim compares paired prompts: its
p-value is McNemar's exact test (:func:`repro.stats.mcnemar`), as a handful of prompts makes a normal approximation
claim significance where there is none (two of two right against none of two: exact p = 0.5, a paired normal SE of
0). The standard error recorded with a claim is the one that gives that p-value (:func:`exact_se`), so the
verdict can be checked from index.json as every other (:func:`repro.reports.headline.rejudge`).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Any, Mapping, Sequence

import numpy as np

from repro.profiles import Profile
from repro.reports.common import Report, model_note, pct
from repro.claims.as_is import headlines
from repro.reports.headline import judge
from repro.stats import bernoulli_sd, mcnemar, paired_se

TASK_LABEL = "niah_single_1"


def paired_scores(rows: Sequence[Mapping[str, Any]], length: int) -> dict[int, float]:
    """Seed -> score of the rows at the requested ``length`` (``evaluate``'s ``target_length``)."""
    return {int(r["seed"]): float(r["score"]) for r in rows if int(r["target_length"]) == length}


def exact_se(a: Sequence[float], b: Sequence[float]) -> float:
    """The standard error of ``mean(a) - mean(b)`` (0/1 scores of the same prompts) whose two-sided normal p-value
    is McNemar's exact p: ``|gap| / z`` with ``z`` the normal quantile of ``1 - p/2`` (floored at 1e-3, so p = 1 gives
    a finite SE a thousand times the gap); without discordant prompts the paired SE (0)."""
    gap = float(np.mean(a) - np.mean(b))
    if gap == 0:
        return paired_se(a, b)
    p = mcnemar(a, b).p
    z = NormalDist().inv_cdf(1 - p / 2) if p < 1 else 0.0
    return abs(gap) / max(z, 1e-3)


def _acc(scores: Sequence[float]) -> tuple[float, float]:
    """Accuracy and its binomial SE."""
    acc = float(np.mean(scores))
    return acc, bernoulli_sd(acc) / math.sqrt(len(scores))


def tb_niah(record: Mapping[str, Any], p: Profile) -> tuple[dict[str, dict[tuple[int, float], float]], Report]:
    """TB-NIAH of the base as it is: accuracy per length x depth (the heat map's table, keyed by the model's name)
    and the report. The claim tested (:func:`repro.claims.as_is.headlines`): retrieval holds through the window, i.e.
    accuracy at the longest of ``eval.lengths`` is the same as at the shortest (a claim of sameness: it fails when
    the drop is significant)."""
    rows, name = record["rows"], p.model.pretrained
    cells: dict[tuple[int, float], list[float]] = {}
    for r in rows:
        cells.setdefault((int(r["target_length"]), float(r["depth"])), []).append(float(r["score"]))
    table = {k: float(np.mean(v)) for k, v in sorted(cells.items())}
    window = record.get("max_position_embeddings") or max(p.eval.lengths)
    lengths = sorted({k[0] for k in cells})
    by_len = {L: paired_scores(rows, L) for L in lengths}
    out = [{"model": name, "length": L, "depth": d, "accuracy %": pct(acc), "n": len(cells[(L, d)])}
           for (L, d), acc in table.items()]
    per_length = []
    for L in lengths:
        acc, se = _acc(list(by_len[L].values()))
        per_length.append({"model": name, "length": L, "depth": "all", "accuracy %": pct(acc), "SE %": pct(se),
                           "n": len(by_len[L])})
    ours = {str(L): float(np.mean(list(s.values()))) for L, s in by_len.items()}

    def se(a: str, b: str) -> float | None:
        xa, xb = by_len.get(int(a)), by_len.get(int(b))
        seeds = sorted(set(xa) & set(xb)) if xa is not None and xb is not None else []
        return exact_se([xa[s] for s in seeds], [xb[s] for s in seeds]) if seeds else None

    headline = headlines(p).get("TB-NIAH")
    judged = judge(headline, ours, se) if headline else None
    short, long_ = min(p.eval.lengths), max(p.eval.lengths)
    cap = (f"{TASK_LABEL} by length and needle depth, {p.eval.samples} prompts per cell (per length: "
           f"{len(p.eval.depths)} depths pooled, binomial SE), the pretrained model as it is: no RoPE scaling, its "
           f"own {window} positions, chat template {record['chat_template']} ({record['chat_template_flag']}). "
           f"{model_note(p)}")
    ours_txt = "; ".join(f"{r['length']}: {r['accuracy %']:.0f}% ± {r['SE %']:.0f}" for r in per_length)
    verdict, how = (judged.verdict, judged.how) if judged else ("n/a", "one length: nothing to compare")
    note = (f"The paper's row: an extended model retrieves at its window. Here nothing is trained: the pretrained "
            f"model (trained to {window} positions) at its own window; the claim tested is that its accuracy at "
            f"{long_} equals that at {short} (paired prompts, McNemar's exact p). {how}")
    return {name: table}, Report("TB-NIAH", [{"name": "TB-NIAH", "rows": out + per_length,
                                              "columns": ["model", "length", "depth", "accuracy %", "SE %", "n"],
                                              "caption": cap}],
                                 ours=f"{name}: {ours_txt}", agrees=verdict, note=note,
                                 claims=judged.claims if judged else ())


def rp_tab45(records: Mapping[str, Mapping[str, Any]], native: Mapping[str, Any] | None,
             p: Profile) -> tuple[dict[str, dict[int, float | None]], Report]:
    """RP-Tab4/5's extrapolation without training: per scaling (``none``, ``linear:F``, ...), accuracy at each
    ``real.scaled_lengths`` beyond the window (``records``: scaling -> record), with the unscaled model at its window
    from ``native`` (the TB-NIAH record) beside them. Returns the figure's series (percent by length per scaling) and
    the report. Claims: each scaling above no scaling at each scaled length, paired prompts, Holm over the claims."""
    rows, series, ours, by = [], {}, {}, {}
    for scaling, rec in records.items():
        series[scaling] = {}
        for L in sorted({int(r["target_length"]) for r in rec["rows"]}):
            s = paired_scores(rec["rows"], L)
            acc, se = _acc(list(s.values()))
            by[(scaling, L)] = s
            ours[f"{scaling} @{L}"] = acc
            series[scaling][L] = pct(acc)
            rows.append({"scaling": scaling, "length": L, "accuracy %": pct(acc), "SE %": pct(se), "n": len(s),
                         "rope_parameters": rec["rope_parameters"] or "model's own",
                         "chat template": rec["chat_template"]})
    if native is not None:
        for L in sorted({int(r["target_length"]) for r in native["rows"]}):
            acc, se = _acc(list(paired_scores(native["rows"], L).values()))
            series.setdefault("none", {})[L] = pct(acc)
            rows.append({"scaling": "none (TB-NIAH)", "length": L, "accuracy %": pct(acc), "SE %": pct(se),
                         "n": len(paired_scores(native["rows"], L)), "rope_parameters": "model's own",
                         "chat template": native["chat_template"]})
    lengths = p.real.scaled_lengths
    headline = headlines(p).get("RP-Tab4/5")  # each scaling above none at each scaled length
    claims = headline.claims if headline else ()

    def gap_se(a: str, b: str) -> float | None:
        (sa, la), (sb, lb) = (k.rsplit(" @", 1) for k in (a, b))
        xa, xb = by.get((sa, int(la))), by.get((sb, int(lb)))
        if xa is None or xb is None:
            return None
        seeds = sorted(set(xa) & set(xb))
        return exact_se([xa[k] for k in seeds], [xb[k] for k in seeds]) if seeds else None

    judged = judge(headline, ours, gap_se) if headline else None
    window = next(iter(records.values()))["max_position_embeddings"] if records else None
    n = p.real.scaled_samples
    cap = (f"{TASK_LABEL} past the model's {window} positions with training-free RoPE scaling (on top of its own "
           f"rope_theta; its config's positions unchanged), {n} prompts per cell (the same prompts for every scaling), "
           f"binomial SE; 'none (TB-NIAH)': no scaling within the window. {model_note(p)}")
    ours_txt = "; ".join(f"{r['scaling']} @{r['length']}: {r['accuracy %']:.0f}% ± {r['SE %']:.0f} (n={r['n']})"
                         for r in rows if not r["scaling"].endswith("(TB-NIAH)"))
    verdict, how = (judged.verdict, judged.how) if judged else ("n/a", "no scaling to compare with none")
    note = (f"The paper applies YaRN at evaluation to models it trained (2x and 4x their training length); here "
            f"nothing is trained: the pretrained model with each training-free scaling at "
            f"{', '.join(map(str, lengths))} tokens. Claim tested: a scaling retrieves more than no scaling past the "
            f"window (paired prompts, McNemar's exact p, Holm over the {len(claims)} claims). With {n} paired prompts "
            f"the smallest exact p is {2.0 ** (1 - n):.3g}, before Holm: the budget of this profile can show a large "
            f"effect in the table, not beyond noise. {how}")
    return series, Report("RP-Tab4/5", [{"name": "RP-Tab4-5", "rows": rows, "columns": list(rows[0]) if rows else [],
                                         "caption": cap}],
                          ours=ours_txt, agrees=verdict, note=note, claims=judged.claims if judged else ())
