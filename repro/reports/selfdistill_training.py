"""RoPE-perturbed self-distillation's compute tables: RP-Cost (step time against Standard) and RP-Fig4 (RULER
against wall-clock, Standard trained for as many more steps as the measured overhead), and the short-context
stand-in of its Table 7.

Each verdict is the target's declared headline (:mod:`repro.claims.selfdistill`, judged by
:func:`repro.reports.selfdistill.verdict_of`), with a standard error from repeated measurements: RP-Cost's from the
spread of the per-round ratios over the interleaved timing rounds, RP-Fig4's from the paired bootstrap over prompts
at equal wall-clock widened by the training-seed spread of the main arms, RP-Tab7's from the training-seed spread of
the held-out loss.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Mapping, Sequence

from repro.claims.selfdistill import PAPER_RATIO_KEY
from repro.profiles import Profile
from repro.reports.common import Report, scale_note, scores_of, show
from repro.reports.cost_proxies import bound_columns, proxy_summary, proxy_table
from repro.reports.headline import Judgement
from repro.reports.noise import PROMPT_KEY, GapTest, align, by_prompt, macro
from repro.reports.seeds import cell, seed_groups
from repro.reports.selfdistill import verdict_of
from repro.reports.testbed import doable_ruler
from repro.stats import seed_spread
from repro.tasks.summary import NIAH_TASKS, RULER_TASKS
from repro.timing import StepTiming, check_equal_timing

PAPER_RATIO = 1.6
"""§3.7: the method's wall-clock per step relative to Standard."""
RATIO_GOAL = 1.5
"""The prefix-shared skip pass's expected ratio with ``s`` uniform (half a second pass)."""
RP_TAB7 = {"base": 63.7, "rp_standard": 64.1, "rp_longce": 64.4, "rp_pose": 64.1, "rp_cyclic": 64.1, "rp_skip": 63.8}
"""Table 7, Llama: average of MMLU, HellaSwag, WinoGrande, OpenBookQA."""


def _num(x: float | None, digits: int = 1) -> float | str:
    """A plain number rounded (not a fraction shown as percent: :func:`repro.reports.common.show`), or n/a."""
    return "n/a" if x is None else round(float(x), digits)


RUN_NAMES = {"Standard": "rp_standard", "skip, prefix-shared": "rp_skip", "cyclic (two full passes)": "rp_cyclic",
             "LongCE": "rp_longce", "skip + LongCE": "rp_skip_longce"}
"""Bench arm -> the trained arm whose own step time is shown beside (:data:`repro.recipes.plans.TIMED_ARMS`)."""
PART_COLUMNS = {"first_pass": "first pass s", "clm": "CLM s", "second_pass": "second pass s",
                "consistency": "KL s", "backward": "backward s", "optimizer": "optimizer s"}
"""Step part (:data:`repro.bench.selfdistill_cost.PARTS`) -> its column."""


def round_ratios(bench: Mapping[str, Mapping[str, Any]], reference: str = "Standard"
                 ) -> tuple[dict[str, float | None], Callable[[str, str], float | None]]:
    """RP-Cost's ``ours`` and ``se``: each arm's mean over rounds of its seconds over ``reference``'s in the same
    round (the rounds of :func:`repro.timing.interleaved_rounds`), plus the paper's ratio under
    :data:`repro.claims.selfdistill.PAPER_RATIO_KEY`. ``se(a, b)``: the SE over rounds of the per-round difference
    of the two arms' ratios (paired by round), of ``a``'s ratio alone against the paper's number; None below two
    rounds."""
    if reference not in bench:
        raise ValueError(f"reference={reference!r} not timed; allowed: one of {', '.join(bench) or 'no arm'}")
    ref = bench[reference]["seconds"]
    ratios = {}
    for name, r in bench.items():
        if len(r["seconds"]) != len(ref):
            raise ValueError(f"arm {name!r} has {len(r['seconds'])} rounds, {reference!r} {len(ref)}; allowed: "
                             "every arm timed in the same rounds")
        ratios[name] = [t / rt for t, rt in zip(r["seconds"], ref)]
    ours: dict[str, float | None] = {n: statistics.fmean(v) if v else None for n, v in ratios.items()}
    ours[PAPER_RATIO_KEY] = PAPER_RATIO

    def se(a: str, b: str) -> float | None:
        xa = ratios.get(a)
        xb = ratios.get(b, [0.0] * len(xa or []))  # the paper's number: a constant
        if xa is None or len(xa) < 2:
            return None
        return statistics.stdev([x - y for x, y in zip(xa, xb)]) / math.sqrt(len(xa))

    return ours, se


