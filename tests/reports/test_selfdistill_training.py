"""RP-Cost, RP-Fig4 and RP-Tab7 from hand-built timings and records."""

import math
import re
import statistics

import pytest

from repro.profiles import get_profile
from repro.reports.selfdistill_training import fig4_tasks, fig4_timings, rp_cost, rp_fig4, rp_tab7
from repro.tasks.summary import NIAH_TASKS, RULER_TASKS
from repro.timing import StepTiming, check_equal_timing
from tests.reports.records import make_suite, record, rows

P = get_profile("tiny")


STANDARD_S = [1.0, 1.1, 0.9, 1.0]
"""Standard's seconds in four interleaved rounds (a slow round slows every arm)."""


def _bench(shared, naive=(2.0, 2.1, 1.9, 2.0)):
    """Timings of four rounds: each arm's per-round ratio to Standard times Standard's seconds."""
    out = {}
    for n, ratios in (("Standard", [1.0] * 4), ("skip, prefix-shared", shared), ("skip, two full passes", naive)):
        secs = [r * t for r, t in zip(ratios, STANDARD_S)]
        out[n] = {"seconds": secs, "seconds_per_step": statistics.median(secs), "ratio": statistics.median(ratios)}
    return out


def test_rp_cost_run_ratios_and_yes():
    shared = [1.55, 1.65, 1.6, 1.6]  # mean 1.6 +- 0.0204: the paper's 1.6x; 0.4 +- 0.035 below two passes
    rep = rp_cost(_bench(shared), P, {"rp_standard": 0.8, "rp_skip": 1.2})
    rows_ = {r["arm"]: r for r in rep.tables[0]["rows"]}
    assert rows_["skip, prefix-shared"]["training run ratio"] == 1.5
    assert rows_["skip, prefix-shared"]["paper"] == 1.6
    assert rep.agrees == "yes" and rep.note.startswith("headline: 2/2 claims hold beyond noise")
    diffs = [a - b for a, b in zip(shared, (2.0, 2.1, 1.9, 2.0))]
    se = statistics.stdev(diffs) / 2
    assert (statistics.fmean(diffs), se) == (pytest.approx(-0.4), pytest.approx(0.0354, abs=1e-4))
    assert f"skip, prefix-shared < skip, two full passes (step time over Standard's, per round): holds (gap -0.4 " \
           f"+- {se:.2g}" in rep.note


def test_rp_cost_no_and_partly():
    # 2.3x: 0.7 above the paper's 1.6 (SE 0.041) and 0.3 above two passes (SE 0.035): both the other way
    assert rp_cost(_bench([2.3, 2.4, 2.2, 2.3]), P).agrees == "no"
    # 1.8x: below two passes beyond noise, but 0.2 above 1.6 (SE 0.0204, 9.8 SE)
    rep = rp_cost(_bench([1.75, 1.85, 1.8, 1.8]), P)
    assert rep.agrees == "partly" and "skip, prefix-shared ~ paper 1.6x (step time over Standard's, per round): " \
                                     "contrary (gap +0.2 +- 0.02" in rep.note
    # a sameness claim within noise holds, so this headline never ties; one round gives no SE: n/a
    one = {n: {**r, "seconds": r["seconds"][:1]} for n, r in _bench([1.6] * 4).items()}
    assert rp_cost(one, P).agrees == "n/a"
    with pytest.raises(ValueError, match="reference='Standard' not timed"):
        rp_cost({"skip, prefix-shared": one["skip, prefix-shared"]}, P)


def _ruler(acc, n=10):
    k = int(acc * n)
    return record([r for t in RULER_TASKS for r in rows(t, 1024, [1.0] * k + [0.0] * (n - k))])


def _gap_and_se(note: str) -> tuple[float, float]:
    """The first claim's ``gap +x +- se`` in a note."""
    m = re.search(r"\(gap ([-+0-9.e]+) \+- ([0-9.e+-]+),", note)
    return float(m.group(1)), float(m.group(2))


def _timed(skip, standard=None):
    """RP-Fig4's timings of one benchmark run: skip's and (where given) Standard's seconds per step."""
    out = {"rp_skip": StepTiming(skip, 2, 0, "bench")}
    if standard is not None:
        out["rp_standard_matched"] = StepTiming(standard, 2, 0, "bench")
    return out


