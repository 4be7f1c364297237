"""The paper-shaped proxies of RP-Cost and CD-Cost: Llama-3-8B's proportions, every arm timed with its FLOP bound,
and the proxy tables of the two reports."""

import pytest

from repro.bench.cost_proxies import PROXY_SETS, measure_proxies, proportions, proxy_set
from repro.bench.selfdistill_cost import COST_ARMS, POSITION_ARMS
from repro.profiles import get_profile
from repro.profiles.selfdistill import COST_PROXIES
from repro.reports.cdt_training import cd_cost
from repro.reports.cost_proxies import BOUND_GOAL, GOAL_VS_BOUND
from repro.reports.selfdistill_training import rp_cost


@pytest.mark.parametrize("name", sorted(PROXY_SETS))
def test_proxies_keep_the_8b_proportions(name):
    ps = PROXY_SETS[name]
    for proxy in ps.proxies:
        prop = proportions(ps, proxy)
        for k in ("head/body", "attention/body"):  # within 5% of Llama-3-8B's at the length it stands for
            assert prop[k] == pytest.approx(prop[f"reference {k}"], rel=0.05), (name, proxy.name, k)
    assert [p.like_length for p in ps.proxies] == [8192, 65536]
    assert ps.longce(ps.proxies[1]) == (4096 * ps.proxies[1].length // 65536, 1024 * ps.proxies[1].length // 65536)


def test_names_match_the_profiles_and_none_runs_nothing():
    assert set(COST_PROXIES) == {"none", *PROXY_SETS}
    assert proxy_set("none") is None and measure_proxies("rp", "none") == []
    with pytest.raises(ValueError, match="cost proxy 'x'; allowed: none, llama-3-8b, smoke"):
        proxy_set("x")
    with pytest.raises(ValueError, match="table='x'"):
        measure_proxies("x", "smoke")
    with pytest.raises(ValueError, match="selfdistill.cost_proxy='x'"):
        get_profile("tiny").override(selfdistill={"cost_proxy": "x"})


def test_smoke_proxies_time_every_arm_beside_its_bound_and_the_reports_show_them(smoke_proxies):
    p = get_profile("smoke")
    rp, cd = smoke_proxies
    assert [e["proxy"] for e in rp] == ["8K-like", "64K-like"] and [e["rows"] for e in cd] == [2, 1]
    for e in rp:
        arms = e["arms"]
        assert list(arms) == [*COST_ARMS, *POSITION_ARMS]
        assert arms["Standard"]["bound"] == 1.0 and arms["PoSE positions"]["bound"] == 1.0
        assert arms["LongRecipe positions"]["bound"] == 1.0
        assert 1.0 < arms["skip, prefix-shared"]["bound"] < arms["skip, two full passes"]["bound"] < 2.1
        assert all(r["vs_bound"] > 0 and r["seconds_per_step"] > 0 for r in arms.values())
    for e in cd:
        A, H = e["attention/body"], e["head/body"]
        assert e["arms"]["cdt"]["bound"] == pytest.approx((5 + 6 * A + 5 * H) / (3 + 3 * A + 3 * H), rel=0.02)
        assert e["arms"]["cdt_authors"]["bound"] == pytest.approx(3.0)  # three forwards and three full backwards
    bench = {n: {"seconds": [1.0], "seconds_per_step": r, "ratio": r, "bound": b, "vs_bound": r / b}
             for n, r, b in (("Standard", 1.0, 1.0), ("skip, prefix-shared", 1.7, 1.5))}
    rep = rp_cost(bench, p, proxies=rp)
    assert [t["name"] for t in rep.tables] == ["RP-Cost", "RP-Cost-proxies"]
    main = {r["arm"]: r for r in rep.tables[0]["rows"]}
    assert main["skip, prefix-shared"]["measured / bound"] == pytest.approx(1.133, abs=1e-3)
    assert main["skip, prefix-shared"][BOUND_GOAL] == "no" and main["Standard"][BOUND_GOAL] == ""
    rows = rep.tables[1]["rows"]
    assert len(rows) == 2 * len(rp[0]["arms"]) and "64K-like" in rep.ours
    for r in rows:
        if r["arm"] != "Standard":
            assert r[BOUND_GOAL] == ("yes" if r["measured / bound"] <= GOAL_VS_BOUND else "no")
    assert "Llama-3-8B at 65,536 tokens" in rep.tables[1]["caption"]
    rep = cd_cost(cd[0]["arms"], p, proxies=cd)
    assert [t["name"] for t in rep.tables] == ["CD-Cost", "CD-Cost-proxies"]
    assert {r["arm"] for r in rep.tables[1]["rows"]} == {"ce", "cdt", "cdt_authors"}
    assert all("detection forward s" in r for r in rep.tables[1]["rows"])