def rp_cost(bench: Mapping[str, Mapping[str, Any]], p: Profile,
            runs: Mapping[str, float | None] | None = None,
            proxies: Sequence[Mapping[str, Any]] | None = None) -> Report:
    """RP-Cost from :func:`repro.bench.selfdistill_cost.measure_rp_step_costs` (``bench``: arm -> timings, on the
    trained arms' rows at their thread count), where given the trained arms' own median seconds per step (``runs``:
    checkpoint name -> seconds; each trained alone, :data:`repro.recipes.plans.TIMED_ARMS`), and the proxy table
    (``proxies``: :func:`repro.bench.cost_proxies.measure_proxies`)."""
    ref_run = (runs or {}).get("rp_standard")
    rows = []
    for name, r in bench.items():
        run = (runs or {}).get(RUN_NAMES.get(name, ""))
        rows.append({"arm": name, "seconds / step": round(r["seconds_per_step"], 4),
                     "ratio to Standard": round(r["ratio"], 3), **bound_columns(r, name == "Standard"),
                     **{col: round(r["parts"][k], 4) if k in r.get("parts", {}) else ""
                        for k, col in PART_COLUMNS.items()},
                     "training run s / step": "" if run is None else round(run, 4),
                     "training run ratio": "" if run is None or not ref_run else round(run / ref_run, 3),
                     "paper": {"Standard": 1.0, "skip, prefix-shared": PAPER_RATIO,
                               "skip, two full passes": "2 (two passes)"}.get(name, "")})
    shared = bench.get("skip, prefix-shared", {}).get("ratio")
    naive = bench.get("skip, two full passes", {}).get("ratio")
    ours, se = round_ratios(bench)
    agrees, how = judged = verdict_of("RP-Cost", ours, se)
    first = next(iter(bench.values()), {})
    n = len(first.get("seconds", []))
    cap = (f"RP-Cost: seconds per optimizer step (forward, backward, AdamW) of each objective on copies of one "
           f"model, batch {p.extend.batch_size} x {p.extend.target_window} tokens of the trained arms' own rows, "
           f"bf16={p.selfdistill.bf16}, {first.get('threads') or 'default'} CPU thread(s), median of {n} interleaved "
           f"rounds in one run; ratios within the run. Parts (medians, need not add up): the first (standard) pass's "
           f"forward, its CLM term (LongCE's windows included), the perturbed pass's forward, the KL, the backward "
           f"and the optimizer step. FLOP bound and measured / bound as in the proxy table (this "
           f"model's head is a large share of its FLOPs). 'training run': the trained arms' own median step time, "
           f"each trained alone at that thread count. Scale: {scale_note(p)}.")
    tables = [{"name": "RP-Cost", "rows": rows, "columns": list(rows[0]) if rows else [], "caption": cap}]
    if proxies:
        tables.append(proxy_table("RP-Cost-proxies", proxies, "Standard", "ratio to Standard", PART_COLUMNS))
    return Report("RP-Cost", tables,
                  ours=f"skip prefix-shared {_num(shared, 2)}x, two passes {_num(naive, 2)}x Standard's step time"
                       + (f"; proxies: {proxy_summary(proxies, 'Standard')}" if proxies else ""),
                  agrees=agrees, note=f"{how}. Per-round ratio to Standard's step in the same round, mean +- SE "
                                      f"over {n} interleaved rounds (a sameness claim within noise holds: this "
                                      f"headline says yes, partly or no, never tie); our expectation with the "
                                      f"skip point uniform: {RATIO_GOAL}x (half a second pass)", claims=judged.claims)


