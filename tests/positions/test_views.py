"""Property tests for repro.positions.views (self-distillation views)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import positions as P


# ------------------------------------------------------------------ views
@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(0, 2**31 - 1))
def test_skip_view_equal_before_s_shifted_by_y_after(n, seed):
    v = P.skip_view(P.PositionSample(n=n), 2 * n, np.random.default_rng(seed))
    s, y = v.info["s"], v.info["y"]
    assert 0 <= s < n and 1 <= y <= n
    std, per = v
    assert np.array_equal(std, np.arange(n))
    assert np.array_equal(per[:s], std[:s])
    assert np.array_equal(per[s:] - std[s:], np.full(n - s, y))
    assert per.max() < 2 * n


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.integers(0, 2**31 - 1))
def test_cyclic_and_chunk_permutation_are_permutations(n, seed):
    rng = np.random.default_rng(seed)
    s = P.PositionSample(n=n)
    cyc = P.cyclic_view(s, n, rng).perturbed
    assert np.array_equal(np.sort(cyc), np.arange(n))
    assert np.array_equal(cyc, (np.arange(n) + cyc[0]) % n)
    cp = P.chunk_permutation_view(s, n, rng, num_chunks=min(4, n))
    assert np.array_equal(np.sort(cp.perturbed), np.arange(n))
    assert (np.diff(cp.perturbed) != 1).sum() <= 3
    if n >= 4:
        assert cp.info["order"] != [0, 1, 2, 3]


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200), st.integers(0, 2**31 - 1))
def test_dilation_and_nope(n, seed):
    v = P.dilation_view(P.PositionSample(n=n), 2 * n, np.random.default_rng(seed))
    assert 0.5 <= v.info["factor"] <= 2.0
    assert np.all(np.diff(v.perturbed) >= 0) and v.perturbed.max() < 2 * n
    assert P.nope_view(P.PositionSample(n=n), n, np.random.default_rng(seed)).perturbed is None
