"""Context Denoising Training's evaluation table (CD-Tab2): RULER, BABILong (qa1-qa5 generated offline,
:mod:`repro.tasks.babilong`) and CDT's multi-hop task by length, and LongPPL, for CE (``rp_standard``), LongCE
(``rp_longce``) and CDT (``cdt``) from the same base. Multi-seed arms show mean ± std across training seeds
(:mod:`repro.reports.seeds`). The verdict is the declared headline (:mod:`repro.claims.cdt`): CDT above CE and
LongCE on RULER-13 at the target and on BABILong, below them on LongPPL, each gap against its paired standard error
widened by the training-seed spread (:mod:`repro.reports.noise`; LongPPL: a paired bootstrap over the documents),
Holm-corrected over the six claims."""

from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from repro.profiles import Profile
from repro.reports.cdt_analysis import headline, seed_note, seed_widened
from repro.reports.common import Report, Scores, label, missing_note, scale_note, show
from repro.reports.noise import GapTest, macro
from repro.reports.seeds import cell, multi_seed_note, per_seed, pooled, seed_groups, seed_mean_std, seeds_label
from repro.reports.testbed import base_can_do, doable_caption, doable_ruler
from repro.tasks.summary import BABILONG, MULTIHOP, RULER_TASKS

CD_NAMES = {"base": "Llama-3-8B-Base", "rp_standard": "+ CE", "rp_longce": "+ LongCE", "cdt": "+ CDT",
            "flt": "+ CE (FLT, the testbed's RoPE base)"}
CD_TAB2 = {"base": (None, None, 13.00, None), "rp_standard": (36.01, 13.82, 29.56, 3.90),
           "rp_longce": (84.02, 71.50, 33.48, 3.55), "cdt": (84.76, 73.40, 33.76, 3.04)}
"""CDT Table 2 (Llama-3-8B-Base rows): RULER 32K, 64K, BABILong average 4K-64K, LongPPL (GovReport; Table 13 gives
the same; the base model is above 100)."""
BABILONG_NOTE = ("BABILong: qa1-qa5 generated offline (repro.tasks.babilong: bAbI-style facts of this suite's "
                 "names, places and objects hidden in the suite's background text, nothing downloaded), scored as "
                 "BABILong scores (the answer word contained in the prediction); 'BABILong' is the mean over qa1-qa5 "
                 "and 'BABILong SE' its evaluation standard error over the prompts (sqrt(sum of var / n) / 5); the "
                 "paper's is the average of QA1, QA2, QA3, QA7 and QA8 (its Table 10) over 4K-64K on PG-19 text.")
"""How the BABILong column is generated and scored (the table's caption)."""
CLAIM_ARMS = ("cdt", "rp_standard", "rp_longce")
"""The arms of CD-Tab2's headline (:mod:`repro.claims.cdt`): CDT against CE and LongCE."""


def babilong_se(suite, name: str, length: int) -> float | str:
    """Evaluation SE (percent, one decimal) of checkpoint (arm) ``name``'s BABILong mean at ``length`` over its
    prompts (:meth:`repro.reports.noise.GapTest.arm_se`); ``"n/a"`` without rows or below two prompts a task."""
    se = GapTest(suite, "suite", macro(BABILONG, length)).arm_se(name)
    return "n/a" if se is None else round(se, 1)


