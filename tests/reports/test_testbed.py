"""What the base can do, tidy rows, and the testbed verdicts (TB-NIAH, TB-BaseLoss, TB-ExtLoss)."""

import pytest

from repro.profiles import get_profile
from repro.reports import testbed
from repro.recipes.plans import base_window_grid, suite_plan
from repro.tasks.summary import NIAH_TASKS
from repro.timing import StepTiming
from tests.reports.records import make_suite, record, rows

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def test_base_can_do_flags_and_na():
    can = testbed.base_can_do(make_suite(), P)
    assert can["niah_single_1"] == {"acc": 1.0, "doable": True, "label": "yes (100.0)"}
    assert can["vt"] == {"acc": 0.0, "doable": False, "label": "no (0.0)"}
    assert can["cwe"] == {"acc": None, "doable": None, "label": "n/a (min length 300)"}
    assert can["niah_position:ordinal=first"]["label"] == "n/a (not evaluated)"
    assert testbed.doable_ruler(make_suite(), P) == NIAH_TASKS
    no_base = testbed.base_can_do({"flt": make_suite()["flt"]}, P)
    assert no_base["vt"]["label"] == "n/a (no base checkpoint)"


def test_tidy_rows_include_skipped_cells():
    tidy = testbed.tidy_rows(make_suite())
    skipped = [r for r in tidy if r["status"] != "ok"]
    assert skipped == [{"model": "base", "part": "suite", "task": "cwe", "length": 256, "depth": 0.5,
                        "eval_seed": 0, "status": "n/a (min length 300)"}]
    csv = testbed.tidy_csv(tidy)
    assert csv.splitlines()[0] == ",".join(testbed.TIDY_COLUMNS)
    assert len(csv.splitlines()) == len(tidy) + 1


def test_tb_niah_verdict_on_both_sides_and_table():
    by_length = {"base": {256: 0.9, 512: 0.375, 1024: 0.25}, "flt": {256: 0.5, 1024: 0.2625}}
    tables = {"base": {(256, 0.5): 0.9, (1024, 0.5): 0.25}, "flt": {(1024, 0.5): 0.2625}}
    rep = testbed.tb_niah(by_length, P, tables)
    # gap 1.25 points; binomial SE sqrt(0.2625 * 0.7375 / 100 + 0.25 * 0.75 / 100) = 6.2 points: a tie
    assert (rep.target, rep.agrees) == ("TB-NIAH", "tie within noise")
    assert rep.note == ("FLT vs base at 1024: gap 1.3 points, SE 6.2 (binomial SE from the two means, 100 prompts "
                        "each (no per-prompt rows given: unpaired)); 2 SE decides")
    assert rep.ours == "base @256: 0.90; FLT @1024: 0.26; base @1024: 0.25"
    (t,) = rep.tables
    assert t["name"] == "TB-NIAH" and t["columns"] == ["model", "length", "depth", "accuracy", "n"]
    assert t["rows"][0] == {"model": "base", "length": 256, "depth": 0.5, "accuracy": 0.9, "n": 20}
    assert len(t["rows"]) == 3 and t["caption"] == "niah_single_1, 20 samples per cell, tiny profile"
    assert testbed.tb_niah(by_length, P).tables == []
    by_length["flt"][1024] = 0.5  # 25 points over 2 x 6.6
    assert testbed.tb_niah(by_length, P).agrees == "yes"
    by_length["flt"][1024] = 0.0
    rep = testbed.tb_niah(by_length, P)
    assert rep.agrees == "no" and rep.ours == "base @256: 0.90; FLT @1024: 0.00; base @1024: 0.25"


