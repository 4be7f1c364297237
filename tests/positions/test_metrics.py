"""Property tests for repro.positions.metrics (coverage and LongRecipe Fig. 2 statistics)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import positions as P

COVERING = [k for k, v in P.TRANSFORM_INFO.items() if v.covers_target]


def _sample(n=64, every=7):
    return P.PositionSample(n=n, sentence_starts=tuple(range(0, n, every)))


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
    assert len(rows) == 8 and set(P.LR_FIG2_COLUMNS) <= set(rows[0])
    by = {(r["method"], r["target"]): r for r in rows}
    assert by[("flt", 2000)]["sample_len"] == 2000
    assert by[("longrecipe", 2000)]["mean_segment_length"] == pytest.approx(30.0)
    assert by[("rpes", 2000)]["mean_segment_steps"] < 1.0
    assert all(r["max_position"] < r["target"] for r in rows)