def cd_tab2(suite, p: Profile, longppl: dict | None = None) -> Report:
    """RULER, BABILong (qa1-qa5, their mean and its SE) and multi-hop accuracy by length per checkpoint (``suite``:
    name -> ``{"suite": record}``, the base with its ``window`` part too), and LongPPL / PPL per checkpoint where
    given (``longppl``: name -> ``stages.longppl_scores`` record). A record without BABILong rows (a run from before
    the column) reads ``n/a`` there."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    can = base_can_do(suite, p)
    hops = [t for t in MULTIHOP if t in p.eval.suite_tasks]
    rows = [{"model": "base can do it at its window", "length": p.base.window,
             **{f"{t.split('_')[1]}-hop": can[t]["label"] for t in hops}}]
    upto = [L for L in p.eval.lengths if L <= target]

    def mh(s: Scores) -> float | None:  # mean over the lengths <= target of the multi-hop mean
        known = [v for v in (s.average(hops, L) for L in upto) if v is not None]
        return sum(known) / len(known) if known else None

    def bl(s: Scores) -> float | None:  # mean over the lengths <= target of the BABILong mean
        known = [v for v in (s.average(BABILONG, L) for L in upto) if v is not None]
        return sum(known) / len(known) if known else None

    mh_avg, bl_avg, groups, lengths = {}, {}, seed_groups(suite), set(upto)
    for name, reps in groups.items():
        s = pooled(suite, reps, "suite")
        mh_avg[name] = seed_mean_std(per_seed(suite, reps, "suite", mh))[0]
        bl_avg[name] = seed_mean_std(per_seed(suite, reps, "suite", bl))[0]
        if mh_avg[name] is not None:
            lengths &= {L for L in upto if s.average(hops, L) is not None}
        lp = [(longppl or {}).get(r, {}).get("longppl") for r in reps]
        pp = [(longppl or {}).get(r, {}).get("ppl") for r in reps]
        for L in sorted({L for r in reps for L in pooled(suite, [r], "suite").lengths()} or p.eval.lengths):
            pap = CD_TAB2.get(name)

            def avg(tasks, L=L, reps=reps):
                return per_seed(suite, reps, "suite", lambda x: x.average(tasks, L))

            rows.append({"model": seeds_label(name, reps), "length": L,
                         "RULER-13": cell(avg(RULER_TASKS), missing_note(s, RULER_TASKS, L)),
                         "RULER-doable": cell(avg(doable), "n/a (no task the base can do)"),
                         **{f"{t.split('_')[1]}-hop": s.cell(t, L) for t in hops},
                         "multi-hop mean": cell(avg(hops), missing_note(s, hops, L)),
                         **{label(t): s.cell(t, L) for t in BABILONG},
                         "BABILong": cell(avg(BABILONG), missing_note(s, BABILONG, L)),
                         "BABILong SE": babilong_se(suite, name, L),
                         "paper BABILong avg 4K-64K": pap[2] if pap else "-",
                         "LongPPL": cell(lp, "n/a", scale=1.0, digits=3) if L == target and any(lp) else "",
                         "PPL": cell(pp, "n/a", scale=1.0, digits=3) if L == target and any(pp) else "",
                         "paper RULER 32K/64K, BABILong avg, LongPPL": (
                             f"{CD_NAMES.get(name, name)}: {pap[0] or '-'} / {pap[1] or '-'}, {pap[2]}, "
                             f"{pap[3] or '-'}" if pap else "-"),
                         "scale": scale_note(p)})
    ruler = {name: seed_mean_std(per_seed(suite, reps, "suite", lambda x: x.average(RULER_TASKS, target)))[0]
             for name, reps in groups.items()}
    ours, se, how = tab2_claims(suite, groups, longppl or {}, target, upto)
    lp_mean = {n: seed_mean_std([(longppl or {}).get(r, {}).get("longppl") for r in reps])[0]
               for n, reps in groups.items()}
    lp_known = {n: v for n, v in lp_mean.items() if v is not None}
    lp_note = ("LongPPL lowest: " + min(lp_known, key=lp_known.get) + " (paper: cdt); ") if lp_known else ""
    verdict, note = judged = headline("CD-Tab2", ours, se, f"{lp_note}{how}")
    cols = list(dict.fromkeys(k for r in rows for k in r))
    ours_text = "; ".join(f"{n} RULER-13 at {target}: {show(v)}" for n, v in ruler.items()) + \
        "".join(f"; {n} LongPPL {v:.3f}" for n, v in lp_known.items()) + \
        "; " + "; ".join(f"{n} multi-hop mean: {show(v)}" for n, v in mh_avg.items()) + \
        "; " + "; ".join(f"{n} BABILong mean: {show(v)}" for n, v in bl_avg.items())
    cap = (f"CD-Tab2 analog: RULER, BABILong and CDT's multi-hop task (App. B) accuracy (percent) by length; "
           f"LongPPL and PPL (perplexity on the key tokens an evaluator picks by its short-vs-long loss "
           f"gap, and on every token) on held-out code documents at the target. {BABILONG_NOTE} "
           f"{doable_caption(suite, p, hops)} {multi_seed_note(groups)} Scale: {scale_note(p)}.")
    return Report("CD-Tab2", [{"name": "CD-Tab2", "rows": rows, "columns": cols, "caption": cap}],
                  ours=ours_text, agrees=verdict, claims=judged.claims, note=note)


def tab2_claims(suite: Mapping[str, Mapping[str, Any]], groups: Mapping[str, Sequence[str]],
                longppl: Mapping[str, Mapping], target: int, upto: Sequence[int]):
    """CD-Tab2's headline on our numbers: ``(ours, se, how)``, arms ``"<checkpoint>: RULER-13"`` (at ``target``),
    ``": BABILong"`` (the mean over the lengths in ``upto`` where every headline arm has BABILong rows) and
    ``": LongPPL"`` (mean over training seeds), in percent for the scores. ``se`` pairs the prompts
    (:class:`repro.reports.noise.GapTest`) or the documents (:func:`longppl_gap_se`), widened by the training-seed
    spread."""
    arms = [a for a in CLAIM_ARMS if a in groups]
    bl_lengths = [L for L in upto if arms and all(pooled(suite, groups[a], "suite").average(BABILONG, L) is not None
                                                  for a in arms)]
    tests = {"RULER-13": GapTest(suite, "suite", macro(RULER_TASKS, [target]))}
    if bl_lengths:
        tests["BABILong"] = GapTest(suite, "suite", macro(BABILONG, bl_lengths))
    ours: dict[str, float | None] = {}
    for a in CLAIM_ARMS:
        for metric, t in tests.items():
            ours[f"{a}: {metric}"] = t.value(a)
        lp = [longppl.get(r, {}).get("longppl") for r in groups.get(a, ())]
        ours[f"{a}: LongPPL"] = float(np.mean(lp)) if lp and None not in lp else None
    lp_reps = {a: [longppl[r]["longppl"] for r in groups[a]] for a in arms if ours[f"{a}: LongPPL"] is not None}

    def se(x: str, y: str) -> float | None:
        (a, metric), (b, _) = x.split(": ", 1), y.split(": ", 1)
        if metric in tests:
            return tests[metric].se(a, b)
        if metric != "LongPPL" or a not in lp_reps or b not in lp_reps:
            return None
        return seed_widened(longppl_gap_se([longppl[r] for r in groups[a]], [longppl[r] for r in groups[b]]),
                            lp_reps, a, b)

    how = (f"RULER-13 and BABILong (lengths {', '.join(map(str, bl_lengths)) or 'none with every arm'}): "
           f"{tests['RULER-13'].method()}; LongPPL: paired bootstrap over the documents, {seed_note(lp_reps)}")
    return ours, se, how


def longppl_gap_se(reps_a: Sequence[Mapping], reps_b: Sequence[Mapping], B: int = 2000,
                   seed: int = 0) -> float | None:
    """Bootstrap SE of ``LongPPL(a) - LongPPL(b)`` over the documents (every checkpoint scores the same documents
    with the same key tokens, so the documents pair up): each resample aggregates each replicate as the official
    script does (the CE pooled over the key tokens, :func:`repro.analysis.longppl.aggregate`) and averages an arm's
    replicates. None when a record has no per-document rows, the document counts differ, or below two documents."""
    def docs(rec: Mapping) -> np.ndarray | None:
        rows = rec.get("docs")
        if not rows:
            return None
        return np.array([[r["n_key"], math.log(r["longppl"])] if r.get("longppl") and r.get("n_key") else [0.0, 0.0]
                         for r in rows], dtype=float)

    arrays = [[docs(r) for r in reps] for reps in (reps_a, reps_b)]
    flat = [x for arm in arrays for x in arm]
    if not flat or any(x is None for x in flat) or len({x.shape[0] for x in flat}) != 1 or flat[0].shape[0] < 2:
        return None
    idx = np.random.default_rng(seed).integers(0, flat[0].shape[0], (B, flat[0].shape[0]))

    def arm_value(arm: list[np.ndarray]) -> np.ndarray:
        vals = []
        for x in arm:
            w, lg = x[idx, 0], x[idx, 1]
            with np.errstate(invalid="ignore", divide="ignore"):
                vals.append(np.exp((w * lg).sum(axis=1) / w.sum(axis=1)))
        return np.mean(vals, axis=0)

    d = arm_value(arrays[0]) - arm_value(arrays[1])
    d = d[np.isfinite(d)]
    return float(d.std(ddof=1)) if d.size > 1 else None