def fig4_tasks(suite, p: Profile) -> tuple[tuple[str, ...], str]:
    """RP-Fig4's tasks and their name: the RULER tasks the base can do at its window (``RULER-doable (k tasks)``),
    all 13 (``RULER-13``) when it can do none."""
    doable = doable_ruler(suite, p)
    return (doable, f"RULER-doable ({len(doable)} tasks)") if doable else (RULER_TASKS, "RULER-13")


FIG4_BENCH = {"rp_skip": "skip, prefix-shared", "rp_standard_matched": "Standard"}
"""RP-Fig4's curve arm -> the arm of RP-Cost's interleaved benchmark that times its objective (the wall-clock-matched
Standard trains Standard's objective)."""


def fig4_timings(bench: Mapping[str, Mapping[str, Any]] | None) -> dict[str, StepTiming]:
    """RP-Fig4's seconds per step of each curve arm from one fair measurement: RP-Cost's interleaved step benchmark
    (``bench``: :func:`repro.bench.selfdistill_cost.measure_rp_step_costs`; the arms' steps alternate on the same
    rows in one process that runs alone). The curve arms' own training clocks are not used: they trained beside
    different neighbours. Empty without a benchmark."""
    out = {}
    for arm, b in FIG4_BENCH.items():
        r = (bench or {}).get(b)
        if r:
            out[arm] = StepTiming(float(r["seconds_per_step"]), int(r.get("threads") or 0), 0,
                                  f"RP-Cost interleaved benchmark (median of {len(r.get('seconds', []))} rounds)")
    return out


def rp_fig4(curves: Mapping[str, Mapping[int, Mapping[str, Any]]], timings: Mapping[str, StepTiming],
            suite, p: Profile) -> tuple[dict[str, list[tuple[float, float, float | None]]], Report]:
    """RP-Fig4: RULER at the target against wall-clock for each curve arm (``curves``: arm -> step -> record of
    RULER at the target; ``timings``: arm -> its seconds per step, :func:`fig4_timings`). Wall-clock = step x seconds
    per step, every arm's from one measurement (:func:`repro.timing.check_equal_timing` refuses others).
    ``suite`` holds the base's records (which tasks it can do: :func:`fig4_tasks`) and, where trained, the main
    arms' (their training-seed spread widens the standard error). Returns the points, arm -> ``(wall-clock s,
    percent, SE)`` (SE: over the checkpoint's prompts, widened by the main arms' pooled seed spread; None below two
    prompts a task), and the report."""
    check_equal_timing({n: t for n, t in timings.items() if n in curves}, "RP-Fig4")
    seconds = {n: t.seconds for n, t in timings.items()}
    target = p.extend.target_window
    tasks, metric = fig4_tasks(suite, p)
    spread = GapTest(suite, "suite", macro(tasks, target)).pooled_seed_std() if suite else None
    points: dict[str, list[tuple[float, float, float | None]]] = {}
    rows = []
    for name, by_step in curves.items():
        sps = seconds.get(name)
        for step, record in sorted(by_step.items()):
            v = scores_of({name: {"ruler": record}}, name, "ruler").average(tasks, target)
            if v is None or sps is None:
                continue
            e = GapTest({name: {"ruler": record}}, "ruler", macro(tasks, target)).arm_se(name)
            se = None if e is None else math.hypot(e, spread or 0.0)
            points.setdefault(name, []).append((step * sps, 100 * v, se))
            rows.append({"arm": name, "step": step, "seconds / step": round(sps, 4),
                         "wall-clock s": round(step * sps, 1), metric: round(100 * v, 1),
                         "SE": _num(se)})
    verdict, how = judged = _fig4_verdict(curves, seconds, suite, tasks, target, metric)
    first = next(iter(timings.values()), None)
    timed = ("no timing: run the training notebook's RP-Cost first" if first is None else
             f"{first.source}, {first.threads or 'default'} CPU thread(s), run alone: "
             + ", ".join(f"{n} {t.seconds:.3f} s ({FIG4_BENCH[n]})" for n, t in timings.items())
             + "; the arms' own training clocks are not used, since they trained beside different neighbours")
    cap = (f"RP-Fig4 data: {metric} (percent) at the target {target} along training, against wall-clock = step x "
           f"the seconds per step of the arm's objective from one fair measurement ({timed}); Standard trained "
           f"{p.selfdistill.matched_steps_ratio}x the steps. SE: over each checkpoint's prompts, widened by the main "
           f"arms' pooled training-seed spread (each curve has one seed). Scale: "
           f"{scale_note(p, p.selfdistill.ablation_samples)}.")
    rep = Report("RP-Fig4", [{"name": "RP-Fig4", "rows": rows,
                              "columns": list(rows[0]) if rows else ["arm"], "caption": cap}],
                 ours="; ".join(f"{n}: " + ", ".join(f"{v:.1f}@{t:.0f}s" for t, v, _ in pts)
                                for n, pts in points.items()),
                 agrees=verdict, note=how, claims=judged.claims)
    return points, rep


