"""Sequence-parallel sharding of rows with the repo's own position transforms and packed documents."""

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import positions as P
from repro.attention.spans import starts_mask
from repro.data.packing import Segment, pack_rows
from repro.loss import weighted_clm_loss
from repro.parallel.sequence import IGNORE, LAYOUTS, check_length, gather_row, gathered_order, shard_indices, \
    shard_loss_sum, shard_row, shift_targets
from repro.parallel.step import row_attention

KINDS = ("pose", "longrecipe", "skip", "packed", "packed_pose")
VOCAB = 50


def _row(kind: str, length: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Full rows (rows, T) whose positions come from the repo's transforms (or packing with restarts)."""
    ids = rng.integers(0, VOCAB, size=(1, length))
    weights = rng.uniform(0.0, 2.0, size=(1, length))
    if kind == "pose":
        pos = P.pose(P.PositionSample(length), 4 * length, rng, num_chunks=min(3, length))
    elif kind == "longrecipe":
        k = int(rng.integers(1, min(5, length) + 1))
        starts = (0, *sorted(rng.choice(np.arange(1, length), size=k - 1, replace=False).tolist())) if k > 1 else (0,)
        pos = P.longrecipe_alg1(P.PositionSample(length, sentence_starts=starts), 3 * length + k, rng)
    elif kind == "skip":
        pos = P.skip_view(P.PositionSample(length), 2 * length, rng).perturbed
    else:
        lens, left = [], length
        while left:
            lens.append(int(rng.integers(1, left + 1)))
            left -= lens[-1]
        segs = []
        for n in lens:
            p = P.pose(P.PositionSample(n), 4 * n, rng) if kind == "packed_pose" else None
            segs.append(Segment(rng.integers(0, VOCAB, n), rng.uniform(0.5, 1.5, n).astype(np.float32), p))
        packed = pack_rows(segs, length, pad_id=0)
        return {k: packed[k] for k in ("input_ids", "position_ids", "doc_ids", "weights")}
    return {"input_ids": ids, "position_ids": np.asarray(pos)[None], "weights": weights}


def _expected_slice(x: np.ndarray, rank: int, world: int, layout: str) -> np.ndarray:
    """The rank's tokens written out independently of shard_indices."""
    T = x.shape[-1]
    if layout == "contiguous":
        s = T // world
        return x[..., rank * s:(rank + 1) * s]
    c = T // (2 * world)
    return np.concatenate([x[..., rank * c:(rank + 1) * c], x[..., (2 * world - 1 - rank) * c:(2 * world - rank) * c]],
                          axis=-1)


rows = st.tuples(st.sampled_from(KINDS), st.sampled_from(LAYOUTS), st.integers(1, 4), st.integers(1, 6),
                 st.integers(0, 2**31 - 1))


@settings(max_examples=150, deadline=None)
@given(rows)
def test_shards_are_the_rows_slices(params):
    kind, layout, world, chunk, seed = params
    length = chunk * (world if layout == "contiguous" else 2 * world)
    if kind in ("longrecipe", "skip", "pose") and length < 2:
        return
    full = _row(kind, length, np.random.default_rng(seed))
    targets, tw = shift_targets(full["input_ids"], full["weights"])
    starts = starts_mask(doc_ids=full["doc_ids"]) if "doc_ids" in full else np.eye(1, length, dtype=bool)
    shards = [shard_row(full, r, world, layout) for r in range(world)]
    for r, sh in enumerate(shards):
        for k in full:
            np.testing.assert_array_equal(sh[k], _expected_slice(full[k], r, world, layout), err_msg=k)
        np.testing.assert_array_equal(sh["doc_starts"], _expected_slice(np.asarray(starts), r, world, layout))
        np.testing.assert_array_equal(sh["targets"], _expected_slice(targets, r, world, layout))
        # shard edges: each token's target is the next token of the full row, wherever it lives
        for j, t in enumerate(sh["token_index"]):
            if t + 1 < length:
                assert sh["targets"][0, j] == full["input_ids"][0, t + 1]
                assert sh["target_weights"][0, j] == np.float64(full["weights"][0, t + 1])
            else:
                assert sh["targets"][0, j] == IGNORE and sh["target_weights"][0, j] == 0
    back = gather_row(shards, layout)
    for k in full:
        np.testing.assert_array_equal(back[k], full[k], err_msg=k)
    np.testing.assert_array_equal(back["targets"], targets)
    np.testing.assert_array_equal(back["token_index"], np.arange(length))
    # the shards' weighted losses add up to the full row's (float64, given the full row's logits)
    logits = torch.as_tensor(np.random.default_rng(seed + 1).normal(size=(*full["input_ids"].shape, VOCAB)))
    ids = torch.as_tensor(full["input_ids"])
    w = torch.as_tensor(full["weights"], dtype=torch.float64)
    want, _ = weighted_clm_loss(logits, ids, w)
    total = sum(sh["target_weights"].astype(np.float64).sum() for sh in shards)
    got = sum(shard_loss_sum(logits[..., torch.as_tensor(sh["token_index"]), :], torch.as_tensor(sh["targets"]),
                             torch.as_tensor(sh["target_weights"], dtype=torch.float64)) for sh in shards) / total
    if float(w[:, 1:].sum()) > 0:
        assert abs(float(got) - float(want)) < 1e-12 * max(1.0, abs(float(want)))


def test_zigzag_layout_and_order():
    assert shard_indices(8, 0, 2, "zigzag").tolist() == [0, 1, 6, 7]
    assert shard_indices(8, 1, 2, "zigzag").tolist() == [2, 3, 4, 5]
    assert gathered_order(8, 2, "zigzag").tolist() == [0, 1, 6, 7, 2, 3, 4, 5]
    assert shard_indices(6, 2, 3).tolist() == [4, 5]


def test_shard_edge_targets_by_hand():
    full = {"input_ids": np.arange(10, 18), "position_ids": np.array([0, 1, 2, 9, 10, 11, 12, 13])}
    r0, r1 = (shard_row(full, r, 2) for r in range(2))
    assert r0["targets"].tolist() == [11, 12, 13, 14] and r1["targets"].tolist() == [15, 16, 17, IGNORE]
    assert r1["position_ids"].tolist() == [10, 11, 12, 13]  # the row's ids, not restarted on the shard
    assert r1["doc_starts"].tolist() == [False] * 4
    z1 = shard_row(full, 1, 2, "zigzag")
    assert z1["input_ids"].tolist() == [12, 13, 14, 15] and z1["targets"].tolist() == [13, 14, 15, 16]


@pytest.mark.parametrize("length,world,layout,pad", [(10, 4, "contiguous", 2), (12, 2, "zigzag", 0),
                                                    (14, 2, "zigzag", 2), (3, 4, "contiguous", 1)])
def test_uneven_rows_are_refused_with_the_padding(length, world, layout, pad):
    if pad == 0:
        assert check_length(length, world, layout) == length // world
        return
    with pytest.raises(ValueError, match=rf"row length {length} .*world={world} .*layout='{layout}'.*"
                                         rf"pad each row by {pad} token\(s\) to {length + pad}"):
        shard_row({"input_ids": np.zeros(length, int)}, 0, world, layout)


def test_bad_layout_rank_and_shapes():
    with pytest.raises(ValueError, match="layout='ring'; allowed: 'contiguous', 'zigzag'"):
        shard_indices(8, 0, 2, "ring")
    with pytest.raises(ValueError, match="rank=2; allowed: 0 <= rank < world=2"):
        shard_indices(8, 2, 2)
    with pytest.raises(ValueError, match="position_ids of shape"):
        shard_row({"input_ids": np.zeros(8, int), "position_ids": np.zeros(6, int)}, 0, 2)


def test_row_attention_follows_the_masking_policy():
    rng = np.random.default_rng(0)
    assert row_attention(_row("pose", 16, rng)) == "causal"
    assert row_attention(_row("skip", 16, rng)) == "causal"
    packed = pack_rows([Segment(np.arange(5), np.ones(5, np.float32)), Segment(np.arange(7), np.ones(7, np.float32))],
                       16, pad_id=0)
    assert row_attention(packed) == "restarts"
    moved = {**packed, "position_ids": packed["position_ids"] + 3 * packed["doc_ids"]}
    assert row_attention(moved).tolist() == [0, 5, 12, 16]
