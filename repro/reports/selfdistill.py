"""RoPE-perturbed self-distillation's evaluation tables (RP-Tab1/2, RP-Fig1a, RP-Tab14, RP-Tab15, RP-Tab4/5)
from the records of :func:`repro.recipes.plans.suite_plan`, with the paper's numbers keyed by our checkpoint names.

An arm trained with several seeds (``flt``, ``flt@seed1``, ...; :mod:`repro.reports.seeds`) is one row: its
averages are mean ± std across seeds, its per-task cells the mean over them. Each verdict is the target's declared
headline (:mod:`repro.claims.selfdistill`) judged by :func:`verdict_of`: every claim's gap against its paired
standard error widened by the training-seed spread (:class:`repro.reports.noise.GapTest`), Holm-corrected within
the table; the other pairs are shown in the note for context and never decide.
"""

from __future__ import annotations

import math
from statistics import mean
from typing import Callable, Mapping

from repro.claims import headline_of
from repro.claims.selfdistill import PAPER_STD_KEY, std_key, yarn_key
from repro.profiles import Profile
from repro.reports.common import SHORT, Report, Scores, direction_agrees, missing_note, pct, scale_note, scores_of, \
    show
from repro.reports.headline import Judgement, judge
from repro.reports.noise import GapTest, depth_decile, macro
from repro.reports.seeds import cell, multi_seed_note, per_seed, pooled, seed_groups, seed_mean_std, seeds_label
from repro.reports.testbed import doable_caption, base_can_do, doable_ruler
from repro.tasks.summary import POSITION_SPECS, RULER_TASKS, accuracy_by_depth_decile, mean_std, ruler_in_suite

# -- the paper's numbers, keyed by our checkpoint names ------------------------------------------
RP_NAMES = {"rp_standard": "Standard", "rp_longce": "LongCE", "rp_pose": "PoSE", "rp_cyclic": "Ours (cyclic shift)",
            "rp_skip": "Ours (skip)", "rp_skip_longce": "Ours (skip) + LongCE"}
"""Our checkpoint names of the paper's rows. ``rp_standard`` is the paper's Standard (full-length training with the
raised RoPE base of every arm of the comparison); the testbed's ``flt`` keeps the base model's RoPE base."""
STANDARD = "rp_standard"
"""The reference of the self-distillation verdicts (``flt`` stands in while it is not trained)."""
RP_METHODS = ("rp_skip", "rp_cyclic")
"""Checkpoint names of the self-distillation arms (the 'ours' of RP-Fig1a)."""
RP_TAB1 = {"rp_standard": (85.23, 57.25), "rp_longce": (86.11, 52.51), "rp_pose": (87.20, 67.47),
           "rp_cyclic": (87.33, 71.30), "rp_skip": (87.87, 69.29)}
"""RoPE-perturbed self-distillation Table 1, Llama-3-8B-I RULER at 32K, 64K (half the target, the target)."""
RP_TAB2 = {
    "rp_standard": (57.3, 76.8, 99.4, 67.2, 84.2, 31.0, 0.0, 85.2, 87.1, 70.4, 7.9, 54.7, 46.8, 33.6),
    "rp_longce": (52.5, 98.2, 99.2, 74.6, 93.2, 18.4, 0.0, 90.3, 89.9, 4.9, 4.9, 18.9, 54.6, 35.6),
    "rp_pose": (67.5, 99.6, 100.0, 75.6, 90.2, 70.6, 6.6, 86.2, 90.5, 61.4, 22.7, 79.8, 53.8, 40.2),
    "rp_cyclic": (71.3, 100.0, 100.0, 81.6, 86.8, 88.4, 27.4, 93.1, 93.6, 67.1, 16.1, 80.7, 51.6, 41.0),
    "rp_skip": (69.3, 100.0, 100.0, 75.0, 94.0, 82.6, 20.4, 88.6, 94.5, 43.9, 26.1, 82.5, 53.2, 40.0)}
