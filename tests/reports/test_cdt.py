"""CDT's table (and RP-Tab14, which shares its test suite) from hand-built result rows."""

import math

import pytest

from repro.profiles import get_profile
from repro.reports import cdt, selfdistill
from repro.tasks.summary import BABILONG
from tests.reports.records import make_suite, rows

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def _cd_suite():
    suite = make_suite()
    cdt_rec = suite["flt"]["suite"]
    worse = [{**r, "score": 0.0 if r["length"] == 1024 and not r["task"].startswith("multihop") else r["score"]}
             for r in cdt_rec["results"]]
    return {"base": suite["base"], "rp_standard": {"suite": {"results": worse, "skipped": []}},
            "cdt": {"suite": cdt_rec}}


def test_cd_tab2_and_rp_tab14():
    lp = {"rp_standard": {"longppl": 5.0, "ppl": 9.0}, "cdt": {"longppl": 4.0, "ppl": 9.5}}
    rep = cdt.cd_tab2(_cd_suite(), P, longppl=lp)
    flag = rep.tables[0]["rows"][0]
    assert flag == {"model": "base can do it at its window", "length": 256, "2-hop": "yes (100.0)",
                    "3-hop": "no (0.0)", "4-hop": "no (0.0)"}
    rows = rep.tables[0]["rows"]
    cdt_1024 = [r for r in rows if r["model"] == "cdt" and r["length"] == 1024][0]
    assert (cdt_1024["2-hop"], cdt_1024["3-hop"], cdt_1024["4-hop"]) == (100.0, 50.0, 25.0)
    assert cdt_1024["multi-hop mean"] == round(100 * 1.75 / 3, 1)
    assert cdt_1024["paper RULER 32K/64K, BABILong avg, LongPPL"] == "+ CDT: 84.76 / 73.4, 33.76, 2.28"
    assert (cdt_1024["LongPPL"], cdt_1024["PPL"]) == (4.0, 9.5)
    assert [r["LongPPL"] for r in rows if r["model"] == "cdt" and r["length"] == 256] == [""]  # target only
    assert {r["length"] for r in rows if r["model"] == "cdt"} == {256, 1024}  # the lengths it was evaluated at
    assert rep.agrees == "yes"  # cdt > CE on RULER-13 at the target beyond 2 SE, as 73.4 > 13.82
    assert "LongPPL lowest: cdt (paper: cdt)" in rep.note
    rep = selfdistill.rp_tab14(make_suite(), P)
    flt = [r for r in rep.tables[0]["rows"] if r["model"] == "flt"][0]
    assert (flt["first"], flt["second"], flt["third"], flt["last"], flt["mean"]) == (100.0, 50.0, 0.0, 50.0, 50.0)
    assert flt["paper (64K NIAH-position)"] == "-"  # the paper's Standard is rp_standard (the raised RoPE base)
    # RP-Tab14's headline reads the paper's arms (skip best, cyclic below rp_standard), none trained here
    assert rep.agrees == "n/a" and rep.ours == "base 0.0; flt 50.0"


# BABILong scores of cdt per qa kind (four prompts each) at 512 and 1024
BL_SCORES = {512: ([1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 0, 0], [1, 1, 1, 1], [1, 0, 1, 0]),
             1024: ([1, 1, 0, 0], [0, 0, 0, 0], [0, 0, 0, 0], [1, 0, 0, 0], [0, 0, 0, 1])}


def _with_babilong(suite, name="cdt", scores=BL_SCORES):
    bl = [r for L, per_kind in scores.items() for t, s in zip(BABILONG, per_kind) for r in rows(t, L, s)]
    rec = suite[name]["suite"]
    return {**suite, name: {"suite": {**rec, "results": rec["results"] + bl}}}


def _mean_se(per_kind):
    """Macro mean over the kinds and its SE, sqrt(sum of population var / n) / kinds, both in percent."""
    means = [sum(s) / len(s) for s in per_kind]
    var = [sum((x - m) ** 2 for x in s) / len(s) for s, m in zip(per_kind, means)]
    return 100 * sum(means) / len(means), 100 * math.sqrt(sum(v / len(s) for v, s in zip(var, per_kind))) / 5


def test_cd_tab2_babilong_column():
    rep = cdt.cd_tab2(_with_babilong(_cd_suite()), P)
    rows_ = rep.tables[0]["rows"]
    for L in (512, 1024):
        row = next(r for r in rows_ if r["model"] == "cdt" and r["length"] == L)
        mean, se = _mean_se(BL_SCORES[L])
        assert row["BABILong"] == round(mean, 1) and row["BABILong SE"] == round(se, 1)
        assert [row[f"BL-qa{k}"] for k in range(1, 6)] == [round(100 * sum(s) / 4, 1) for s in BL_SCORES[L]]
        assert row["paper BABILong avg 4K-64K"] == 33.76
    # at 512: means .75 .25 0 1 .5 -> 50.0; variances .1875 .1875 0 0 .25 -> SE sqrt(.625 / 4) / 5 = 7.9
    assert _mean_se(BL_SCORES[512]) == (50.0, pytest.approx(100 * math.sqrt(0.625 / 4) / 5))
    assert next(r["BABILong SE"] for r in rows_ if r["model"] == "cdt" and r["length"] == 512) == 7.9
    # the headline: the mean over the lengths up to the target (512: 50.0, 1024: 20.0)
    assert "cdt BABILong mean: 35.0" in rep.ours and "rp_standard BABILong mean: n/a" in rep.ours
    cap = rep.tables[0]["caption"]
    assert "qa1-qa5 generated offline" in cap and "scored as BABILong scores" in cap and "standing in" not in cap
    assert "multi-hop mean" in rep.tables[0]["columns"]  # the multi-hop column stays
    assert rep.agrees == cdt.cd_tab2(_cd_suite(), P).agrees == "yes"  # the verdict does not read BABILong


def test_cd_tab2_babilong_mean_over_training_seeds():
    suite = _with_babilong(_cd_suite())
    suite["cdt@seed1"] = {"suite": {"results": [r for t in BABILONG for r in rows(t, 512, [0] * 4)], "skipped": []}}
    row = next(r for r in cdt.cd_tab2(suite, P).tables[0]["rows"]
               if r["model"] == "cdt (2 seeds)" and r["length"] == 512)
    assert row["BABILong"] == f"{25.0:.1f} ± {50 / math.sqrt(2):.1f}"  # seeds 50.0 and 0.0
    # per-prompt scores averaged over the seeds: qa1 (.5 .5 .5 0), qa2 (.5 0 0 0), qa3 0, qa4 .5, qa5 (.5 0 .5 0)
    assert row["BABILong SE"] == round(_mean_se([[.5, .5, .5, 0], [.5, 0, 0, 0], [0] * 4, [.5] * 4,
                                                 [.5, 0, .5, 0]])[1], 1)


def test_cd_tab2_without_babilong_rows_reads_na():
    rep = cdt.cd_tab2(_cd_suite(), P)  # records from before the column
    assert {"BL-qa1", "BL-qa5", "BABILong", "BABILong SE"} <= set(rep.tables[0]["columns"])
    for r in rep.tables[0]["rows"][1:]:
        assert r["BABILong"] == "n/a (0/5 tasks; missing BL-qa1, BL-qa2, BL-qa3, BL-qa4, BL-qa5)"
        assert (r["BL-qa3"], r["BABILong SE"]) == ("n/a (not evaluated)", "n/a")
    assert "cdt BABILong mean: n/a" in rep.ours
