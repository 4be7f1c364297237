"""Context Denoising Training's evaluation table (CD-Tab2): RULER, BABILong (qa1-qa5 generated offline,
:mod:`repro.tasks.babilong`) and CDT's multi-hop task by length, and LongPPL, for CE (``rp_standard``), LongCE
(``rp_longce``) and CDT (``cdt``) from the same base. Multi-seed arms show mean ± std across training seeds
(:mod:`repro.reports.seeds`); the order verdict on RULER-13 at the target counts gaps beyond 2 paired SE
(:mod:`repro.reports.noise`)."""

from __future__ import annotations

from repro.profiles import Profile
from repro.reports.common import Report, Scores, direction_agrees, label, missing_note, scale_note, show
from repro.reports.noise import GapTest, macro
from repro.reports.seeds import cell, multi_seed_note, per_seed, pooled, seed_groups, seed_mean_std, seeds_label
from repro.reports.testbed import doable_caption, base_can_do, doable_ruler
from repro.tasks.summary import BABILONG, MULTIHOP, RULER_TASKS

CD_NAMES = {"base": "Llama-3-8B-Base", "rp_standard": "+ CE", "rp_longce": "+ LongCE", "cdt": "+ CDT",
            "flt": "+ CE (FLT, the testbed's RoPE base)"}
CD_TAB2 = {"base": (None, None, 13.00, None), "rp_standard": (36.01, 13.82, 29.56, 3.37),
           "rp_longce": (84.02, 71.50, 33.48, 2.34), "cdt": (84.76, 73.40, 33.76, 2.28)}
"""CDT Table 2 (Llama-3-8B-Base rows): RULER 32K, 64K, BABILong average 4K-64K, LongPPL (GovReport)."""
BABILONG_NOTE = ("BABILong: qa1-qa5 generated offline (repro.tasks.babilong: bAbI-style facts of this suite's "
                 "names, places and objects hidden in the suite's background text, nothing downloaded), scored as "
                 "BABILong scores (the answer word contained in the prediction); 'BABILong' is the mean over qa1-qa5 "
                 "and 'BABILong SE' its evaluation standard error over the prompts (sqrt(sum of var / n) / 5); the "
                 "paper's is the average of QA1, QA2, QA3, QA7 and QA8 (its Table 10) over 4K-64K on PG-19 text.")
"""How the BABILong column is generated and scored (the table's caption)."""


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
    # the paper's claim is about RULER at the longest lengths: the paired test on RULER-13 at the target
    ruler = {name: seed_mean_std(per_seed(suite, reps, "suite", lambda x: x.average(RULER_TASKS, target)))[0]
             for name, reps in groups.items()}
    noise = GapTest(suite, "suite", macro(RULER_TASKS, [target])) if len(groups) > 1 else None
    verdict, how = direction_agrees({n: None if v is None else 100.0 * v for n, v in ruler.items()},
                                    {k: v[1] for k, v in CD_TAB2.items()}, noise=noise)
    lp_mean = {n: seed_mean_std([(longppl or {}).get(r, {}).get("longppl") for r in reps])[0]
               for n, reps in groups.items()}
    lp_known = {n: v for n, v in lp_mean.items() if v is not None}
    lp_note = ("; LongPPL lowest: " + min(lp_known, key=lp_known.get) + " (paper: cdt)") if lp_known else ""
    cols = list(dict.fromkeys(k for r in rows for k in r))
    ours = "; ".join(f"{n} RULER-13 at {target}: {show(v)}" for n, v in ruler.items()) + \
        "".join(f"; {n} LongPPL {v:.3f}" for n, v in lp_known.items()) + \
        "; " + "; ".join(f"{n} multi-hop mean: {show(v)}" for n, v in mh_avg.items()) + \
        "; " + "; ".join(f"{n} BABILong mean: {show(v)}" for n, v in bl_avg.items())
    cap = (f"CD-Tab2 analog: RULER, BABILong and CDT's multi-hop task (App. B) accuracy (percent) by length; "
           f"LongPPL and PPL (perplexity on the key tokens an evaluator picks by its short-vs-long loss "
           f"gap, and on every token) on held-out code documents at the target. {BABILONG_NOTE} "
           f"{doable_caption(suite, p, hops)} {multi_seed_note(groups)} Scale: {scale_note(p)}.")
    return Report("CD-Tab2", [{"name": "CD-Tab2", "rows": rows, "columns": cols, "caption": cap}],
                  ours=ours, agrees=verdict, note=f"RULER-13 at the target (paper: 64K): {how}{lp_note}")
