"""PL-Tab15 reordering: the simulator on hand-built steps (exact step times), the cost fit, the benchmark's
training pass with sdpa_varlen (the real CLM gradient), realistic packed steps, and the 2-process gloo check
(sleeps: their step times are the simulator's; compute: a smoke run)."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.attention.doc_masked import SDPA_VARLEN, register
from repro.bench.reorder import markdown, realistic_steps, run
from repro.bench.reorder_dist import run_distributed
from repro.bench.reorder_model import tiny_model, train_pass
from repro.bench.reorder_sim import ORDERS, CostModel, deal, fit_cost_model, simulate, step_time
from repro.data.balance import sum_sq_lengths
from repro.data.packing import lm_segment, pack_rows
from repro.train import clm_step


def _row(*lengths, T=8):
    return pack_rows([lm_segment(np.arange(3, 3 + n)) for n in lengths], T, 0)


# sum of squares 9 (3 tokens + 5 padding), 64, 16, 32; 8 tokens each
STEP = [_row(3), _row(8), _row(2, 2, 2, 2), _row(4, 4)]


def test_deal_is_round_robin_in_the_given_or_sorted_order():
    keys = [9, 64, 16, 32]
    assert deal(keys, 2) == [[0, 2], [1, 3]]
    assert deal(keys, 2, "sorted") == [[1, 2], [3, 0]]
    assert deal(keys, 2, "sorted_per_worker") == [[2, 0], [1, 3]]
    assert deal(keys, 3) == [[0, 3], [1], [2]]
    with pytest.raises(ValueError, match="order='random'"):
        deal(keys, 2, "random")


def test_step_time_is_the_sum_over_rounds_of_the_slowest_worker():
    assert step_time([9, 64, 16, 32], [[0, 2], [1, 3]]) == 64 + 32
    assert step_time([9, 64, 16, 32], [[1, 2], [3, 0]]) == 64 + 16
    assert step_time([9, 64, 16, 32], [[0, 3], [1], [2]]) == 64 + 32  # an idle worker costs 0


@pytest.mark.parametrize("workers, unsorted, sorted_, per_worker", [
    (2, 96 + 2 * 2.5, 80 + 2 * 2.5, 96 + 2 * 2.5),
    (3, 64 + 32 + 2 * 2.5, 64 + 9 + 2 * 2.5, 64 + 9 + 2 * 2.5),
    (4, 64 + 2.5, 64 + 2.5, 64 + 2.5),
])
def test_simulated_step_times_are_exact(workers, unsorted, sorted_, per_worker):
    cost = CostModel(a=0.5, b=1.0, c=0.25)  # each micro-batch: 0.5 + sum_sq + 0.25 * 8 tokens
    assert cost.of(STEP[0]) == 11.5
    out = simulate([STEP, STEP], workers, cost)
    assert out["unsorted"]["seconds"] == [unsorted] * 2 and out["sorted"]["seconds"] == [sorted_] * 2
    assert out["sorted_per_worker"]["seconds"] == [per_worker] * 2
    assert out["ideal"]["total"] == 2 * (121 + 4 * 2.5) / workers
    assert out["sorted"]["ratio"] == sorted_ / unsorted and out["unsorted"]["ratio"] == 1.0
    assert out["micro_batches"] == [4, 4] and set(ORDERS) <= set(out)


def test_attention_share_cost_model():
    m = CostModel.attention_share(1024, 0.5)
    one_doc = m(1024 ** 2, 1024)
    assert m.b * 1024 ** 2 == pytest.approx(0.5 * one_doc) and m.a == 0 and m.c == 1
    with pytest.raises(ValueError, match="share=1"):
        CostModel.attention_share(1024, 1)


def test_fit_recovers_the_coefficients_and_stays_non_negative():
    sq = np.array([65536, 32768, 4096, 262144, 8192, 1048576, 16384])
    tok = np.array([256, 256, 256, 512, 512, 1024, 1024])
    got = fit_cost_model(sq, tok, 0.002 + 3e-8 * sq + 1e-5 * tok)
    assert (got.a, got.b, got.c) == pytest.approx((0.002, 3e-8, 1e-5), rel=1e-8)
    neg = fit_cost_model(sq, tok, 2e-5 * tok - 1e-3)  # the unconstrained fit's a is negative
    assert min(neg.a, neg.b, neg.c) >= 0 and neg.c > 0


def _model():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                                        use_cache=False, attn_implementation="sdpa")).double()


def test_train_pass_with_sdpa_varlen_gives_the_dense_doc_masked_gradient_in_float64():
    rng = np.random.default_rng(0)
    rows = pack_rows([lm_segment(rng.integers(3, 64, n)) for n in (5, 9, 3, 12, 16, 4)], 16, 0)
    model = _model()
    b = {k: torch.as_tensor(v) for k, v in rows.items()}
    b["weights"] = b["weights"].double()
    clm_step(model, b, bf16=False)[0].backward()  # sdpa: the dense block-diagonal mask
    ref = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    assert tiny_model(max_positions=16).config._attn_implementation == SDPA_VARLEN  # the benchmark's attention
    model.set_attn_implementation(register())
    train_pass(model, rows)  # each document (the padding tails too) alone
    for n, p in model.named_parameters():
        assert torch.allclose(p.grad, ref[n], rtol=1e-12, atol=1e-12), n


def test_realistic_steps_mix_long_chunks_and_packed_short_documents():
    steps = realistic_steps(2, 16, 256, seed=3)
    assert len(steps) == 2 and all(len(s) == 16 for s in steps)
    assert all(m["input_ids"].shape == (1, 256) for s in steps for m in s)
    sq = [sum_sq_lengths(m) for s in steps for m in s]
    assert sum(x == 256 ** 2 for x in sq) >= 8 and sum(x < 256 ** 2 / 4 for x in sq) >= 8
    again = realistic_steps(2, 16, 256, seed=3)
    assert all(np.array_equal(a["input_ids"], b["input_ids"]) for s, t in zip(steps, again) for a, b in zip(s, t))


def test_two_gloo_processes_sleeping_the_modelled_costs_take_the_simulated_step_times():
    """k = 2, one step [64, 16, 64, 16] (sum of squares): unsorted, each round pairs a 64 with a 16 (wall 2 x 0.2 s);
    sorted, the two 64s share a round (0.2 + 0.05 s). Sleeps never end early; the all-reduces add little."""
    big, small = _row(8), _row(2, 2, 2, 2)
    cost = CostModel(b=0.2 / 64)
    out = run_distributed([[big, small, big, small]], 2, "sleep", cost, orders=("unsorted", "sorted"), repeats=2)
    arms = out["arms"]
    assert arms["unsorted"]["predicted_total"] == pytest.approx(0.8) and arms["sorted"]["predicted_total"] == 0.5
    for a in arms.values():
        assert a["predicted_total"] <= a["total"] <= a["predicted_total"] + 0.3
        assert len(a["seconds"]) == 2
    assert arms["sorted"]["ratio"] == pytest.approx(0.625, abs=0.08)


@pytest.mark.slow
def test_the_benchmark_runs_end_to_end_with_real_compute():
    out = run(seq_len=64, n_steps=2, micro_per_step=8, works=("compute",), dist_steps=1, dist_rounds=2,
              dist_repeats=1)
    assert set(out["simulated"]) == {"paper_like", "cpu_fitted"} and set(out["simulated"]["paper_like"]) == {2, 4, 8}
    d = out["distributed"]["compute"]
    assert d["workers"] == 2 and set(d["arms"]) == set(ORDERS) and all(a["total"] > 0 for a in d["arms"].values())
    assert "| simulated paper_like | 8 |" in markdown(out) and "2 processes, compute" in markdown(out)


def test_the_workers_spec_round_trips_without_pickle(tmp_path):
    """Micro-batches go to the workers as .npz arrays (read with allow_pickle=False) and JSON, identical after."""
    from repro.bench.reorder_dist import _read_spec, _write_spec

    cost = CostModel(a=0.5, b=1e-3, c=2e-4)
    path = _write_spec(tmp_path, [STEP, STEP[:2]], world=2, port=1234, work="sleep", cost=vars(cost),
                       orders=["unsorted", "sorted"], repeats=1, warmup=0, seed=3, threads=1, out_path="x.json")
    back = _read_spec(str(path))
    assert back["cost"] == cost and back["orders"] == ("unsorted", "sorted") and back["seed"] == 3
    assert [len(s) for s in back["steps"]] == [4, 2]
    for got, want in zip(back["steps"][0] + back["steps"][1], STEP + STEP[:2]):
        assert set(got) == set(want)
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])
            assert got[k].dtype == np.asarray(want[k]).dtype