"""Table 2 (Llama 64K): average, then S-1 ... QA-2 in RULER_TASKS order."""
RP_TAB4 = {"rp_standard": (42.03, 23.90), "rp_longce": (46.54, 26.91), "rp_pose": (58.21, 43.18),
           "rp_cyclic": (60.89, 45.33), "rp_skip": (59.43, 44.74)}
"""Table 4, Llama with YaRN at 2x (128K) and 4x (256K) the 64K training length."""
RP_TAB14 = {"rp_standard": 44.0, "rp_longce": 56.2, "rp_pose": 48.2, "rp_cyclic": 42.0, "rp_skip": 59.4}
"""Table 14, NIAH-position at 64K (baseline = standard fine-tuning)."""
RP_TAB15 = {"rp_standard": ((85.26, 0.08), (57.32, 0.12)), "rp_cyclic": ((87.29, 0.08), (71.25, 0.14)),
            "rp_skip": ((87.82, 0.09), (69.32, 0.09))}
"""Table 15, mean (std) of RULER 32K and 64K over evaluation seeds."""
RP_TAB15_MAX_STD = 0.17


def verdict_of(target: str, ours: Mapping[str, float | None], se: Callable[[str, str], float | None],
               context: str = "") -> Judgement:
    """``(verdict, note)`` of ``target``'s declared headline (:func:`repro.claims.headline_of`) on ``ours`` (key ->
    value) with ``se(a, b)`` the standard error of ``ours[a] - ours[b]`` (:func:`repro.reports.headline.judge`);
    the note is the headline result, then ``context`` (pairs shown, never deciding)."""
    headline = headline_of(target)
    if headline is None:
        raise ValueError(f"target={target!r} has no declared headline; allowed: the keys of "
                         "repro.claims.selfdistill.HEADLINES")
    return judge(headline, ours, se).with_context(
        f"Other pairs, for context (not deciding): {context}" if context else "")


def _headline(s: Scores, suite, p: Profile, length: int) -> tuple[float | None, str]:
    """RULER over the tasks the base can do when there are any, else over all 13."""
    doable = doable_ruler(suite, p)
    if doable:
        return s.average(doable, length), f"RULER-doable ({len(doable)} tasks)"
    return s.average(RULER_TASKS, length), "RULER-13"


def _headline_test(suite, p: Profile, part: str, length: int) -> GapTest:
    """The paired test of :func:`_headline` on ``part`` at ``length``."""
    return GapTest(suite, part, macro(doable_ruler(suite, p) or RULER_TASKS, length))


def _arm_headline(suite, p: Profile, part: str, reps, length: int) -> list[float | None]:
    return per_seed(suite, reps, part, lambda s: _headline(s, suite, p, length)[0])


def _percent(d: dict[str, float | None]) -> dict[str, float | None]:
    """Fractions -> percent (unrounded: the verdicts compare these with standard errors in points)."""
    return {k: None if v is None else 100.0 * v for k, v in d.items()}


