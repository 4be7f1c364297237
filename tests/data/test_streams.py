import numpy as np
import pytest

from repro.data.mixing import Mixture, check_proportions
from repro.data.streams import TokenStream, merge_pieces


def _docs(n=7, seed=0, lo=3, hi=40):
    rng = np.random.default_rng(seed)
    return [np.r_[1, rng.integers(2, 100, size=int(rng.integers(lo, hi)))] for _ in range(n)]


def test_rows_tile_each_epoch_reading_every_document_once():
    docs = _docs()
    s = TokenStream("s", docs, seed=3)
    L = 5
    total = s.epoch_tokens
    flat = np.concatenate([seg.tokens for k in range(total * 2 // L + 1) for seg in s.row(k, L)])
    for e in range(2):  # each epoch is a permutation of the documents, concatenated
        order, _ = s._epoch_order(e)
        expect = np.concatenate([docs[i] for i in order])
        assert np.array_equal(flat[e * total:(e + 1) * total], expect)
    assert not np.array_equal(s._epoch_order(0)[0], s._epoch_order(1)[0])  # a new order per epoch


def test_a_row_is_cut_at_document_boundaries_and_fills_its_length():
    s = TokenStream("s", _docs(), seed=1)
    for k in range(30):
        pieces = s.row(k, 16)
        assert sum(len(p.tokens) for p in pieces) == 16
        for p in pieces[1:]:  # every piece after the first starts a document (its BOS)
            assert p.tokens[0] == 1


def test_row_k_is_a_pure_function_of_k_across_instances_and_orders():
    docs = _docs(12, seed=5)
    a, b = TokenStream("x", docs, seed=9), TokenStream("x", docs, seed=9)
    rows_a = [np.concatenate([p.tokens for p in a.row(k, 33)]) for k in range(40)]
    for k in reversed(range(40)):  # another reader, in reverse order
        assert np.array_equal(np.concatenate([p.tokens for p in b.row(k, 33)]), rows_a[k])
    c = TokenStream("y", docs, seed=9)  # the stream's name salts its order
    assert any(not np.array_equal(np.concatenate([p.tokens for p in c.row(k, 33)]), rows_a[k]) for k in range(40))


def test_merged_row_keeps_the_masked_rows_targets():
    s = TokenStream("s", _docs(), seed=2)
    pieces = s.row(3, 64)
    merged = merge_pieces(pieces)
    masked_targets = np.concatenate([np.r_[0.0, p.weights[1:]] for p in pieces])
    assert np.array_equal(merged.weights, masked_targets) and len(merged.tokens) == 64
    assert merged.positions is None


def test_empty_stream_and_bad_rows_are_refused():
    with pytest.raises(ValueError, match="holds no documents"):
        TokenStream("e", [np.zeros(0, dtype=np.int64)])
    with pytest.raises(ValueError, match="allowed: k >= 0, length >= 1"):
        TokenStream("s", _docs()).row(-1, 4)


def _mixture(props, seed=0):
    streams = [TokenStream(n, _docs(9, seed=i), seed=seed) for i, n in enumerate(("a", "b", "c"))]
    return Mixture(streams, props, seed=seed)


def test_mixture_proportions_are_met_within_sampling_error():
    props = {"a": 0.3, "b": 0.3, "c": 0.4}
    m = _mixture(props, seed=4)
    steps, rows = 500, 8
    counts = m.counts_before(steps, rows)
    n = steps * rows
    for i, name in enumerate(m.names):
        p = props[name]
        se = (p * (1 - p) / n) ** 0.5
        assert abs(counts[i] / n - p) < 4 * se, (name, counts[i] / n)


def test_mixture_resumed_mid_epoch_reads_the_same_rows():
    full = _mixture({"a": 0.5, "b": 0.25, "c": 0.25}, seed=7)
    ref = [[np.concatenate([p.tokens for p in pieces]) for _, pieces in full.step_rows(s, 4, 11)] for s in range(60)]
    resumed = _mixture({"a": 0.5, "b": 0.25, "c": 0.25}, seed=7)  # a fresh process starting at step 37
    for s in range(37, 60):
        got = [np.concatenate([p.tokens for p in pieces]) for _, pieces in resumed.step_rows(s, 4, 11)]
        assert all(np.array_equal(x, y) for x, y in zip(got, ref[s]))
    assert full.streams["a"].epoch_tokens < 60 * 4 * 11 * 0.5 / 2  # the run crossed epochs


def test_zero_shares_are_never_drawn_and_bad_proportions_are_named():
    m = _mixture({"a": 0.0, "b": 1.0, "c": 0.0})
    assert m.names == ["b"] and all(name == "b" for name, _ in m.step_rows(3, 8, 5))
    with pytest.raises(ValueError, match="sum to 0.9"):
        check_proportions({"a": 0.5, "b": 0.4})
    with pytest.raises(ValueError, match=r"out of range; allowed: each in \[0, 1\]"):
        check_proportions({"a": 1.5, "b": -0.5})
    with pytest.raises(ValueError, match="unknown stream"):
        _mixture({"a": 0.5, "zz": 0.5})
