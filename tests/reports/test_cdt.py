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
    assert cdt_1024["paper RULER 32K/64K, BABILong avg, LongPPL"] == "+ CDT: 84.76 / 73.4, 33.76, 3.04"
    assert (cdt_1024["LongPPL"], cdt_1024["PPL"]) == (4.0, 9.5)
    assert [r["LongPPL"] for r in rows if r["model"] == "cdt" and r["length"] == 256] == [""]  # target only
    assert {r["length"] for r in rows if r["model"] == "cdt"} == {256, 1024}  # the lengths it was evaluated at
    # cdt > CE on RULER-13 at the target holds (as 73.4 > 13.82); LongCE, BABILong and the per-document LongPPL
    # rows are missing, so the other five claims are untested: partly (the old rule said yes on the one pair)
    assert rep.agrees == "partly" and rep.note.startswith("headline: 1/6 claims hold beyond noise, 5 untested")
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
    # BABILong's claims need every headline arm's rows: CE has none here, so they stay untested either way
    assert rep.agrees == cdt.cd_tab2(_cd_suite(), P).agrees == "partly"


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


# -- the headline: CDT above CE and LongCE on RULER-13 and BABILong, below them on LongPPL ------------------------
def _docs(lppl, n_key=10):
    """A LongPPL record with per-document rows (the same key-token count in each)."""
    return {"longppl": math.exp(sum(math.log(x) for x in lppl) / len(lppl)), "ppl": 9.0,
            "docs": [{"longppl": x, "n_key": n_key, "ppl": 9.0, "n_tokens": 1024} for x in lppl]}


def _full_suite(good="cdt"):
    """base, rp_standard, rp_longce and cdt: ``good`` gets flt's RULER rows and BABILong's BL_SCORES, the others
    0 on every RULER task at the target and on BABILong."""
    suite = _cd_suite()
    flt, worse = suite["cdt"]["suite"], suite["rp_standard"]["suite"]
    zero_bl = {L: tuple([0] * 4 for _ in BABILONG) for L in BL_SCORES}
    out = {"base": suite["base"]}
    for name in ("rp_standard", "rp_longce", "cdt"):
        out[name] = {"suite": flt if name == good else worse}
        out = _with_babilong(out, name, BL_SCORES if name == good else zero_bl)
    return out


GOOD_LPPL, BAD_LPPL = (3.0, 3.2, 2.9, 3.1), (4.0, 4.1, 3.9, 4.2)


def test_cd_tab2_headline_yes_no_tie():
    lp = {"rp_standard": _docs(BAD_LPPL), "rp_longce": _docs(BAD_LPPL), "cdt": _docs(GOOD_LPPL)}
    rep = cdt.cd_tab2(_full_suite("cdt"), P, longppl=lp)
    assert rep.agrees == "yes" and rep.note.startswith("headline: 6/6 claims hold beyond noise")
    # LongPPL over the documents: the CE pooled over equal key counts is the geometric mean
    geo = [math.exp(sum(math.log(x) for x in v) / 4) for v in (GOOD_LPPL, BAD_LPPL)]
    assert f"cdt: LongPPL < rp_standard: LongPPL (at the target): holds (gap {geo[0] - geo[1]:+.4g}" in rep.note
    # BABILong at 512 and 1024 (cdt 50.0 and 20.0, the others 0): gap 35 points
    assert "cdt: BABILong > rp_standard: BABILong (mean over the lengths up to the target): holds (gap +35" \
        in rep.note and "BABILong (lengths 512, 1024)" in rep.note
    # CE best on everything: the paper's opposite on all six
    lp = {"rp_standard": _docs(GOOD_LPPL), "rp_longce": _docs(GOOD_LPPL), "cdt": _docs(BAD_LPPL)}
    suite = _full_suite("rp_standard")
    suite["rp_longce"] = suite["rp_standard"]
    rep = cdt.cd_tab2(suite, P, longppl=lp)
    assert rep.agrees == "no" and "0/6 claims hold beyond noise, 6 significant the other way" in rep.note
    # the same rows, BABILong and LongPPL permuted between the arms: every gap 0, within noise
    suite = _full_suite("cdt")
    for name in ("rp_standard", "rp_longce"):
        suite[name] = {"suite": {**suite["cdt"]["suite"], "results": [
            {**r, "score": 1.0 - r["score"]} if r["task"].startswith("babilong") and r["length"] == 512
            and r["task"] in ("babilong_qa1", "babilong_qa5") else r for r in suite["cdt"]["suite"]["results"]]}}
    # qa1 at 512 (1 1 1 0) becomes (0 0 0 1) and qa5 (1 0 1 0) becomes (0 1 0 1): qa1 -0.5, qa5 0; the mean moves
    lp = {n: _docs(GOOD_LPPL if n == "cdt" else GOOD_LPPL[::-1]) for n in ("rp_standard", "rp_longce", "cdt")}
    rep = cdt.cd_tab2(suite, P, longppl=lp)
    gap_bl = 100 * 0.5 / 10  # qa1 at 512: 0.75 vs 0.25, weight 1/10 of the mean over 5 tasks x 2 lengths
    assert f"cdt: BABILong > rp_standard: BABILong (mean over the lengths up to the target): tie (gap +{gap_bl:.4g}" \
        in rep.note
    assert rep.agrees == "tie within noise" and "0/6 claims hold beyond noise, 6 tied" in rep.note


def test_longppl_gap_se_pairs_the_documents_and_seeds_widen_it():
    a, b = [_docs(GOOD_LPPL)], [_docs(BAD_LPPL)]
    se = cdt.longppl_gap_se(a, b)
    assert 0 < se < 0.2 and cdt.longppl_gap_se(a, a) == 0.0
    assert cdt.longppl_gap_se([{"longppl": 3.0}], b) is None  # no per-document rows: no standard error
    assert cdt.longppl_gap_se([_docs(GOOD_LPPL[:3])], b) is None  # different documents
    lp = {"rp_standard": _docs(BAD_LPPL), "rp_longce": _docs(BAD_LPPL), "cdt": _docs(GOOD_LPPL),
          "cdt@seed1": _docs([x + 0.5 for x in GOOD_LPPL])}
    suite = _full_suite("cdt")
    suite["cdt@seed1"] = suite["cdt"]
    rep = cdt.cd_tab2(suite, P, longppl=lp)
    geo = [math.exp(sum(math.log(x + d) for x in GOOD_LPPL) / 4) for d in (0.0, 0.5)]
    spread = abs(geo[1] - geo[0]) / math.sqrt(2)  # the sample std of two values
    assert f"widened by the training-seed spread (cdt {spread:.3g} over 2 seeds" in rep.note
    # the seeds' spread (s^2 / 2 for cdt, the pooled s^2 for CE and LongCE) swallows the LongPPL gaps
    assert rep.agrees == "partly" and "4/6 claims hold beyond noise, 2 tied" in rep.note
