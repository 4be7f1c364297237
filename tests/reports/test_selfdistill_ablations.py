"""RP-Tab8-11 from hand-built early-checkpoint records: rows, gaps to Ours, paired verdicts."""

import pytest

from repro.profiles import get_profile
from repro.reports.selfdistill_ablations import RP_TAB8, rp_ablation
from repro.tasks.summary import RULER_TASKS

from tests.reports.records import make_suite, record, rows

P = get_profile("tiny")


def _arm(acc: float, n: int = 40) -> dict:
    k = int(round(acc * n))  # the same prompts for every arm (paired), the first k correct
    return {"ruler": record([r for t in RULER_TASKS for r in rows(t, 1024, [1.0] * k + [0.0] * (n - k))])}


def test_tab8_order_rows_and_verdict():
    suite = make_suite()
    accs = {"rp_standard_early": 0.4, "rp_skip_early": 0.8, "rp_fwd_kl": 0.7, "rp_clm": 0.6, "rp_fixed_skip": 0.5,
            "rp_dropout": 0.4, "rp_attn_noise": 0.45}
    suite.update({n: _arm(a) for n, a in accs.items()})
    rep = rp_ablation(suite, P, "RP-Tab8")
    rows_ = {r["arm"]: r for r in rep.tables[0]["rows"]}
    assert list(rows_) == list(RP_TAB8)
    assert rows_["rp_fwd_kl"]["gap to rp_skip_early"] == pytest.approx(-10.0)
    # a row listed before Ours (the baseline) gets its gap too
    assert rows_["rp_standard_early"]["gap to rp_skip_early"] == pytest.approx(-40.0)
    assert rows_["rp_fwd_kl"]["RULER-13"] == 70.0 and rows_["rp_clm"]["RULER-doable (8 tasks)"] == 60.0
    assert "rp_fwd_kl 70.0" in rep.ours
    assert rows_["rp_skip_early"]["gap to rp_skip_early"] == "" and rows_["rp_clm"]["paired SE"] > 0
    assert rows_["rp_dropout"]["paper row"] == "Dropout" and rows_["rp_dropout"]["steps"] == 40
    # every significant pair in the paper's order; dropout = standard (0.40 each) is a tie, the paper's 1-point
    # gaps among the generic controls are within our noise too
    assert rep.agrees == "yes" and "as in the paper" in rep.note


def test_reversed_order_disagrees_and_missing_arms_are_said():
    suite = make_suite()
    suite.update({"rp_skip_early": _arm(0.2), "rp_standard_early": _arm(0.9), "rp_nope": _arm(0.95)})
    rep = rp_ablation(suite, P, "RP-Tab10")
    assert rep.agrees == "no"
    rows_ = {r["arm"]: r for r in rep.tables[0]["rows"]}
    assert rows_["rp_standard_early"]["gap to rp_skip_early"] == pytest.approx(70.0)
    missing = rows_["rp_dilation"]
    assert str(missing["RULER-13"]).startswith("n/a")
    with pytest.raises(ValueError, match="target_id='RP-Tab7'; allowed: RP-Tab8"):
        rp_ablation(suite, P, "RP-Tab7")