# -- RP-Tab1/2 -----------------------------------------------------------------------------------
def rp_tab1_2(suite, p: Profile) -> Report:
    """Per-task RULER at the target (Table 2 shape) and RULER average per length (Table 1 shape)."""
    target = p.extend.target_window
    can = base_can_do(suite, p)
    doable = doable_ruler(suite, p)
    cols = ["model", "source", "Avg-13", "Avg-doable", *SHORT.values()]
    rows = [{"model": "base can do it at its window", "source": f"base @{p.base.window}", "Avg-13": "",
             "Avg-doable": f"{len(doable)} tasks", **{SHORT[t]: can[t]["label"] for t in ruler_in_suite(p)}}]
    avg, groups = {}, seed_groups(suite)
    for name, reps in groups.items():
        s = pooled(suite, reps, "suite")
        v13 = per_seed(suite, reps, "suite", lambda x: x.average(RULER_TASKS, target))
        avg[name] = seed_mean_std(v13)[0]
        rows.append({"model": seeds_label(name, reps), "source": f"ours @{target}",
                     "Avg-13": cell(v13, missing_note(s, RULER_TASKS, target)),
                     "Avg-doable": cell(per_seed(suite, reps, "suite", lambda x: x.average(doable, target)),
                                        "n/a (no task the base can do)"),
                     **{SHORT[t]: s.cell(t, target) for t in ruler_in_suite(p)}})
    for name, vals in RP_TAB2.items():
        rows.append({"model": RP_NAMES[name], "source": "paper (Llama-3-8B-I, 64K)", "Avg-13": vals[0],
                     "Avg-doable": "-", **dict(zip(SHORT.values(), vals[1:]))})
    len_cols = ["model", *(f"RULER-13 @{L}" for L in p.eval.lengths), *(f"RULER-doable @{L}" for L in p.eval.lengths),
                "paper RULER 32K / 64K", "scale"]
    by_len = []
    for name, reps in groups.items():
        s = pooled(suite, reps, "suite")
        r = {"model": seeds_label(name, reps)}
        for L in p.eval.lengths:
            r[f"RULER-13 @{L}"] = cell(per_seed(suite, reps, "suite", lambda x, L=L: x.average(RULER_TASKS, L)),
                                       missing_note(s, RULER_TASKS, L))
            r[f"RULER-doable @{L}"] = cell(per_seed(suite, reps, "suite", lambda x, L=L: x.average(doable, L)),
                                           "n/a (no task the base can do)")
        pap = RP_TAB1.get(name)
        r["paper RULER 32K / 64K"] = f"{RP_NAMES[name]} {pap[0]} / {pap[1]}" if pap else "-"
        r["scale"] = scale_note(p)
        by_len.append(r)
    head = {n: seed_mean_std(_arm_headline(suite, p, "suite", reps, target))[0] for n, reps in groups.items()}
    metric = _headline(Scores(None), suite, p, target)[1]
    noise = _headline_test(suite, p, "suite", target)
    verdict, how = judged = verdict_of("RP-Tab1/2", _percent(head), noise.se,
                              direction_agrees(_percent(head), {k: v[1] for k, v in RP_TAB1.items()}, noise=noise)[1])
    ours = "; ".join(f"{n} Avg-13 {show(avg[n])}, {metric} {show(head[n])}" for n in groups)
    seeds = multi_seed_note(groups)
    cap = (f"RP-Tab2 analog: RULER per task (percent) at the target {target}, with the paper's rows. "
           f"{doable_caption(suite, p, RULER_TASKS)} {seeds} Scale: {scale_note(p)}.")
    cap1 = f"RP-Tab1 analog: RULER average per evaluation length. {seeds} Scale: {scale_note(p)}."
    return Report("RP-Tab1/2", [{"name": "RP-Tab1-2", "rows": rows, "columns": cols, "caption": cap},
                                {"name": "RP-Tab1-2-lengths", "rows": by_len, "columns": len_cols, "caption": cap1}],
                  ours=f"@{target}: {ours}", agrees=verdict, note=f"{how}. Metric: {metric} at the target",
                  claims=judged.claims)


