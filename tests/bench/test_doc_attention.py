"""PL-Tab15's benchmark: every arm timed on the same tokens in one run, the document-masked arms agree on the loss,
the full arm sees one document per row."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.bench.doc_attention import (DOC_ATTENTION_ARMS, DocAttentionConfig, available_arms, markdown,
                                       measure_doc_attention, measure_rows, packed_rows)


def _model():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                                        use_cache=False))


def test_every_arm_timed_on_the_same_rows_and_the_masked_arms_agree():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    cfg = DocAttentionConfig(lengths=(64, 128), tokens_per_step=256, doc_lengths=(5, 30), steps=2, warmup=0)
    out = measure_doc_attention(model, cfg, progress=False)
    arms_here = available_arms("cpu")
    assert arms_here == ("full", "doc_dense", "doc_varlen", "doc_flex")  # no flash-attn on the CPU
    assert list(out) == [64, 128]
    for length, arms in out.items():
        assert list(arms) == list(arms_here)
        for r in arms.values():
            assert r["batch"] == [256 // length, length] and len(r["forward_seconds"]) == 2
            assert r["forward_tokens_per_s"] > 0 and r["docs_per_row"] > length / 30
        for arm in ("full", "doc_dense", "doc_varlen"):
            assert arms[arm]["trains"] and len(arms[arm]["seconds"]) == 2 and arms[arm]["tokens_per_s"] > 0
            assert abs(arms[arm]["loss"] - arms[arm]["forward_loss"]) < 1e-6
        assert arms["full"]["ratio"] == 1.0 and arms["full"]["forward_ratio"] == 1.0
        assert abs(arms["doc_varlen"]["loss"] - arms["doc_dense"]["loss"]) < 1e-5
        assert abs(arms["full"]["loss"] - arms["doc_dense"]["loss"]) > 1e-4  # the documents matter
        flex = arms["doc_flex"]  # flex attention has no CPU backward: its forward is timed beside the others'
        assert not flex["trains"] and flex["tokens_per_s"] is None and flex["ratio"] is None
        assert "cannot train on the CPU" in flex["refused"]
        assert abs(flex["forward_loss"] - arms["doc_varlen"]["forward_loss"]) < 1e-5
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    table = markdown(out)
    assert table.count("\n") == 2 + 2 * len(arms_here) - 1 and "| doc_varlen |" in table
    assert "| doc_flex | no backward | - | - |" in table


def test_packed_rows_and_bad_settings_name_the_allowed_values():
    rows = packed_rows(100, 3, (10, 40), 64, np.random.default_rng(0))
    assert rows["input_ids"].shape == (3, 100) and (rows["position_ids"][:, 0] == 0).all()
    lens = [int(n) for n in torch.diff(torch.nonzero(rows["position_ids"][0] == 0).flatten(), append=torch.tensor(
        [100]))]
    assert all(10 <= n <= 40 for n in lens[:-1])  # the last one may be the padding tail
    with pytest.raises(ValueError, match=r"doc_lengths=\(50, 400\); allowed: 1 <= min <= max <= length=100"):
        packed_rows(100, 1, (50, 400), 64, np.random.default_rng(0))
    with pytest.raises(ValueError, match="steps=0"):
        measure_doc_attention(_model(), DocAttentionConfig(steps=0), progress=False)
    with pytest.raises(ValueError, match="arms=\\('doc_varlen',\\); allowed: 'full' and any of full, doc_dense"):
        measure_rows(_model(), rows, arms=("doc_varlen",))
    assert set(DOC_ATTENTION_ARMS) >= set(available_arms("cpu"))


def test_arms_that_cannot_run_here_are_left_out(monkeypatch):
    monkeypatch.setattr("repro.attention.flex.flex_compiles", lambda device="cpu": False)  # e.g. no C++ compiler
    assert available_arms("cpu") == ("full", "doc_dense", "doc_varlen")
    monkeypatch.setattr("repro.accel.flash_attn_available", lambda: True)
    assert "doc_flash" in available_arms("cuda") and "doc_flash" not in available_arms("cpu")
