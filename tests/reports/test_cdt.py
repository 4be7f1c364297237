"""CDT's table (and RP-Tab14, which shares its test suite) from hand-built result rows."""

from repro.profiles import get_profile
from repro.reports import cdt, selfdistill
from tests.reports.records import make_suite

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
    assert rep.agrees == "yes" and rep.ours == "base 0.0; flt 50.0"