# -- RP-Fig1a ------------------------------------------------------------------------------------
def rp_fig1a(suite, p: Profile) -> tuple[dict[str, list[float | None]], Report]:
    """Accuracy by answer-depth decile of ``eval.decile_task`` at the target, per checkpoint."""
    task, target = p.eval.decile_task, p.extend.target_window
    curves, rows, stats = {}, [], {}
    groups = seed_groups(suite)
    for name, reps in groups.items():
        s = pooled(suite, reps, "deciles")
        rs = [r for r in s.rows if r["task"] == task]
        if not rs:
            rows.append({"model": name, "decile": "all", "accuracy": "n/a (not evaluated)", "n": 0})
            continue
        curve = accuracy_by_depth_decile(rs, task)
        curves[name] = curve
        vals = [v for v in curve if v is not None]
        stats[name] = (mean(vals), max(vals) - min(vals))
        for i, v in enumerate(curve):
            rows.append({"model": name, "decile": f"{i / 10:.1f}-{(i + 1) / 10:.1f}", "accuracy": show(v),
                         "n": sum(min(int(r["depth"] * 10), 9) == i for r in rs)})
    for name, (m, spread) in stats.items():
        rows.append({"model": name, "decile": "mean / spread (max-min)", "accuracy": f"{pct(m)} / {pct(spread)}",
                     "n": ""})
    ours_rp = [n for n in RP_METHODS if n in stats]
    ref = STANDARD if STANDARD in stats else "flt"
    if ours_rp and ref in stats:
        verdict, how = judged = _fig1a_verdict(suite, task, curves, stats, ours_rp, ref)
    else:
        verdict, how = judged = Judgement("n/a", "no self-distillation checkpoint yet; curves shown for what exists")
    can = base_can_do(suite, p).get(task, {"label": "n/a (not in suite)"})
    ours = "; ".join(f"{n} mean {pct(m)}, spread {pct(sp)}" for n, (m, sp) in stats.items())
    cap = (f"RP-Fig1a data: {task} accuracy (percent) by needle-depth decile at the target {target}, "
           f"{p.eval.decile_samples} samples per decile. Base can do {task} at its window: {can['label']}. "
           f"{multi_seed_note(groups)} Scale: {scale_note(p)}.")
    table = {"name": "RP-Fig1a", "rows": rows, "columns": ["model", "decile", "accuracy", "n"], "caption": cap}
    return curves, Report("RP-Fig1a", [table], ours=ours, agrees=verdict, note=how, claims=judged.claims)


def decile_ses(suite, p: Profile) -> dict[str, list[float | None]]:
    """RP-Fig1a's standard errors beside :func:`rp_fig1a`'s curves: per arm (replicates grouped) and depth decile of
    ``eval.decile_task``, the SE of the decile's accuracy (a fraction) over its prompts, widened by the
    training-seed spread as a gap would be (:meth:`repro.reports.noise.GapTest.point_se`); None for an empty
    decile or one with a single prompt."""
    task = p.eval.decile_task
    tests = [GapTest(suite, "deciles", {(task, i): 1.0}, stratum=depth_decile) for i in range(10)]
    out = {}
    for name, reps in seed_groups(suite).items():
        if any(r["task"] == task for r in pooled(suite, reps, "deciles").rows):
            out[name] = [None if (se := t.point_se(name)) is None else se / 100 for t in tests]
    return out


def _fig1a_verdict(suite, task: str, curves, stats, ours_rp, ref: str = STANDARD) -> Judgement:
    """RP-Fig1a's headline: each self-distillation arm against Standard (``ref``; the testbed's ``flt`` stands in
    while ``rp_standard`` is not trained): a higher mean and a smaller spread (max - min) of the decile curve, each
    gap against its paired SE (bootstrap over the prompts of each decile, widened by the training-seed spread)."""
    cells = {(task, i): 0.1 for i, v in enumerate(curves[ref]) if v is not None}
    tests = {"mean": GapTest(suite, "deciles", cells, stratum=depth_decile),
             "spread": GapTest(suite, "deciles", cells, stratum=depth_decile,
                               metric=lambda m: m.max(axis=1) - m.min(axis=1))}
    arm = {n: ref if n == STANDARD else n for n in (STANDARD, *ours_rp)}  # claim arm -> our checkpoint
    ours = {f"{n} {k}": 100 * stats[c][i] for n, c in arm.items() for i, k in enumerate(("mean", "spread"))}

    def se(a: str, b: str) -> float | None:
        (na, ka), (nb, _) = a.rsplit(" ", 1), b.rsplit(" ", 1)
        return tests[ka].se(arm[na], arm[nb])

    stand_in = f"; {ref} stands in for {STANDARD} (not trained)" if ref != STANDARD else ""
    return verdict_of("RP-Fig1a", ours, se).with_context(stand_in + f"; noise: {tests['mean'].method()}", sep="")


