"""``python -m repro bench costs --quick``: the trained timed arms against the cost benchmark, and the proxy tables."""

import csv
import math
import statistics

import pytest

from repro.bench.costs import costs_main
from repro.bench.timed_arms import GOAL, measure_timed_arms, timed_arms_rows
from repro.recipes.plans import TIMED_ARMS


def test_quick_run_writes_the_three_tables(tmp_path, capsys, monkeypatch, smoke_proxies):
    from repro.bench import cost_proxies

    asked = []

    def measured(table, name, steps, **kw):  # the smoke proxies the proxy test times, not a second timing of them
        asked.append((table, name, steps))
        return smoke_proxies[("rp", "cd").index(table)]

    monkeypatch.setattr(cost_proxies, "measure_proxies", measured)
    assert costs_main(figures_dir=str(tmp_path), quick=True, progress=False) == 0
    assert asked == [("rp", "smoke", 1), ("cd", "smoke", 1)]
    rows = list(csv.DictReader(open(tmp_path / "TB-TimedArms.csv")))
    assert [r["arm"] for r in rows] == [a for a in TIMED_ARMS if a != "rp_standard"]
    for r in rows:  # the columns agree with each other
        tr, br = float(r["trained ratio"]), float(r["bench ratio"])  # each rounded to 3 decimals (half a unit off)
        q = tr / br
        assert abs(float(r["trained / bench"]) - q) <= q * (5e-4 / tr + 5e-4 / br) + 5e-4 + 1e-9
        assert r[f"within {GOAL}x"] in ("yes", "no")
        assert r["trained ratio SE"] != ""  # two interleaved rounds
    assert {r["table"] for r in rows} == {"RP-Cost", "CD-Cost"}
    proxies = list(csv.DictReader(open(tmp_path / "RP-Cost-proxies.csv")))
    assert {r["proxy"] for r in proxies} == {"8K-like", "64K-like"}
    assert (tmp_path / "CD-Cost-proxies.md").exists()
    assert costs_main("paper", str(tmp_path / "x"), progress=False) == 2
    assert "use smoke or tiny" in capsys.readouterr().err


def _bench(ref_secs, arm_secs, name, ref_name):
    ratios = [a / r for a, r in zip(arm_secs, ref_secs)]
    return {ref_name: {"seconds": ref_secs, "seconds_per_step": statistics.median(ref_secs), "ratio": 1.0},
            name: {"seconds": arm_secs, "seconds_per_step": statistics.median(arm_secs),
                   "ratio": statistics.median(ratios)}}


def test_rows_pair_each_round_with_the_reference_and_carry_an_se():
    # rounds: the reference drifts (1.0 -> 1.3 s) and the arm with it: per-round ratios 2.0, 2.0, 2.2, 1.8
    res = {"trained": {"rp_standard": [1.0, 1.1, 1.2, 1.3], "rp_skip": [2.0, 2.2, 2.64, 2.34]},
           "rp": _bench([0.5, 0.5, 0.5, 0.5], [0.9, 1.0, 1.1, 1.0], "skip, prefix-shared", "Standard"), "cd": None}
    (row,) = timed_arms_rows(res)
    assert row["trained ratio"] == 2.0  # the median of 2.0, 2.0, 2.2, 1.8; unpaired medians would give 2.27 / 1.15
    assert row["trained ratio SE"] == round(statistics.stdev([2.0, 2.0, 2.2, 1.8]) / 2, 3)
    assert row["bench ratio"] == 2.0 and row["bench ratio SE"] == round(statistics.stdev([1.8, 2.0, 2.2, 2.0]) / 2, 3)
    assert row["trained / bench"] == 1.0 and row[f"within {GOAL}x"] == "yes"
    q_se = math.hypot(row["trained ratio SE"] / 2.0, row["bench ratio SE"] / 2.0)
    assert abs(row["trained / bench SE"] - q_se) < 2e-3


def test_rows_say_no_outside_the_goal_either_way():
    for arm_trained, expect in (([2.4] * 3, "no"), ([1.7] * 3, "no"), ([2.2] * 3, "yes")):
        res = {"trained": {"rp_standard": [1.0] * 3, "cdt": arm_trained},
               "cd": _bench([1.0] * 3, [2.0] * 3, "cdt", "ce"), "rp": None}
        (row,) = timed_arms_rows(res)
        assert row["table"] == "CD-Cost" and row[f"within {GOAL}x"] == expect, (arm_trained, row)
        assert row["trained ratio SE"] == 0.0


@pytest.mark.parametrize("kw", [{"rounds": 0}, {"settle": 6}, {"settle": -1}, {"bench_steps": 0}])
def test_bad_rounds_name_the_allowed_range(tmp_path, kw):
    with pytest.raises(ValueError, match="allowed: rounds >= 1, 0 <= settle < steps"):
        measure_timed_arms("smoke", tmp_path, **kw)
