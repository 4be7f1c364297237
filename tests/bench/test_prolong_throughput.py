"""PL-Tab15's benchmark on a toy model and hand-packed rows: the attention arms on the same rows (flex attention's
forward only on the CPU), the document-masked arms agree on the loss, the simulated reordering never loses to
unsorted, and the record keeps what the report's intervals need (per-round seconds, per-step simulated times, the
ratio under each timed round's cost fit)."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.bench.doc_attention import packed_rows
from repro.bench.prolong_throughput import measure_pl_throughput


def test_measures_the_arms_and_simulates_the_workers():
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                                         use_cache=False))
    rng = np.random.default_rng(0)
    batches = [{k: v.numpy() for k, v in packed_rows(128, 4, (5, 60), 64, rng).items()} for _ in range(4)]
    out = measure_pl_throughput(model, batches, rounds=1, workers=(2, 4), group=2, fit=False, progress=False)
    s = out["single"]
    assert set(s) == {"full", "doc_dense", "doc_varlen", "doc_flex"} and s["full"]["ratio"] == 1.0
    assert abs(s["doc_varlen"]["loss"] - s["doc_dense"]["loss"]) < 1e-5
    assert s["doc_flex"]["tokens_per_s"] is None and s["doc_flex"]["forward_tokens_per_s"] > 0  # no CPU backward
    assert out["rows"] == [4, 128] and out["micro_batches_per_step"] == 8
    for k in (2, 4):
        sim = out["simulated"][k]
        assert sim["sorted"]["ratio"] <= 1.0 + 1e-12
        assert sim["ideal"]["ratio"] <= sim["sorted"]["ratio"] + 1e-12
        assert len(sim["unsorted"]["seconds"]) == len(sim["sorted_per_worker"]["seconds"]) == 2  # per step
        assert sim["sorted_per_worker"]["ratio"] == pytest.approx(sum(sim["sorted_per_worker"]["seconds"]) /
                                                                  sum(sim["unsorted"]["seconds"]))
        assert sim["sorted"]["round_ratios"] == []  # no fit, no per-round fits
    assert len(s["full"]["seconds"]) == 1  # one interleaved round

    fitted = measure_pl_throughput(model, batches[:2], rounds=1, workers=(2,), group=1, progress=False)
    assert len(fitted["fit"]["rounds"]) == 3 and set(fitted["fit"]["rounds"][0]) == {"a", "b", "c"}
    assert len(fitted["simulated"][2]["sorted_per_worker"]["round_ratios"]) == 3  # one ratio per timed round
    with pytest.raises(ValueError, match="allowed: at least one batch"):
        measure_pl_throughput(model, [], progress=False)
