"""The packed-suffix attention of the prefix-shared pass: its layout, and each segment's output against dense
attention with the explicit mask (float64). The whole pass against two full passes: test_selfdistill.py."""

import pytest
import torch
import torch.nn.functional as F

from repro.attention.suffix import SUFFIX, register, suffix_attention_forward, suffix_layout
from repro.attention.switch import attention_implementation


def test_layout_of_plain_and_packed_rows():
    lay = suffix_layout(torch.tensor([3, 0, 5]), 6)
    assert (lay.prefix_tokens, lay.suffix_tokens) == (8, 10)
    assert [(s.q_start, s.q_stop) for s in lay.segments] == [(0, 3), (3, 9), (9, 10)]
    # row 0: prefix keys 0..2 (packed 0..2), suffix keys 8..10; row 1: no prefix; row 2: prefix 3..7, suffix 17
    assert lay.segments[0].keys.tolist() == [0, 1, 2, 8, 9, 10]
    assert lay.segments[1].keys.tolist() == [11, 12, 13, 14, 15, 16]
    assert lay.segments[2].keys.tolist() == [3, 4, 5, 6, 7, 17]
    docs = torch.tensor([[0, 0, 1, 1, 1, 2], [0, 0, 0, 1, 1, 1]])
    lay = suffix_layout(torch.tensor([3, 4]), 6, docs)
    # row 0, split 3: document 1 (2..4) reaches into the suffix from key 2, document 2 (5) lies in it; row 1,
    # split 4: document 0 ends before the suffix, document 1 (3..5) has one prefix key
    assert [(s.q_start, s.q_stop, s.keys.tolist()) for s in lay.segments] == [
        (0, 2, [2, 7, 8]), (2, 3, [9]), (3, 5, [3 + 3, 10, 11])]
    with pytest.raises(ValueError, match="0 <= split < T = 6"):
        suffix_layout(torch.tensor([6]), 6)


@pytest.mark.parametrize("chunk", [256, 3])
def test_segments_equal_dense_attention_with_the_mask(chunk, monkeypatch):
    """Every query of the packed suffixes sees exactly its row's keys up to itself (and its own document's), in one
    piece per segment or in query chunks (the CPU path)."""
    import repro.attention.suffix as sx

    monkeypatch.setattr(sx, "CPU_CHUNK", chunk)
    torch.manual_seed(0)
    T, H, D = 10, 2, 4
    split = torch.tensor([4, 0, 7])
    docs = torch.tensor([[0] * 6 + [1] * 4, [0] * 10, [0] * 3 + [1] * 7])
    lay = suffix_layout(split, T, docs)
    P, N = lay.prefix_tokens, lay.suffix_tokens
    q = torch.randn(1, H, N, D, dtype=torch.float64)
    k = torch.randn(1, H, P + N, D, dtype=torch.float64)
    v = torch.randn(1, H, P + N, D, dtype=torch.float64)
    out, _ = suffix_attention_forward(torch.nn.Module(), q, k, v, None, suffix_layout=lay)
    # the same by a dense mask over [prefixes | suffixes]: row b, position t sees row b's j <= t in its document
    row_of, pos_of = [], []
    for b, s in enumerate(split.tolist()):
        row_of += [b] * s
        pos_of += list(range(s))
    for b, s in enumerate(split.tolist()):
        row_of += [b] * (T - s)
        pos_of += list(range(s, T))
    row_of, pos_of = torch.tensor(row_of), torch.tensor(pos_of)
    qr, qp = row_of[P:], pos_of[P:]
    mask = (qr[:, None] == row_of[None]) & (pos_of[None] <= qp[:, None]) & \
        (docs[qr, qp][:, None] == docs[row_of, pos_of][None])
    want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
    assert out.shape == (1, N, H, D) and torch.allclose(out, want, atol=1e-12)


def test_without_a_layout_it_is_sdpa_and_the_switch_is_undone():
    from transformers import LlamaConfig, LlamaForCausalLM

    model = LlamaForCausalLM(LlamaConfig(vocab_size=32, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                         num_attention_heads=2, num_key_value_heads=2, attn_implementation="sdpa"))
    register()
    with attention_implementation(model, SUFFIX):
        assert model.config._attn_implementation == SUFFIX
        ids = torch.randint(0, 32, (2, 8))
        a = model(ids).logits  # no layout: plain sdpa, causal
    assert model.config._attn_implementation == "sdpa"
    assert torch.allclose(a, model(ids).logits, atol=1e-6)
