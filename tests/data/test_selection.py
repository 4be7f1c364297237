"""LongRecipe sentence selection: whole sentences, original order, budget met, priorities respected."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from repro.data.selection import select_sentences, sentence_bounds


def test_sentence_bounds_hand_example():
    ends = np.array([0, 1, 0, 0, 1, 1, 0], dtype=bool)
    assert sentence_bounds(ends).tolist() == [[0, 2], [2, 5], [5, 6], [6, 7]]
    assert sentence_bounds(np.array([1, 1], dtype=bool)).tolist() == [[0, 1], [1, 2]]


def test_anchor_sentences_first_then_filler():
    # sentences of 3 tokens each: s0 [0,3) s1 [3,6) s2 [6,9) s3 [9,12); anchors in s1 and s3
    ends = np.zeros(12, dtype=bool)
    ends[[2, 5, 8, 11]] = True
    anchors = np.zeros(12, dtype=bool)
    anchors[[4, 10]] = True
    sel = select_sentences(ends, 6, np.random.default_rng(0), "anchors", anchor_mask=anchors)
    assert sel.kept.tolist() == [1, 3] and sel.index.tolist() == [3, 4, 5, 9, 10, 11]
    assert sel.sentence_starts.tolist() == [0, 3] and sel.n_anchor_sentences == 2
    # room for one more sentence: a non-anchor one fills it, order kept
    sel = select_sentences(ends, 9, np.random.default_rng(0), "anchors", anchor_mask=anchors)
    assert set(sel.kept.tolist()) >= {1, 3} and len(sel.kept) == 3 and list(sel.kept) == sorted(sel.kept)


def test_mandatory_sentences_always_kept_and_over_budget_refused():
    ends = np.zeros(12, dtype=bool)
    ends[[2, 5, 8, 11]] = True
    must = np.zeros(12, dtype=bool)
    must[[0, 11]] = True
    for seed in range(5):
        sel = select_sentences(ends, 7, np.random.default_rng(seed), "random", mandatory_mask=must)
        assert {0, 3} <= set(sel.kept.tolist())
    with pytest.raises(ValueError, match="mandatory sentences hold 6 tokens; budget=5"):
        select_sentences(ends, 5, np.random.default_rng(0), "random", mandatory_mask=must)


def test_bad_arguments_are_named():
    ends = np.ones(4, dtype=bool)
    with pytest.raises(ValueError, match="selection mode 'best'"):
        select_sentences(ends, 2, np.random.default_rng(0), "best")
    with pytest.raises(ValueError, match="needs anchor_mask"):
        select_sentences(ends, 2, np.random.default_rng(0), "anchors")
    with pytest.raises(ValueError, match="budget=0"):
        select_sentences(ends, 0, np.random.default_rng(0), "random")


@settings(max_examples=150, deadline=None)
@given(st.lists(st.integers(1, 12), min_size=1, max_size=40), st.integers(1, 120), st.integers(0, 2**31),
       st.sampled_from(["anchors", "random"]), st.floats(0.0, 1.0))
def test_selection_properties(lengths, budget, seed, mode, p_anchor):
    n = sum(lengths)
    ends = np.zeros(n, dtype=bool)
    ends[np.cumsum(lengths) - 1] = True
    rng = np.random.default_rng(seed)
    anchored = rng.random(len(lengths)) < p_anchor
    anchor_mask = np.repeat(anchored, lengths) & (rng.random(n) < 0.5)
    anchored = np.array([anchor_mask[a:b].any() for a, b in sentence_bounds(ends)])
    sel = select_sentences(ends, budget, np.random.default_rng(seed), mode, anchor_mask=anchor_mask)
    bounds = sentence_bounds(ends)
    lens = bounds[:, 1] - bounds[:, 0]
    # whole sentences, in their original order
    assert list(sel.kept) == sorted(set(sel.kept.tolist()))
    assert sel.index.tolist() == [i for k in sel.kept for i in range(*bounds[k])]
    assert (np.diff(sel.index) > 0).all()
    # the budget is met: never exceeded, and no unselected sentence would still fit
    used = int(lens[sel.kept].sum())
    assert used == len(sel.index) <= budget
    unselected = np.setdiff1d(np.arange(len(lens)), sel.kept)
    assert all(lens[u] > budget - used for u in unselected)
    # kept sentences start where the transform expects them
    assert sel.sentence_starts.tolist() == np.concatenate(
        [[0], np.cumsum(lens[sel.kept])[:-1]]).tolist()[:len(sel.kept)]
    if mode == "anchors":  # anchors are tried before fillers: a dropped anchor did not fit beside the kept anchors
        anchor_used = int(lens[[k for k in sel.kept if anchored[k]]].sum())
        assert all(lens[u] > budget - anchor_used for u in unselected if anchored[u])
