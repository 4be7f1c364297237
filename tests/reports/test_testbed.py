"""What the base can do, tidy rows, and the testbed verdicts (TB-NIAH, TB-BaseLoss, TB-ExtLoss)."""

from repro.profiles import get_profile
from repro.reports import testbed
from repro.tasks.summary import NIAH_TASKS
from tests.reports.records import make_suite

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
    assert (rep.target, rep.agrees, rep.note) == ("TB-NIAH", "yes", "")
    assert rep.ours == "base @256: 0.90; FLT @1024: 0.26; base @1024: 0.25"
    (t,) = rep.tables
    assert t["name"] == "TB-NIAH" and t["columns"] == ["model", "length", "depth", "accuracy", "n"]
    assert t["rows"][0] == {"model": "base", "length": 256, "depth": 0.5, "accuracy": 0.9, "n": 20}
    assert len(t["rows"]) == 3 and t["caption"] == "niah_single_1, 20 samples per cell, tiny profile"
    assert testbed.tb_niah(by_length, P).tables == []
    by_length["flt"][1024] = 0.25  # a tie is not a win
    assert testbed.tb_niah(by_length, P).agrees == "no"
    by_length["flt"][1024] = 0.0
    rep = testbed.tb_niah(by_length, P)
    assert rep.agrees == "no" and rep.ours == "base @256: 0.90; FLT @1024: 0.00; base @1024: 0.25"


def test_tb_base_loss_and_ext_loss_strings():
    metrics = [{"loss": 3.0, "method_em": 0.0}, {"loss": 2.0, "method_em": 0.25}, {"loss": 1.2344, "method_em": 0.5}]
    rep = testbed.tb_base_loss(metrics)
    assert (rep.target, rep.agrees, rep.note, rep.tables) == ("TB-BaseLoss", "n/a", "", [])
    assert rep.ours == "3 steps; final loss 1.234; running train exact match 0.50"
    ext = {"flt": [{"loss": 2.0, "tokens": 1000, "seconds": 1.0}, {"loss": 1.5, "tokens": 1000, "seconds": 3.0}],
           "pose": [{"loss": 1.75, "tokens": 300, "seconds": 0.5}]}
    rep = testbed.tb_ext_loss(ext)
    assert (rep.target, rep.agrees, rep.note) == ("TB-ExtLoss", "n/a", "")
    assert rep.ours == "flt: final loss 1.500, 500 tok/s; pose: final loss 1.750, 600 tok/s"
