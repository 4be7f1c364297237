"""PL-Tab15's benchmark: every arm timed on the same tokens in one run, the document-masked arms agree on the loss,
the full arm sees one document per row."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.bench.doc_attention import (DOC_ATTENTION_ARMS, DocAttentionConfig, markdown, measure_doc_attention,
                                       packed_rows)


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
    assert list(out) == [64, 128]
    for length, arms in out.items():
        assert list(arms) == list(DOC_ATTENTION_ARMS)
        for r in arms.values():
            assert r["batch"] == [256 // length, length] and len(r["seconds"]) == 2 and r["tokens_per_s"] > 0
            assert r["docs_per_row"] > length / 30
        assert arms["full"]["ratio"] == 1.0
        assert abs(arms["doc_varlen"]["loss"] - arms["doc_dense"]["loss"]) < 1e-5
        assert abs(arms["full"]["loss"] - arms["doc_dense"]["loss"]) > 1e-4  # the documents matter
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    table = markdown(out)
    assert table.count("\n") == 2 + 2 * len(DOC_ATTENTION_ARMS) - 1 and "| doc_varlen |" in table


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