# -- RP-Tab14 ------------------------------------------------------------------------------------
def rp_tab14(suite, p: Profile) -> Report:
    """NIAH-position accuracy per ordinal at the target per checkpoint."""
    target = p.extend.target_window
    specs = [s for s in POSITION_SPECS if s in p.eval.suite_tasks]
    can = base_can_do(suite, p)
    rows = [{"model": "base can do it at its window", **{sp.split("=")[1]: can[sp]["label"] for sp in specs}}]
    avg, groups = {}, seed_groups(suite)
    for name, reps in groups.items():
        s = pooled(suite, reps, "suite")
        vals = per_seed(suite, reps, "suite", lambda x: x.average(specs, target))
        avg[name] = seed_mean_std(vals)[0]
        pap = RP_TAB14.get(name)
        rows.append({"model": seeds_label(name, reps), **{sp.split("=")[1]: s.cell(sp, target) for sp in specs},
                     "mean": cell(vals, missing_note(s, specs, target)),
                     "paper (64K NIAH-position)": f"{RP_NAMES[name]} {pap}" if pap else "-", "scale": scale_note(p)})
    noise = GapTest(suite, "suite", macro(specs, target)) if specs else None
    verdict, how = judged = verdict_of("RP-Tab14", _percent(avg), noise.se if noise else lambda a, b: None,
                              direction_agrees(_percent(avg), RP_TAB14, noise=noise)[1])
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cap = (f"RP-Tab14 analog: NIAH-position (4 occurrences of one key) accuracy (percent) per ordinal at the "
           f"target {target}. {doable_caption(suite, p, specs)} {multi_seed_note(groups)} Scale: {scale_note(p)}.")
    return Report("RP-Tab14", [{"name": "RP-Tab14", "rows": rows, "columns": cols, "caption": cap}],
                  ours="; ".join(f"{n} {show(v)}" for n, v in avg.items()), agrees=verdict,
                  note=f"{how}. Metric: mean over ordinals at the target", claims=judged.claims)


# -- RP-Tab15 ------------------------------------------------------------------------------------
def seed_rows(suite, name: str, p: Profile) -> list[dict]:
    """RULER rows at the target from every evaluation seed (suite part + seeds part), ``seed`` = eval seed."""
    target = p.extend.target_window
    out = []
    for part in ("suite", "seeds"):
        for r in scores_of(suite, name, part).rows:
            if r["length"] == target and r["task"] in RULER_TASKS:
                out.append({**r, "seed": r.get("eval_seed", 0)})
    return out


def _over_eval_seeds(rs: list[dict], tasks, target: int) -> tuple[float, float, int] | None:
    """(mean, sample std, n) over evaluation seeds of the average over ``tasks``; None when a seed misses one."""
    def agg(rows_):
        v = Scores({"results": rows_}).average(tasks, target)
        if v is None:
            raise ValueError("missing tasks")
        return v

    if not rs or not tasks:
        return None
    try:
        return mean_std(rs, agg)
    except ValueError:
        return None


def std_se(sd: float, n: int) -> float | None:
    """Standard error of a sample std ``sd`` over ``n`` normal draws, ``sd / sqrt(2 (n - 1))`` (the large-sample
    approximation); None below two draws."""
    if sd < 0 or n < 0:
        raise ValueError(f"sd={sd}, n={n}; allowed: sd >= 0, n >= 0")
    return sd / math.sqrt(2 * (n - 1)) if n >= 2 else None


def _tab15_claims(stats: Mapping[str, tuple[float, float, int]]):
    """RP-Tab15's ``ours`` (each arm's evaluation-seed std, and the paper's bound) and ``se``: an arm's std has the
    SE of :func:`std_se`, the paper's bound none."""
    ours: dict[str, float | None] = {std_key(n): sd for n, (_, sd, _) in stats.items()}
    ours[PAPER_STD_KEY] = RP_TAB15_MAX_STD
    by_key = {std_key(n): (sd, k) for n, (_, sd, k) in stats.items()}

    def se(a: str, b: str) -> float | None:
        s = [std_se(*by_key[x]) if x in by_key else 0.0 for x in (a, b)]
        return None if None in s else math.sqrt(s[0] ** 2 + s[1] ** 2)

    return ours, se