def test_tb_niah_pairs_the_result_rows_when_given():
    from tests.reports.records import rows

    by_length = {"base": {256: 1.0, 1024: 0.25}, "flt": {1024: 0.5}}
    # 40 prompts: flt right on 10 more than the base, never worse -> paired SE sqrt(0.25 * 0.75 / 40) = 6.8 points
    results = {"base": rows("niah_single_1", 1024, [1] * 10 + [0] * 30),
               "flt": rows("niah_single_1", 1024, [1] * 20 + [0] * 20)}
    rep = testbed.tb_niah(by_length, P, results=results)
    assert rep.agrees == "yes" and "paired bootstrap over the 40 prompts at 1024" in rep.note
    results["flt"] = results["flt"][:39]
    with pytest.raises(ValueError, match="flt and base were not evaluated on the same prompts"):
        testbed.tb_niah(by_length, P, results=results)


def test_tb_base_loss_and_ext_loss_strings():
    metrics = [{"loss": 3.0, "method_em": 0.0}, {"loss": 2.0, "method_em": 0.25}, {"loss": 1.2344, "method_em": 0.5}]
    rep = testbed.tb_base_loss(metrics)
    assert (rep.target, rep.agrees, rep.note, rep.tables) == ("TB-BaseLoss", "n/a", "", [])
    assert rep.ours == "3 steps; final loss 1.234; running train exact match 0.50"
    ext = {"flt": [{"loss": 2.0, "tokens": 1000, "seconds": 1.0}, {"loss": 1.5, "tokens": 1000, "seconds": 3.0}],
           "pose": [{"loss": 1.75, "tokens": 300, "seconds": 0.5}],
           "rp_standard": [{"loss": 3.0, "tokens": 1200, "seconds": 1.0}],
           "cdt": [{"loss": 2.5, "tokens": 900, "seconds": 1.0}, {"loss": 2.4, "tokens": 900, "seconds": 2.0}]}
    side = StepTiming(1.0, 1, 1, "its own training run")
    alone = StepTiming(1.0, 2, 0, "its own training run")
    rep = testbed.tb_ext_loss(ext, {"flt": side, "pose": side, "rp_standard": alone, "cdt": alone})
    assert (rep.target, rep.agrees) == ("TB-ExtLoss", "n/a")
    assert rep.ours == "4 arms trained; tokens/s compared only among 2 arms trained alone at 2 thread(s): " \
                       "rp_standard 1200, cdt 600"
    rows = rep.tables[0]["rows"]
    assert [(r["arm"], r["steps"], r["final loss"], r["tokens / s"]) for r in rows] == [
        ("flt", 2, 1.5, ""), ("pose", 1, 1.75, ""), ("rp_standard", 1, 3.0, 1200), ("cdt", 2, 2.4, 600)]
    assert rows[0]["trained"] == "beside up to 1 other stage(s), 1 thread(s) each"
    assert rows[2]["trained"] == "alone, 2 thread(s)"
    # two arms alone at different threads: only the larger group's clocks are compared
    rep = testbed.tb_ext_loss(ext, {"flt": StepTiming(1.0, 1, 0, "its own training run"), "pose": side,
                                    "rp_standard": alone, "cdt": alone})
    assert [r["tokens / s"] for r in rep.tables[0]["rows"]] == ["", "", 1200, 600]


def test_the_base_window_part_decides_over_the_suite_part():
    W = P.base.window
    suite_part = record(rows("niah_single_1", W, [1] * 2 + [0] * 8))  # 20%: cannot
    window_part = record(rows("niah_single_1", W, [1] * 40 + [0] * 60))  # 40%: can
    can = testbed.base_can_do({"base": {"suite": suite_part, "window": window_part}}, P)["niah_single_1"]
    assert can["doable"] is True and can["acc"] == 0.4
    can = testbed.base_can_do({"base": {"suite": suite_part}}, P)["niah_single_1"]
    assert can["doable"] is False and can["acc"] == 0.2


def test_only_the_base_gets_the_window_part_and_it_is_tb_bases_grid():
    assert suite_plan(P, "base", 10_000.0)["window"] == base_window_grid(P)
    assert "window" not in suite_plan(P, "flt", 10_000.0)
    g = base_window_grid(P)
    assert g["lengths"] == (256,) and len(g["depths"]) * g["samples"] == 100 and "json_kv" in g["tasks"]