def test_fig4_timings_come_from_the_interleaved_benchmark_not_the_training_runs():
    bench = {**_bench([1.9, 2.0, 1.8, 1.9]), "Standard": {"seconds": [0.6, 0.7, 0.65], "seconds_per_step": 0.65,
                                                          "ratio": 1.0, "threads": 2}}
    bench["skip, prefix-shared"]["threads"] = 2
    t = fig4_timings(bench)
    assert t["rp_standard_matched"] == StepTiming(0.65, 2, 0, "RP-Cost interleaved benchmark (median of 3 rounds)")
    assert t["rp_skip"].seconds == pytest.approx(statistics.median([1.9, 2.2, 1.62, 1.9]))
    assert fig4_timings(None) == {} and fig4_timings({"Standard": bench["Standard"]}).keys() == {"rp_standard_matched"}


def test_rp_fig4_refuses_arms_timed_under_different_threads_or_concurrency():
    curves = {"rp_skip": {100: _ruler(0.5)}, "rp_standard_matched": {100: _ruler(0.4)}}
    base = {"base": make_suite()["base"]}
    alone = StepTiming(1.2, 2, 0, "bench")
    for other in (StepTiming(2.6, 1, 0, "bench"), StepTiming(2.6, 2, 1, "bench"), StepTiming(2.6, 2, 0, "own run")):
        with pytest.raises(ValueError, match="RP-Fig4: arms timed under different conditions"):
            rp_fig4(curves, {"rp_skip": alone, "rp_standard_matched": other}, base, P)
    with pytest.raises(ValueError, match=r"rp_skip: 2 thread\(s\), beside 0 process\(es\), bench; "
                                         r"rp_standard_matched: 1 thread\(s\), beside 0"):
        check_equal_timing({"rp_skip": alone, "rp_standard_matched": StepTiming(2.6, 1, 0, "bench")}, "RP-Fig4")
    check_equal_timing({"rp_skip": alone, "rp_standard_matched": StepTiming(0.6, 2, 0, "bench")}, "RP-Fig4")


def test_rp_fig4_wallclock_and_verdict():
    base = {"base": make_suite()["base"]}
    curves = {"rp_skip": {100: _ruler(0.5), 200: _ruler(0.8)},
              "rp_standard_matched": {100: _ruler(0.4), 200: _ruler(0.6), 300: _ruler(0.7)}}
    points, rep = rp_fig4(curves, _timed(1.5, 1.0), base, P)
    assert [(t, v) for t, v, _ in points["rp_skip"]] == [(150.0, pytest.approx(50.0)), (300.0, pytest.approx(80.0))]
    assert [t for t, _, _ in points["rp_standard_matched"]] == [100.0, 200.0, 300.0]
    # each point's SE over its 8 doable tasks' 10 prompts: 100 sqrt(8 x 0.5 x 0.5 / 10) / 8 at 50%
    assert points["rp_skip"][0][2] == pytest.approx(100 * math.sqrt(8 * 0.25 / 10) / 8)
    assert points["rp_skip"][1][2] == pytest.approx(100 * math.sqrt(8 * 0.8 * 0.2 / 10) / 8)
    assert fig4_tasks(base, P)[1] == "RULER-doable (8 tasks)" and "RULER-doable (8 tasks)" in rep.tables[0]["caption"]
    # at 300 s: skip 80 vs Standard 70 on the 8 NIAH tasks, nested prompts: SE sqrt(0.1 x 0.9 / 10 / 8) = 3.35
    se = 100 * math.sqrt(0.1 * 0.9 / 10 / 8)
    assert rep.agrees == "yes" and "rp_skip > rp_standard_matched (RULER at the target at equal training " \
                                   "wall-clock): holds" in rep.note
    assert _gap_and_se(rep.note) == (pytest.approx(10.0), pytest.approx(se, rel=0.05))  # bootstrap ~ analytic
    assert "read at 300 s, the last wall-clock both curves reach" in rep.note
    cap = rep.tables[0]["caption"]
    assert "one fair measurement (bench, 2 CPU thread(s), run alone: rp_skip 1.500 s (skip, prefix-shared), " \
           "rp_standard_matched 1.000 s (Standard)" in cap and "own training clocks are not used" in cap
    curves["rp_standard_matched"][300] = _ruler(0.9)
    assert rp_fig4(curves, _timed(1.5, 1.0), base, P)[1].agrees == "no"
    curves["rp_standard_matched"][300] = _ruler(0.8)
    assert rp_fig4(curves, _timed(1.5, 1.0), base, P)[1].agrees == "tie within noise"
    assert rp_fig4({"rp_skip": curves["rp_skip"]}, _timed(1.5), base, P)[1].agrees == "n/a"


