"""Gradient accumulation with the token-averaged loss: k micro-batches give the gradient of their union (float64,
``rtol = atol = 1e-12``), also with very uneven valid-token counts, where the conventional mean of the micro-batch
means does not; the trainer with accumulation (and with the micro-batches reordered) trains to the weights of the
trainer without it, and resumes exactly."""

import json

import numpy as np
import pytest
import torch

from repro.accumulation import accumulation_scales, answer_count, merge_metrics, micro_batches, target_weight
from repro.data.packing import Segment, lm_segment, pack_rows
from repro.train import Interrupted, Trainer, TrainConfig, clm_step
from tests.test_train import ToyMethod, _weights

TOL = dict(rtol=1e-12, atol=1e-12)


def _uneven_rows(seed: int = 0, fractional: bool = False) -> dict[str, np.ndarray]:
    """6 rows of 16 tokens: four packed full rows, then a row with one 3-token document (13 padding tokens) and a
    row of one 2-token document (14 padding tokens): micro-batches of 2 rows have 30, ~28 and 3 valid targets."""
    rng = np.random.default_rng(seed)
    packs = []
    for lengths in ((9, 7, 5, 11, 16, 4, 4, 8), (3,), (2,)):
        segs = []
        for length in lengths:
            w = rng.choice([0.05, 1.0], size=length).astype(np.float32) if fractional else np.ones(length, np.float32)
            ans = np.zeros(length, bool)
            ans[-2:] = length >= 4
            segs.append(Segment(rng.integers(3, 64, size=length).astype(np.int64), w, answer=ans))
        packs.append(pack_rows(segs, 16, 0))
    rows = {k: np.concatenate([p[k] for p in packs]) for k in packs[0]}
    assert rows["input_ids"].shape[0] == 6 and rows["answer_group"].max() == 7
    return rows


def _torch(rows, weights_dtype=torch.float64):
    b = {k: torch.as_tensor(v) for k, v in rows.items()}
    b["weights"] = b["weights"].to(weights_dtype)
    return b


