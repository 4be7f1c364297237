"""Property tests for repro.positions.metrics (coverage and LongRecipe Fig. 2 statistics)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import positions as P

COVERING = [k for k, v in P.TRANSFORM_INFO.items() if v.covers_target]


def _sample(n=64, every=7):
    starts = tuple(range(0, n, every))
    texts = tuple("." if i + 1 in starts else "w" for i in range(n))  # official sentence ends at the same tokens
    return P.PositionSample(n=n, sentence_starts=starts, token_texts=texts)


# ------------------------------------------------------------------ coverage
@pytest.mark.parametrize("name", COVERING)
def test_covering_transforms_cover_target_window(name):
    n, target = 16, 48
    cov = P.coverage(name, _sample(n, 3), target, draws=3000, seed=1)
    assert np.all(cov.positions > 0), np.flatnonzero(cov.positions == 0)
    assert np.all(cov.distances[1:] > 0), np.flatnonzero(cov.distances[1:] == 0) + 1
    assert cov.positions.sum() == 3000 * n


def test_alg1_covers_all_distances_and_all_positions_but_one():
    n, target = 16, 48
    cov = P.coverage("longrecipe_alg1", _sample(n, 3), target, draws=3000, seed=1)
    assert np.flatnonzero(cov.positions == 0).tolist() == [3]  # right after the 3-token first sentence
    assert np.all(cov.distances[1:] > 0)


def test_flt_does_not_cover():
    cov = P.coverage("flt", _sample(16), 48, draws=5)
    assert np.all(cov.positions[16:] == 0) and np.all(cov.positions[:16] == 5)


# ------------------------------------------------------------------ metrics
@settings(max_examples=80, deadline=None)
@given(st.lists(st.integers(0, 10_000), min_size=0, max_size=60))
def test_metrics_match_brute_force(ps):
    p = np.array(ps, dtype=np.int64)
    n = p.size
    brute = np.abs(p[:, None] - p[None, :])[np.triu_indices(n, 1)].mean() if n > 1 else 0.0
    assert P.avg_token_distance(p) == pytest.approx(brute, rel=1e-12, abs=1e-12)
    runs, cur = [], 1
    for i in range(1, n):
        if p[i] == p[i - 1] + 1:
            cur += 1
        else:
            runs.append(cur)
            cur = 1
    if n:
        runs.append(cur)
    assert P.segment_lengths(p).tolist() == runs
    if n:
        target = int(p.max()) + 1
        d = np.abs(p[:, None] - p[None, :])[np.triu_indices(n, 1)]
        assert np.array_equal(P.distance_counts(p, target), np.bincount(d, minlength=target)[:target])


def test_metric_closed_forms_at_paper_scale():
    n = 131072
    assert P.avg_token_distance(np.arange(n)) == pytest.approx((n + 1) / 3)
    assert P.mean_segment_length(np.arange(n)) == n
    assert P.mean_segment_length(np.arange(0, 2 * n, 2)) == 1.0
    assert P.mean_segment_steps(np.arange(0, 2 * n, 2)) == 0.0


def test_lr_fig2_rows_small():
    s = _sample(300, 30)
    rows = P.lr_fig2_rows({1000: s, 2000: s}, seed=0, draws=4)
    assert len(rows) == 2 * len(P.LR_FIG2_METHODS) and set(P.LR_FIG2_COLUMNS) <= set(rows[0])
    assert {r["text"] for r in rows} == {"mixed"}
    by = {(r["method"], r["target"]): r for r in rows}
    assert by[("flt", 2000)]["sample_len"] == 2000 and by[("flt", 2000)]["share_at_or_beyond_n"] == 0.0
    assert by[("longrecipe", 2000)]["mean_segment_length"] == pytest.approx(30.0)
    assert by[("rpes", 2000)]["mean_segment_steps"] < 1.0
    assert by[("pose", 2000)]["mean_segment_length"] == by[("pose_official", 2000)]["mean_segment_length"] == 150.0
    assert all(r["max_position"] < r["target"] for r in rows)
    assert all(0.0 <= r["share_at_or_beyond_n"] <= 1.0 for r in rows)
    r = by[("pose", 2000)]  # the SE columns: std over the 4 draws / sqrt(3); FLT's one draw has none
    assert r["avg_token_distance_se"] == pytest.approx(r["avg_token_distance_std"] / np.sqrt(3))
    assert by[("flt", 2000)]["avg_token_distance_se"] is None and by[("flt", 2000)]["mean_segment_length_se"] is None
    # a row's draws do not depend on which other rows are computed
    alone = P.lr_fig2_rows({2000: s}, methods=["longrecipe_official"], seed=0, draws=4)
    assert alone == [by[("longrecipe_official", 2000)]]


def test_lr_fig2_rows_pose_official_reaches_beyond_n_more():
    s = P.PositionSample(n=300)
    rows = P.lr_fig2_rows({1000: s}, methods=["pose", "pose_official"], seed=0, draws=400, text="prose")
    share = {r["method"]: r["share_at_or_beyond_n"] for r in rows}
    assert {r["text"] for r in rows} == {"prose"}
    assert share["pose"] == pytest.approx(0.5 - 300 / (6 * 700), abs=0.03)
    assert share["pose_official"] == pytest.approx(0.75 - 7 * 300 / (24 * 700), abs=0.03)


def test_method_spec_and_unknown_method():
    assert P.method_spec("pose_official") == ("pose", {"first_chunk": "official"})
    assert P.method_spec("longrecipe") == ("longrecipe_alg1", {})
    assert P.method_spec("rpes") == ("rpes", {})
    with pytest.raises(ValueError, match=r"unknown method 'poses'; allowed: .*'pose_official'"):
        P.lr_fig2_rows({100: _sample(30)}, methods=["poses"])
    cov = P.coverages(_sample(16, 3), 48, ["pose", "pose_official"], draws=5)
    assert set(cov) == {"pose", "pose_official"} and cov["pose"].positions.sum() == 5 * 16


def test_lr_fig2_summary_per_text_and_nearest_segment():
    mixed, prose = _sample(300, 10), _sample(300, 60)
    rows = P.lr_fig2_rows({1000: mixed}, seed=0, draws=4, text="mixed") + \
        P.lr_fig2_rows({1000: prose}, seed=0, draws=4, text="prose")
    m, p = P.lr_fig2_summary(rows), P.lr_fig2_summary(rows, text="prose")
    assert (m["text"], p["text"]) == ("mixed", "prose")
    assert m["longrecipe_segment"] == pytest.approx(10.0) and p["longrecipe_segment"] == pytest.approx(60.0)
    assert m["segments"] == p["segments"] and set(m["segments"]) == {
        f"{k}/{t}" for k in ("longrecipe_eq7", "longrecipe", "longrecipe_official") for t in ("mixed", "prose")}
    method, text, seg = m["nearest_segment"]
    assert text == "prose" and abs(seg - P.LR_FIG2_PAPER_SEGMENT) == min(
        abs(v - P.LR_FIG2_PAPER_SEGMENT) for v in m["segments"].values())
    assert set(m["share_at_or_beyond_n"]) == {"pose/mixed", "pose_official/mixed", "pose/prose",
                                              "pose_official/prose"}
    with pytest.raises(ValueError, match=r"no LR-Fig2 rows with text='code'; allowed: \['mixed', 'prose'\]"):
        P.lr_fig2_summary(rows, text="code")


def test_lr_fig2_summary_standard_errors_over_draws():
    def row(method, target, dist, dist_std, seg, seg_std, draws=5):
        return {"method": method, "text": "mixed", "target": target, "draws": draws, "avg_token_distance": dist,
                "avg_token_distance_std": dist_std, "mean_segment_length": seg, "mean_segment_length_std": seg_std,
                "mean_segment_steps": seg - 1, "share_at_or_beyond_n": 0.5}

    rows = [row("longrecipe", 1000, 300.0, 8.0, 10.0, 2.0), row("longrecipe", 2000, 600.0, 12.0, 12.0, 4.0),
            row("pose", 2000, 300.0, 4.0, 100.0, 0.0), row("rpes", 1000, 50.0, 1.0, 1.5, 0.2),
            row("rpes", 2000, 90.0, 1.0, 1.4, 0.2)]
    s = P.lr_fig2_summary(rows)
    # a row's SE: std over 5 draws / sqrt(4); the ratio at 2000: 2 x hypot(6 / 600, 2 / 300)
    assert s["distance_ratio_longrecipe_pose"] == 2.0
    assert s["distance_ratio_se"] == pytest.approx(2 * np.hypot(6 / 600, 2 / 300))
    assert s["longrecipe_segment_se"] == pytest.approx(np.hypot(1.0, 2.0) / 2)  # mean over two targets
    assert s["rpes_segment_se"] == pytest.approx(np.hypot(0.1, 0.1) / 2)
    one = P.lr_fig2_summary([{**r, "draws": 1} for r in rows])
    assert one["distance_ratio_se"] is None and one["longrecipe_segment_se"] is None


def test_lr_fig2_rows_carry_the_segment_spread_over_draws():
    rows = P.lr_fig2_rows({1000: _sample(300, 10)}, methods=["longrecipe", "rpes"], seed=0, draws=4)
    assert all(r["mean_segment_length_std"] >= 0 for r in rows)