CURVE_ARMS = ("rp_skip", "rp_standard_matched")
"""RP-Fig4's two curves: the method and Standard trained for more steps."""


def interpolated(by_step: Mapping[int, Mapping[str, Any]], seconds_per_step: float, at: float,
                 where: str = "") -> dict[tuple, float] | None:
    """Per-prompt scores of a curve at wall-clock ``at``: linear in wall-clock between the two checkpoints around it
    (``step x seconds_per_step``), each prompt's score interpolated (the prompts stay paired with another arm's);
    a checkpoint exactly at ``at`` as it is; None when ``at`` lies outside the curve's checkpoints."""
    pts = sorted((step * seconds_per_step, record) for step, record in by_step.items())
    for (t0, r0), (t1, r1) in zip(pts, pts[1:] + pts[-1:]):
        if t0 <= at <= t1:
            keys, x0, x1 = align(by_prompt(r0["results"]), by_prompt(r1["results"]), (f"{where}@{t0:g}s",
                                                                                      f"{where}@{t1:g}s"))
            w = 0.0 if t1 == t0 else (at - t0) / (t1 - t0)
            return dict(zip(keys, ((1 - w) * x0 + w * x1).tolist()))
    return None


def _fig4_verdict(curves, seconds, suite, tasks, target: int, metric: str) -> Judgement:
    """RP-Fig4's headline at equal wall-clock: both curves read at the last wall-clock both reach (interpolated per
    prompt between checkpoints), the gap's SE the paired bootstrap over prompts widened by the training-seed spread
    of the main arms' headline (``suite``'s multi-seed arms, pooled; each curve has one seed)."""
    have = [n for n in CURVE_ARMS if curves.get(n) and seconds.get(n)]
    if len(have) < 2:
        return Judgement("n/a", f"needs both curves ({', '.join(CURVE_ARMS)}) with their seconds per step; have: "
                                f"{', '.join(have) or 'none'}")
    at = min(max(curves[n]) * seconds[n] for n in CURVE_ARMS)
    scores = {n: interpolated(curves[n], seconds[n], at, n) for n in CURVE_ARMS}
    if None in scores.values():
        return Judgement("n/a", f"no common wall-clock: one curve's first checkpoint is after the other's last "
                                f"({at:.0f} s)")
    at_t = {n: {"ruler": {"results": [{**dict(zip(PROMPT_KEY, k)), "score": v} for k, v in sc.items()]}}
            for n, sc in scores.items()}
    test = GapTest(at_t, "ruler", macro(tasks, target))
    spread = GapTest(suite, "suite", macro(tasks, target)).pooled_seed_std() if suite else None
    ours = {n: test.value(n) for n in CURVE_ARMS}

    def se(a: str, b: str) -> float | None:
        e = test.se(a, b)
        return None if e is None else math.sqrt(e ** 2 + 2 * (spread or 0.0) ** 2)

    judged = verdict_of("RP-Fig4", ours, se)
    widen = (f"widened by the main arms' pooled training-seed spread {spread:.1f} for each curve (one seed each)"
             if spread is not None else "one training seed each and no multi-seed main arm: training-seed spread "
                                        "not measured")
    ends = ", ".join(f"{n} ends at {max(curves[n]) * seconds[n]:.0f} s" for n in CURVE_ARMS)
    return judged.with_context(f"; {metric} read at {at:.0f} s, the last wall-clock both curves reach ({ends}; "
                               f"interpolated per prompt between checkpoints); SE: paired bootstrap over prompts, "
                               f"{widen}", sep="")


