"""Ulysses sequence parallelism for real: two gloo processes on CPU against one process on the full row."""

import numpy as np
import pytest
import torch

from repro import positions as P
from repro.data.packing import Segment, pack_rows
from repro.parallel.check import TINY, reference, run_check, tiny_model
from repro.parallel.sequence import shard_row
from repro.parallel.step import row_attention, shard_forward
from repro.parallel.ulysses import register

T = 64


def _cases() -> list[dict]:
    rng = np.random.default_rng(0)
    ids = rng.integers(0, TINY["vocab_size"], size=(1, T))
    w = rng.uniform(0.5, 1.5, size=(1, T))
    pose = P.pose(P.PositionSample(T), 8 * T, rng)[None]
    skip = P.skip_view(P.PositionSample(T), 2 * T, rng, max_skip=T).perturbed[None]
    segs = [Segment(rng.integers(0, TINY["vocab_size"], n), np.ones(n, np.float32)) for n in (20, 30, 14)]
    packed = {k: v for k, v in pack_rows(segs, T, pad_id=0).items() if k != "answer_group"}
    moved = {**packed, "position_ids": packed["position_ids"] + 7 * packed["doc_ids"]}
    return [{"input_ids": ids, "position_ids": pose, "weights": w, "layout": "contiguous", "name": "pose"},
            {"input_ids": ids, "position_ids": skip, "weights": w, "layout": "zigzag", "name": "skip"},
            {**packed, "layout": "zigzag", "name": "packed restarts"},
            {**moved, "layout": "contiguous", "name": "packed, shifted positions"}]


@pytest.mark.slow
def test_two_process_ulysses_step_equals_the_full_row():
    cases = _cases()
    assert [row_attention(c) if isinstance(row_attention(c), str) else "cu" for c in cases] == \
        ["causal", "causal", "restarts", "cu"]
    results = run_check(cases, world=2, timeout=120)
    for case, ranks in zip(cases, results):
        ref = reference(case)
        for r, res in enumerate(ranks):
            np.testing.assert_array_equal(res["token_index"], shard_row(case, r, 2, case["layout"])["token_index"])
            np.testing.assert_allclose(res["logits"][0], ref["logits"][0][res["token_index"]], rtol=0, atol=1e-12,
                                       err_msg=case["name"])
            np.testing.assert_allclose(res["grads"], ref["grads"], rtol=0, atol=1e-12, err_msg=case["name"])
            assert np.abs(ref["grads"]).max() > 1e-2  # the gradients are not trivially small
        assert abs(sum(float(res["loss"]) for res in ranks) - float(ref["loss"])) < 1e-12, case["name"]
        # the control: the second shard attending to itself alone is far from the full row's outputs
        far = np.abs(ranks[1]["alone"][0] - ref["logits"][0][ranks[1]["token_index"]]).max()
        assert far > 1e-3, (case["name"], far)


def test_without_a_group_it_is_sdpa_varlen():
    case = _cases()[2]
    model = tiny_model(0, register())
    got = shard_forward(model, shard_row(case, 0, 1), row_attention(case)).logits
    want = reference(case)["logits"]
    np.testing.assert_allclose(got.detach().numpy(), want, rtol=0, atol=1e-12)
    assert got.dtype == torch.float64