def _grads(model, parts, scales, chunked=True):
    model.zero_grad(set_to_none=True)
    for part, scale in zip(parts, scales):
        loss, _ = clm_step(model, part, bf16=False, chunked=chunked)
        (loss * scale).backward()
    return {n: p.grad.detach().clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("chunked", [True, False])
@pytest.mark.parametrize("size", [1, 2, 4])
@pytest.mark.parametrize("fractional", [False, True])
def test_accumulated_gradient_equals_the_whole_batch_and_the_conventional_mean_does_not(tiny_llama, chunked, size,
                                                                                       fractional):
    model = tiny_llama().double()
    batch = _torch(_uneven_rows(fractional=fractional))
    whole = _grads(model, [batch], [1.0], chunked)
    parts = micro_batches(batch, size)
    weights = [target_weight(p) for p in parts]
    assert len(parts) == -(-6 // size) and max(weights) >= 5 * min(weights)  # very uneven valid targets
    acc = _grads(model, parts, accumulation_scales(weights), chunked)
    assert whole.keys() == acc.keys()
    for k in whole:
        assert torch.allclose(acc[k], whole[k], **TOL), (k, (acc[k] - whole[k]).abs().max())
    naive = _grads(model, parts, [1 / len(parts)] * len(parts), chunked)
    gap = max(float((naive[k] - whole[k]).abs().max() / whole[k].abs().max()) for k in whole)
    assert gap > 1e-2


def test_a_micro_batch_without_valid_targets_adds_nothing(tiny_llama):
    model = tiny_llama().double()
    batch = _torch(_uneven_rows())
    batch["weights"][4:] = 0  # the last micro-batch of 2 rows has no weighted target at all
    whole = _grads(model, [batch], [1.0])
    parts = micro_batches(batch, 2)
    scales = accumulation_scales([target_weight(p) for p in parts])
    assert scales[-1] == 0
    acc = _grads(model, parts, scales)
    for k in whole:
        assert torch.allclose(acc[k], whole[k], **TOL), k


def test_micro_batches_split_rows_and_refuse_entries_that_are_not_per_row():
    b = {"input_ids": torch.zeros(5, 4), "weights": torch.ones(5, 4), "split": torch.arange(5), "s": torch.tensor(3)}
    parts = micro_batches(b, 2)
    assert [p["input_ids"].shape[0] for p in parts] == [2, 2, 1]
    assert torch.equal(torch.cat([p["split"] for p in parts]), b["split"]) and all(p["s"] == 3 for p in parts)
    assert micro_batches(b, 0) == [b] and micro_batches(b, 5) == [b] and micro_batches(b, 9) == [b]
    with pytest.raises(ValueError, match="'bad'"):
        micro_batches({**b, "bad": torch.zeros(4)}, 2)
    with pytest.raises(ValueError, match="size=-1"):
        micro_batches(b, -1)


def test_scales_take_a_data_parallel_total_and_metrics_merge_over_the_step():
    assert accumulation_scales([30, 10]) == [0.75, 0.25]
    assert accumulation_scales([30, 10], total=80) == [0.375, 0.125]  # the other rank holds the other 40
    assert accumulation_scales([0, 0]) == [0.5, 0.5]
    # the conventional average (the CDT authors' trainer): 1 / n each, whatever the valid weights
    assert accumulation_scales([30, 10], weighting="mean") == [0.5, 0.5]
    assert accumulation_scales([30, 10, 0, 1], total=80, weighting="mean") == [0.25] * 4
    with pytest.raises(ValueError, match="weighting='rows'; allowed: tokens, mean"):
        accumulation_scales([1, 2], weighting="rows")
    m = merge_metrics([{"loss": 2.0, "train_em": 1.0, "x": 4.0}, {"loss": 4.0, "train_em": 0.0}],
                      [0.75, 0.25], [1, 3])
    assert m == {"loss": 2.5, "train_em": 0.25, "x": 4.0}


def test_answer_count_matches_exact_match_totals():
    rows = _torch(_uneven_rows())
    assert answer_count(rows) == 8  # every document of >= 4 tokens ends with a 2-token answer
    assert [answer_count(p) for p in micro_batches(rows, 2)] == [4, 4, 0]


class UnevenMethod(ToyMethod):
    """Uneven packed rows (mostly-padding rows included) with answers, a pure function of the step (the trainer
    tests' toy method otherwise)."""

    name = "uneven"

    def __init__(self, fractional: bool = False):
        super().__init__()
        self.fractional = fractional

    def batch(self, step):
        return _uneven_rows(seed=step, fractional=self.fractional)




def _metrics(path):
    return [json.loads(ln) for ln in (path / "metrics.jsonl").read_text().splitlines()]


def test_trainer_with_accumulation_trains_to_the_same_weights_in_float64(tiny_llama, tmp_path):
    """3 AdamW steps (grad clipping on) of 6 rows (0/1 weights: their float32 sums are exact): one pass,
    micro-batches of 1, 2 and 4 rows, and 2 rows with the micro-batches reordered by sum of squared document
    lengths: same weights to 1e-12 (measured 3e-16), same step metrics."""
    runs = {}
    for name, size, reorder in (("whole", 0, False), ("m1", 1, False), ("m2", 2, False), ("m4", 4, False),
                                ("m2_sorted", 2, True)):
        m = tiny_llama().double()
        cfg = TrainConfig(max_steps=3, lr=1e-3, checkpoint_every=0, micro_batch_size=size,
                          reorder_microbatches=reorder)
        Trainer(m, UnevenMethod(), cfg, tmp_path / name, progress=False).train()
        runs[name] = (_weights(m), _metrics(tmp_path / name))
    ref, ref_metrics = runs.pop("whole")
    assert "micro_batches" not in ref_metrics[0]
    for name, (w, metrics) in runs.items():
        for k in ref:
            assert torch.allclose(w[k], ref[k], **TOL), (name, k)
        for a, b in zip(metrics, ref_metrics):
            assert a["loss"] == pytest.approx(b["loss"], rel=1e-12, abs=1e-12), name
            assert a["train_em"] == pytest.approx(b["train_em"], rel=1e-12), name
            assert a["tokens"] == b["tokens"] == 96 and a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-10)
        assert metrics[0]["micro_batches"] == {"m1": 6, "m2": 3, "m4": 2, "m2_sorted": 3}[name]


def test_in_float32_with_fractional_weights_the_weights_agree_to_1e_6(tiny_llama, tmp_path):
    """The trainer's float32 weights (sums of 0.05 weights inexact): 3 steps at lr 1e-3 agree to 1e-6 (lr / 1000;
    measured 2e-7)."""
    out = []
    for size in (0, 1):
        m = tiny_llama()
        cfg = TrainConfig(max_steps=3, lr=1e-3, checkpoint_every=0, micro_batch_size=size)
        Trainer(m, UnevenMethod(fractional=True), cfg, tmp_path / str(size), progress=False).train()
        out.append(_weights(m))
    for k in out[0]:
        assert torch.allclose(out[1][k], out[0][k], rtol=0, atol=1e-6), k


def test_default_and_oversized_micro_batches_are_bit_identical(tiny_llama, tmp_path):
    out = []
    for size in (0, 6, 64):
        m = tiny_llama()
        cfg = TrainConfig(max_steps=2, lr=1e-3, checkpoint_every=0, micro_batch_size=size)
        Trainer(m, UnevenMethod(), cfg, tmp_path / str(size), progress=False).train()
        out.append(_weights(m))
    for w in out[1:]:
        assert all(torch.equal(w[k], out[0][k]) for k in w)


def test_accumulated_run_killed_and_resumed_ends_with_identical_weights(tiny_llama, tmp_path):
    cfg = TrainConfig(max_steps=4, lr=3e-3, warmup_steps=1, checkpoint_every=2, seed=0, micro_batch_size=2,
                      reorder_microbatches=True)
    ref = tiny_llama()
    Trainer(ref, UnevenMethod(), cfg, tmp_path / "ref", progress=False).train()
    with pytest.raises(Interrupted):
        Trainer(tiny_llama(), UnevenMethod(), cfg, tmp_path / "run", progress=False).train(stop_after=3)
    fresh = tiny_llama(seed=123)
    Trainer(fresh, UnevenMethod(), cfg, tmp_path / "run", progress=False).train()
    a, b = _weights(ref), _weights(fresh)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_micro_batch_size_is_validated():
    with pytest.raises(ValueError, match="micro_batch_size=-2; allowed: 0"):
        TrainConfig(max_steps=1, lr=1e-3, micro_batch_size=-2)


def test_target_weight_skips_each_rows_first_column():
    rows = pack_rows([lm_segment([5, 6, 7]), lm_segment([8, 9])], 8, 0)
    assert target_weight(_torch(rows)) == 3.0 and target_weight({"weights": torch.ones(2, 4)}) == 6.0