def _tab15_context(stats: Mapping[str, tuple[float, float, int]]) -> str:
    """The largest evaluation-seed std against the smallest gap between two arms' means (a std below every gap
    leaves the table's order readable)."""
    if not stats:
        return ""
    worst = max(sd for _, sd, _ in stats.values())
    means = sorted(m for m, _, _ in stats.values())
    gap = min((b - a for a, b in zip(means, means[1:])), default=None)
    return f"max std {worst:.2f} points" + ("" if gap is None else f", smallest gap between arms {gap:.2f}")


def rp_tab15(suite, p: Profile) -> Report:
    """Mean and sample std over evaluation seeds of RULER-13 and RULER-doable at the target, and the std over
    training seeds of the headline (RULER-doable, else RULER-13) for multi-seed arms."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    head_tasks = doable or RULER_TASKS
    rows, stats, train = [], {}, {}
    groups = seed_groups(suite)
    for name, reps in groups.items():
        rs = [r for n in reps for r in seed_rows(suite, n, p)]  # replicates pooled per evaluation seed
        row = {"model": seeds_label(name, reps)}
        for label, tasks in (("RULER-13", RULER_TASKS), ("RULER-doable", doable)):
            got = _over_eval_seeds(rs, tasks, target)
            why = (missing_note(pooled(suite, reps, "suite"), tasks, target) if tasks
                   else "n/a (no task the base can do)")
            row[f"{label} mean (std) @{target}"] = f"{pct(got[0])} ({100 * got[1]:.2f})" if got else why
            if got and tasks == head_tasks:
                stats[name] = (100 * got[0], 100 * got[1], got[2])
        row["seeds"] = len({r["seed"] for r in rs})
        per_rep = [got[0] for n in reps if (got := _over_eval_seeds(seed_rows(suite, n, p), head_tasks, target))]
        row["training seeds"] = len(reps)
        if len(per_rep) > 1:
            train[name] = (100 * seed_mean_std(per_rep)[1], len(per_rep))
        row["training-seed std"] = f"{train[name][0]:.2f}" if name in train else "-"
        pap = RP_TAB15.get(name)
        row["paper RULER 32K / 64K mean (std)"] = (f"{RP_NAMES[name]} {pap[0][0]} ({pap[0][1]}) / {pap[1][0]} "
                                                   f"({pap[1][1]})" if pap else "-")
        row["scale"] = scale_note(p)
        rows.append(row)
    metric = f"RULER-doable ({len(doable)} tasks)" if doable else "RULER-13"
    verdict, how = judged = verdict_of("RP-Tab15", *_tab15_claims(stats), _tab15_context(stats))
    how += "; training-seed std: " + (", ".join(f"{n} {sd:.2f} over {k} seeds" for n, (sd, k) in train.items())
                                      if train else "not measured (one training seed per arm)")
    ours = "; ".join(f"{n} {m:.1f} ({sd:.2f}) over {k} seeds" for n, (m, sd, k) in stats.items()) or "n/a"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cap = (f"RP-Tab15 analog: mean (sample std) over evaluation seeds of RULER (percent) at the target {target}; "
           f"each seed draws fresh examples; training-seed std = sample std over an arm's training seeds of its "
           f"{metric} mean over evaluation seeds. {doable_caption(suite, p, RULER_TASKS)} "
           f"{multi_seed_note(groups)} Scale: {scale_note(p)}.")
    return Report("RP-Tab15", [{"name": "RP-Tab15", "rows": rows, "columns": cols, "caption": cap}],
                  ours=f"{metric}: {ours}", agrees=verdict, note=how, claims=judged.claims)


# -- RP-Tab4/5 -----------------------------------------------------------------------------------
def rp_tab4_5(suite, p: Profile) -> Report:
    """RULER beyond the target: without RoPE change (when in the grid) and with YaRN per factor."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    rows, head = [], {}  # head: yarn_key(arm, factor) -> the arm's headline with YaRN at that factor
    factors = sorted({*p.eval.yarn_factors, *p.selfdistill.yarn_factors})  # the suite's and the RP arms' factors
    groups = seed_groups(suite)
    for name, reps in groups.items():
        s = pooled(suite, reps, "suite")

        def avg(part, tasks, L, reps=reps):
            return per_seed(suite, reps, part, lambda x: x.average(tasks, L))

        row = {"model": seeds_label(name, reps),
               f"RULER-13 @{target}": cell(avg("suite", RULER_TASKS, target), missing_note(s, RULER_TASKS, target))}
        for f in factors:
            L, part = int(round(f * target)), f"yarn{f:g}"
            y = pooled(suite, reps, part)
            if L in p.eval.lengths:
                row[f"RULER-13 @{L} no YaRN"] = cell(avg("suite", RULER_TASKS, L), missing_note(s, RULER_TASKS, L))
            row[f"RULER-13 YaRN {f:g}x @{L}"] = cell(avg(part, RULER_TASKS, L), missing_note(y, RULER_TASKS, L))
            row[f"RULER-doable YaRN {f:g}x @{L}"] = cell(avg(part, doable, L), "n/a (no task the base can do)")
            head[yarn_key(name, f)] = seed_mean_std(_arm_headline(suite, p, part, reps, L))[0]
        pap = RP_TAB4.get(name)
        row["paper YaRN 2x / 4x (Llama 128K / 256K)"] = f"{RP_NAMES[name]} {pap[0]} / {pap[1]}" if pap else "-"
        row["scale"] = scale_note(p)
        rows.append(row)
    verdict, how = judged = _tab4_5_verdict(suite, p, factors, list(groups), _percent(head))
    metric = f"RULER-doable ({len(doable)} tasks)" if doable else "RULER-13"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cap = (f"RP-Tab4/5 analog: RULER (percent) beyond the target {target} with YaRN at evaluation time "
           f"(base: from its {p.base.window} window; extended checkpoints: from {target}). "
           f"{doable_caption(suite, p, RULER_TASKS)} {multi_seed_note(groups)} Scale: {scale_note(p)}.")
    return Report("RP-Tab4/5", [{"name": "RP-Tab4-5", "rows": rows, "columns": cols, "caption": cap}],
                  ours="; ".join(f"{metric} YaRN {f:g}x: " + ", ".join(
                      f"{n} {show(head[yarn_key(n, f)])}" for n in groups) for f in factors), agrees=verdict, note=how,
                  claims=judged.claims)


