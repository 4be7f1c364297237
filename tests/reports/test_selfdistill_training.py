"""RP-Cost, RP-Fig4 and RP-Tab7 from hand-built timings and records."""

import pytest

from repro.profiles import get_profile
from repro.reports.selfdistill_training import rp_cost, rp_fig4, rp_tab7, run_seconds
from repro.tasks.summary import NIAH_TASKS, RULER_TASKS
from tests.reports.records import make_suite, record, rows

P = get_profile("tiny")


def _bench(shared, naive=2.0):
    return {n: {"seconds": [r] * 3, "seconds_per_step": r, "ratio": r}
            for n, r in (("Standard", 1.0), ("skip, prefix-shared", shared), ("skip, two full passes", naive))}


def test_rp_cost_verdicts_and_run_ratios():
    rep = rp_cost(_bench(1.45), P, {"rp_standard": 0.8, "rp_skip": 1.2})
    rows_ = {r["arm"]: r for r in rep.tables[0]["rows"]}
    assert rep.agrees == "yes" and rows_["skip, prefix-shared"]["training run ratio"] == 1.5
    assert rows_["skip, prefix-shared"]["paper"] == 1.6
    assert rp_cost(_bench(1.7), P).agrees == "partly"  # above the goal, below two passes
    assert rp_cost(_bench(2.1), P).agrees == "no"


def test_run_seconds_skips_warmup():
    ms = [{"seconds": 10.0}] * 5 + [{"seconds": s} for s in (1.0, 2.0, 3.0)]
    assert run_seconds(ms) == 2.0 and run_seconds([{"seconds": 4.0}]) == 4.0 and run_seconds([]) is None


def _ruler(acc, n=10):
    k = int(acc * n)
    return record([r for t in RULER_TASKS for r in rows(t, 1024, [1.0] * k + [0.0] * (n - k))])


def test_rp_fig4_wallclock_and_verdict():
    base = {"base": make_suite()["base"]}
    curves = {"rp_skip": {100: _ruler(0.5), 200: _ruler(0.8)},
              "rp_standard_matched": {100: _ruler(0.4), 200: _ruler(0.6), 300: _ruler(0.7)}}
    points, rep = rp_fig4(curves, {"rp_skip": 1.5, "rp_standard_matched": 1.0}, base, P)
    assert points["rp_skip"] == [(150.0, pytest.approx(points["rp_skip"][0][1])), (300.0, points["rp_skip"][1][1])]
    assert [t for t, _ in points["rp_standard_matched"]] == [100.0, 200.0, 300.0]
    assert rep.agrees == "yes"  # skip at 300 s beats every Standard checkpoint up to ~300 s
    curves["rp_standard_matched"][300] = _ruler(0.9)
    assert rp_fig4(curves, {"rp_skip": 1.5, "rp_standard_matched": 1.0}, base, P)[1].agrees == "no"
    assert rp_fig4({"rp_skip": curves["rp_skip"]}, {"rp_skip": 1.5}, base, P)[1].agrees == "n/a"


def test_rp_tab7_flags_a_worse_loss():
    suite = {"rp_standard": {"short": record([r for t in NIAH_TASKS for r in rows(t, 256, [1.0, 1.0])])}}
    lm = {"base": {"loss": 3.0}, "rp_standard": {"loss": 3.1}, "rp_skip": {"loss": 3.12}}
    rep = rp_tab7(suite, lm, P)
    assert rep.agrees == "yes"
    lm["rp_skip"]["loss"] = 3.3
    rep = rp_tab7(suite, lm, P)
    assert rep.agrees == "partly" and "rp_skip" in rep.note
    niah = {r["model"]: r["NIAH avg @256"] for r in rep.tables[0]["rows"]}
    assert niah["rp_standard"] == 100.0
