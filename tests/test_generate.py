"""Our greedy generator equals HF ``generate`` token for token (left padding, EOS, ragged prompts)."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.generate import greedy_ids


def _model():
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, use_cache=True, bos_token_id=0,
                      eos_token_id=1, pad_token_id=2)
    return LlamaForCausalLM(cfg).eval()


def _batch(lengths, seed=0):
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    ids = torch.full((len(lengths), T), 2)
    mask = torch.zeros(len(lengths), T, dtype=torch.long)
    for i, n in enumerate(lengths):
        ids[i, T - n:] = torch.randint(3, 50, (n,), generator=g)
        mask[i, T - n:] = 1
    return ids, mask


@pytest.mark.parametrize("eos", [None, 1, 7])
def test_equals_hf_generate(eos):
    model = _model()
    ids, mask = _batch([5, 17, 30, 30, 1])
    ref = model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=12, do_sample=False, use_cache=True,
                         pad_token_id=2, eos_token_id=eos)[:, ids.shape[1]:]
    ours = greedy_ids(model, ids, mask, 12, eos, 2)
    assert torch.equal(ours, ref[:, :ours.shape[1]])
    if eos is not None and ours.shape[1] < ref.shape[1]:  # HF stopped later only by padding
        assert (ref[:, ours.shape[1]:] == 2).all()


def test_ended_rows_are_padded_and_generation_stops_when_all_ended():
    model = _model()
    ids, mask = _batch([6, 9])
    free = greedy_ids(model, ids, mask, 10, None, 2)
    eos = int(free[0, 0])  # row 0's first token becomes the EOS
    out = greedy_ids(model, ids, mask, 10, eos, 2)
    assert out[0, 0] == eos and (out[0, 1:] == 2).all()
    if eos not in free[1].tolist():  # row 1 never ends: it runs the full 10 tokens
        assert out.shape[1] == 10 and torch.equal(out[1], free[1])
    single = greedy_ids(model, ids[:1], mask[:1], 10, eos, 2)
    assert single.shape == (1, 1)  # the only row ended at step 1: no further steps


def test_bad_max_new_tokens():
    model = _model()
    ids, mask = _batch([3])
    with pytest.raises(ValueError, match="max_new_tokens=0; allowed: >= 1"):
        greedy_ids(model, ids, mask, 0, None, 2)