def _tab4_5_verdict(suite, p: Profile, factors, arms, ours: Mapping[str, float | None]) -> Judgement:
    """RP-Tab4/5's headline over every YaRN factor at once (Holm over all its claims), each factor's gaps against
    the paired test of that factor's part; the other pairs of each factor are the context."""
    if not factors:
        return Judgement("n/a", "no YaRN factor evaluated")
    target = p.extend.target_window
    tests = {f: _headline_test(suite, p, f"yarn{f:g}", int(round(f * target))) for f in factors}
    where = {yarn_key(n, f): (n, f) for f in factors for n in arms}

    def se(a: str, b: str) -> float | None:
        (na, fa), (nb, fb) = where[a], where[b]
        if fa != fb:
            raise ValueError(f"claim {a} vs {b}: YaRN factors {fa:g} and {fb:g}; allowed: one factor per claim")
        return tests[fa].se(na, nb)

    column = {2.0: 0, 4.0: 1}  # RP_TAB4's columns
    context = " | ".join(f"YaRN {f:g}x: " + direction_agrees(
        {n: ours.get(yarn_key(n, f)) for n in arms}, {k: v[column[f]] for k, v in RP_TAB4.items()},
        noise=tests[f])[1] for f in factors if f in column)
    return verdict_of("RP-Tab4/5", ours, se, context)
