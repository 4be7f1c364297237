"""Tests for repro.reports.attention (RP-Fig2's tables and verdict) on hand-made records."""

from __future__ import annotations

import pytest

from repro.profiles import get_profile
from repro.reports.attention import PAPER_ROW, key_share_beyond, rp_fig2


def _record(far_shares: list[float], layers: int = 3, length: int = 100) -> dict:
    """A record as :func:`repro.analysis.distance_records.distance_record` writes it; every layer has the given
    per-text far shares, and 10 entries per text (so the pooled share is their mean)."""
    n = len(far_shares)
    out = []
    for k in range(layers):
        far = sum(round(10 * s) for s in far_shares)
        out.append({"layer": k, "edges": [0.0, 50.0, 100.0], "counts": [10 * n - far, far], "mass": [0.5, 0.25],
                    "rows": 8 * n, "entries": 10 * n, "entries_per_row": 1.25, "mean_distance": 40.0,
                    "weighted_mean_distance": 30.0, "far_share": far / (10 * n), "far_mass_share": 0.25 / 0.75,
                    "per_sample": {"far_share": far_shares, "far_mass_share": [0.3] * n,
                                   "mean_distance": [40.0] * n, "weighted_mean_distance": [30.0] * n}})
    return {"length": length, "queries": 4, "samples": n, "threshold": 1e-3, "far": 0.5, "edges": [0.0, 50.0, 100.0],
            "verdict_layer": 2, "seconds": 0.1, "layers": out}


LOW = [0.2, 0.3, 0.2, 0.3]
HIGH = [0.6, 0.7, 0.6, 0.7]


def test_tables_and_ours_from_records():
    rep = rp_fig2({"base": _record(LOW), "flt": _record(HIGH)}, {"rp_skip": "not trained"}, get_profile("tiny"))
    assert rep.target == "RP-Fig2" and [t["name"] for t in rep.tables] == ["RP-Fig2", "RP-Fig2-hist"]
    rows = rep.tables[0]["rows"]
    assert len(rows) == 2 * 3 + 1 and rows[-1]["model"] == PAPER_ROW
    flt2 = next(r for r in rows if r["model"] == "flt" and r["layer"] == 2)
    assert flt2["share beyond far"] == 0.65 and flt2["entries"] == 40 and flt2["SE over texts"] == 0.025
    hist = rep.tables[1]["rows"]
    assert len(hist) == 2 * 3 * 2 and hist[1] == {"model": "base", "layer": 0, "from": 50.0, "to": 100.0,
                                                  "count": 10, "mass": 0.25}
    assert rep.ours == ("share of entries beyond 0.5T (of key positions: 0.482) at layers 0 / 1 / 2: "
                        "base 0.25 / 0.25 / 0.25; flt 0.65 / 0.65 / 0.65")
    assert rep.agrees == "n/a" and "needs a self-distillation arm" in rep.note
    assert "Not trained yet, so not shown: rp_skip." in rep.tables[0]["caption"]
    assert "tiny: 3-layer d=128 Llama trained here, T = 100" in rep.tables[0]["caption"]


@pytest.mark.parametrize("skip, cyclic, verdict", [
    (HIGH, HIGH, "yes"),
    ([0.1, 0.2, 0.1, 0.2], [0.1, 0.2, 0.1, 0.2], "no"),
    (HIGH, [0.1, 0.2, 0.1, 0.2], "partly"),
    ([0.3, 0.2, 0.3, 0.2], [0.2, 0.3, 0.2, 0.3], "tie within noise"),  # gaps of 0 +- 0.05: within 2 SE
])
def test_verdict_per_text_against_standard_fine_tuning(skip, cyclic, verdict):
    recs = {"flt": _record(HIGH), "rp_standard": _record(LOW), "rp_skip": _record(skip), "rp_cyclic": _record(cyclic)}
    rep = rp_fig2(recs, {})
    assert rep.agrees == verdict and "Holm over 6" in rep.note  # 2 arms x 3 layers
    assert "stands in" not in rep.note  # the comparison's own standard arm first


def test_verdict_falls_back_to_flt_and_no_records():
    rep = rp_fig2({"flt": _record(LOW), "rp_skip": _record(HIGH)}, {"rp_standard": "not trained"})
    # rp_cyclic is not analysed: its three claims are untested, so skip's three holding make it partly, not yes
    assert rep.agrees == "partly" and "flt stands in for rp_standard" in rep.note
    gap = 0.4 / key_share_beyond(100, 4, 0.5)  # 0.4 of the far share over the key share 190 / 394
    assert f"rp_skip layer 0 > rp_standard layer 0 (share of above-threshold attention beyond T/2 over the share of " \
           f"key positions there, layer 0): holds (gap {gap:+.4g} +- " in rep.note
    empty = rp_fig2({}, {"base": "not trained"})
    assert empty.agrees == "n/a" and empty.tables == [] and "base: not trained" in empty.note


def test_key_share_beyond_by_hand():
    # T = 100, last 4 queries at 96..99 see 97..100 keys, of which 46..49 lie beyond distance 50
    assert key_share_beyond(100, 4, 0.5) == pytest.approx(190 / 394)
    assert key_share_beyond(10, 1, 0.5) == pytest.approx(4 / 10)  # query 9: distances 6..9 of 0..9
    with pytest.raises(ValueError, match="queries=11, far=0.5; allowed: 1 <= queries <= length"):
        key_share_beyond(10, 11, 0.5)


def _layered(shares_by_layer: list[list[float]]) -> dict:
    """A record whose layer k has the per-text far shares ``shares_by_layer[k]``."""
    rec = _record(shares_by_layer[0], layers=len(shares_by_layer))
    for lay, shares in zip(rec["layers"], shares_by_layer):
        lay["per_sample"]["far_share"] = shares
    return rec


def test_every_layer_is_tested():
    # the run the old rule read at layer 2 only: skip above Standard at layer 1, below at layer 2
    standard = _layered([LOW, [0.37, 0.38, 0.37, 0.38], [0.38, 0.39, 0.38, 0.39]])
    skip = _layered([LOW, [0.41, 0.42, 0.41, 0.42], [0.29, 0.30, 0.29, 0.30]])
    rep = rp_fig2({"rp_standard": standard, "rp_skip": skip, "rp_cyclic": _layered([LOW, LOW, LOW])}, {})
    # layer 0 ties (equal), layer 1 holds (+0.04, SE 0), layer 2 the other way (-0.09); cyclic below at 1 and 2
    assert rep.agrees == "partly"
    share = key_share_beyond(100, 4, 0.5)
    assert f"rp_skip layer 1 > rp_standard layer 1 (share of above-threshold attention beyond T/2 over the share of " \
           f"key positions there, layer 1): holds (gap {0.04 / share:+.4g}" in rep.note
    assert "rp_skip layer 2 > rp_standard layer 2 (share of above-threshold attention beyond T/2 over the share of " \
           "key positions there, layer 2): contrary" in rep.note
    only_2 = rp_fig2({"rp_standard": standard, "rp_skip": _layered([LOW, LOW, skip["layers"][2]["per_sample"][
        "far_share"]]), "rp_cyclic": _layered([LOW, LOW, LOW])}, {})
    assert only_2.agrees == "no"  # below at layers 1 and 2, level at 0: nothing holds
