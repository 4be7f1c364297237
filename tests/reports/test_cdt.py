"""CDT's table (and RP-Tab14, which shares its test suite) from hand-built result rows."""

from repro.profiles import get_profile
from repro.reports import cdt, selfdistill
from tests.reports.records import make_suite

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def test_cd_tab2_and_rp_tab14():
    rep = cdt.cd_tab2(make_suite(), P)
    flag = rep.tables[0]["rows"][0]
    assert flag == {"model": "base can do it at its window", "length": 256, "2-hop": "yes (100.0)",
                    "3-hop": "no (0.0)", "4-hop": "no (0.0)"}
    flt_1024 = [r for r in rep.tables[0]["rows"] if r["model"] == "flt" and r["length"] == 1024][0]
    assert (flt_1024["2-hop"], flt_1024["3-hop"], flt_1024["4-hop"]) == (100.0, 50.0, 25.0)
    assert flt_1024["multi-hop mean"] == round(100 * 1.75 / 3, 1)
    assert flt_1024["paper RULER 32K/64K, BABILong avg"] == "+ CE: 36.01 / 13.82, 29.56"
    assert rep.agrees == "yes"  # flt > base, as CE 29.56 > base 13.00
    rep = selfdistill.rp_tab14(make_suite(), P)
    flt = [r for r in rep.tables[0]["rows"] if r["model"] == "flt"][0]
    assert (flt["first"], flt["second"], flt["third"], flt["last"], flt["mean"]) == (100.0, 50.0, 0.0, 50.0, 50.0)
    assert flt["paper (64K NIAH-position)"] == "-"  # the paper's Standard is rp_standard (the raised RoPE base)
    assert rep.agrees == "yes" and rep.ours == "base 0.0; flt 50.0"