def rp_tab7(rp_suite, lm: Mapping[str, Mapping[str, Any]], p: Profile) -> Report:
    """The short-context stand-in of Table 7: the held-out LM loss at the base window and NIAH at the base window
    (labelled so: the tiny model has no MMLU, HellaSwag, WinoGrande or OpenBookQA)."""
    groups = seed_groups(lm)
    ours, se, spread = seed_spread_noise({a: [(lm[n] or {}).get("loss") for n in reps] for a, reps in groups.items()})
    col = f"held-out LM loss @{p.base.window} (nats)"
    rows = []
    for name in [n for n in ("base", *p.selfdistill.main_arms) if n in lm or n in rp_suite]:
        s = scores_of(rp_suite, name, "short")
        niah = s.average(NIAH_TASKS, p.base.window)
        losses = [(lm[n] or {}).get("loss") for n in groups.get(name, ())]
        rows.append({"model": name, col: cell(losses, "n/a", scale=1.0, digits=3),
                     f"NIAH avg @{p.base.window}": show(niah),
                     "paper avg of 4 short benchmarks (Llama)": RP_TAB7.get(name, "-")})
    cap = (f"RP-Tab7 stand-in: short-context ability as the LM loss on held-out windows of the base window and NIAH "
           f"at the base window (the paper: MMLU, HellaSwag, WinoGrande, OpenBookQA, which a tiny model cannot do); "
           f"multi-seed arms: mean ± std over training seeds. Scale: {scale_note(p)}.")
    agrees, how = judged = verdict_of("RP-Tab7", ours, se)
    how += (f"; SE: training-seed spread of the loss ({spread})" if spread else
            "; no arm has several training seeds, so the loss has no standard error")
    return Report("RP-Tab7", [{"name": "RP-Tab7", "rows": rows, "columns": list(rows[0]) if rows else ["model"],
                               "caption": cap}],
                  ours="; ".join(f"{n} {_num(v, 3)}" for n, v in ours.items()), agrees=agrees,
                  note=how + " (a sameness headline: yes, partly or no, never tie)", claims=judged.claims)


def seed_spread_noise(values: Mapping[str, Sequence[float | None]]
                      ) -> tuple[dict[str, float | None], Callable[[str, str], float | None], str]:
    """``(ours, se, how)`` of one number per training-seed replicate (arm -> values): ``ours`` the mean per arm,
    ``se(a, b)`` = ``sqrt(s_a^2 / k_a + s_b^2 / k_b)`` with an arm's own sample std over its ``k`` seeds, or the
    pooled one (root mean variance of the multi-seed arms) with ``k = 1``; None when no arm has two seeds."""
    got = {a: [float(v) for v in vs if v is not None] for a, vs in values.items()}
    ours = {a: statistics.fmean(v) if v else None for a, v in got.items()}
    own = {a: seed_spread(v) for a, v in got.items() if len(v) > 1}
    pooled = math.sqrt(statistics.fmean(s ** 2 for s in own.values())) if own else None

    def se(a: str, b: str) -> float | None:
        if pooled is None:
            return None
        var = 0.0
        for arm in (a, b):
            var += own[arm] ** 2 / len(got[arm]) if arm in own else pooled ** 2
        return math.sqrt(var)

    how = ", ".join(f"{a} {s:.3g} over {len(got[a])} seeds" for a, s in own.items())
    return ours, se, how + (f"; single-seed arms: pooled {pooled:.3g}" if own else "")