def test_rp_fig4_matches_wallclock_by_interpolating_per_prompt():
    # Standard ends at 400 s, skip at 300 s: Standard is read at 300 s, half way from 60 (200 s) to 100 (400 s): 80,
    # level with skip's 80 (the old rule compared skip's end with Standard's best checkpoint up to 315 s)
    base = {"base": make_suite()["base"]}
    curves = {"rp_skip": {100: _ruler(0.5), 200: _ruler(0.8)},
              "rp_standard_matched": {200: _ruler(0.6), 400: _ruler(1.0)}}
    rep = rp_fig4(curves, _timed(1.5, 1.0), base, P)[1]
    assert rep.agrees == "tie within noise" and "tie (gap +0 +-" in rep.note
    assert "rp_skip ends at 300 s, rp_standard_matched ends at 400 s" in rep.note


def test_rp_fig4_widened_by_the_main_arms_seed_spread():
    # skip 10 points above at 300 s; the main arms' rp_standard spreads by 10 points over 3 seeds (NIAH 0.4, 0.5,
    # 0.6): each single-seed curve adds 10^2, SE sqrt(3.35^2 + 2 x 100) = 14.5: a tie
    suite = {"base": make_suite()["base"]}
    for name, acc in (("rp_standard", 0.4), ("rp_standard@seed1", 0.5), ("rp_standard@seed2", 0.6)):
        suite[name] = {"suite": _ruler(acc)}
    curves = {"rp_skip": {200: _ruler(0.8)}, "rp_standard_matched": {300: _ruler(0.7)}}
    points, rep = rp_fig4(curves, _timed(1.5, 1.0), suite, P)
    assert points["rp_skip"][0][2] == pytest.approx(math.hypot(100 * math.sqrt(8 * 0.8 * 0.2 / 10) / 8, 10.0))
    se = math.sqrt((100 * math.sqrt(0.1 * 0.9 / 10 / 8)) ** 2 + 2 * 10.0 ** 2)
    assert rep.agrees == "tie within noise" and _gap_and_se(rep.note) == (pytest.approx(10.0),
                                                                          pytest.approx(se, rel=0.05))
    assert "pooled training-seed spread 10.0" in rep.note


def _lm(**losses):
    """name -> {"loss"} with replicates ``name@seedK`` for a list of losses."""
    out = {}
    for name, v in losses.items():
        for k, x in enumerate(v if isinstance(v, list) else [v]):
            out[name if k == 0 else f"{name}@seed{k}"] = {"loss": x}
    return out


@pytest.mark.parametrize("skip, cyclic, verdict", [
    ([3.11, 3.09, 3.13], 3.10, "yes"),  # gaps 0.01 (SE 0.0163) and 0.0 (SE 0.0231): both the same
    ([3.11, 3.09, 3.13], 3.30, "partly"),  # cyclic 0.2 above: 8.7 SE
    ([3.31, 3.29, 3.33], 3.30, "no"),  # both about 0.2 above
])
def test_rp_tab7_sameness_on_the_seed_spread(skip, cyclic, verdict):
    suite = {"rp_standard": {"short": record([r for t in NIAH_TASKS for r in rows(t, 256, [1.0, 1.0])])}}
    lm = _lm(base=3.0, rp_standard=[3.10, 3.12, 3.08], rp_skip=skip, rp_cyclic=cyclic)
    rep = rp_tab7(suite, lm, P)
    assert rep.agrees == verdict
    se = math.sqrt(0.02 ** 2 / 3 + 0.02 ** 2)  # cyclic: one seed, the pooled spread 0.02 (both arms' std)
    assert se == pytest.approx(0.0231, abs=1e-4)
    gap = f"{cyclic - 3.10:+.4g}"
    assert "rp_cyclic ~ rp_standard (held-out LM loss at the base window (short-context stand-in)): " in rep.note
    assert f"(gap {gap} +- {se:.2g}" in rep.note
    loss = {r["model"]: r["held-out LM loss @256 (nats)"] for r in rep.tables[0]["rows"]}
    assert loss["rp_standard"] == "3.100 ± 0.020" and loss["base"] == 3.0


def test_rp_tab7_single_seeds_have_no_standard_error():
    suite = {"rp_standard": {"short": record([r for t in NIAH_TASKS for r in rows(t, 256, [1.0, 1.0])])}}
    rep = rp_tab7(suite, _lm(base=3.0, rp_standard=3.1, rp_skip=3.3, rp_cyclic=3.1), P)
    assert rep.agrees == "n/a" and "no arm has several training seeds" in rep.note
    niah = {r["model"]: r["NIAH avg @256"] for r in rep.tables[0]["rows"]}
    assert niah["rp_standard"] == 100.0
