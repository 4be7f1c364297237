"""The chunked loss equals the plain one: loss and every parameter gradient, float64 and bf16."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.methods.metrics import answer_exact_match, answer_exact_match_hidden
from repro.models import forward, forward_hidden, plain_head_weight


def _model(dtype=torch.float64, tie=True):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=97, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=tie, use_cache=False)
    return LlamaForCausalLM(cfg).to(dtype)


def _batch(B=3, T=40, seed=1):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, 97, (B, T), generator=g)
    w = torch.rand(B, T, generator=g, dtype=torch.float64)
    w[w < 0.3] = 0.0  # zero-weight targets are skipped by the chunked path
    return ids, torch.arange(T).expand(B, T), w


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("chunk", [1, 7, 64, 10_000])
def test_chunked_equals_plain_float64(tie, chunk):
    model = _model(tie=tie)
    ids, pos, w = _batch()
    ref, _ = weighted_clm_loss(forward(model, ids, pos).logits, ids, w)
    g_ref = _grads(model, ref)
    ours = chunked_clm_loss(forward_hidden(model, ids, pos), plain_head_weight(model), ids, w, chunk=chunk)
    g_ours = _grads(model, ours)
    assert abs(float(ours.detach()) - float(ref.detach())) <= 1e-12 * abs(float(ref.detach()))
    assert g_ref.keys() == g_ours.keys()
    for n in g_ref:
        err = (g_ours[n] - g_ref[n]).abs().max() / g_ref[n].abs().max().clamp_min(1e-300)
        assert err < 1e-10, (n, float(err))


def test_chunked_bf16_close_to_plain_under_autocast():
    model = _model(torch.float32)
    ids, pos, w = _batch()
    w = w.float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = forward(model, ids, pos).logits
        hidden = forward_hidden(model, ids, pos)
    ref, _ = weighted_clm_loss(logits, ids, w)
    ours = chunked_clm_loss(hidden, plain_head_weight(model), ids, w, chunk=16, compute_dtype=torch.bfloat16)
    assert abs(float(ours.detach()) - float(ref.detach())) < 2e-3 * float(ref.detach())
    g_ref, g_ours = _grads(model, ref), _grads(model, ours)
    for n in g_ref:
        err = (g_ours[n] - g_ref[n]).norm() / g_ref[n].norm()
        assert err < 3e-2, (n, float(err))


def test_all_zero_weights_give_zero_loss_and_no_nan():
    model = _model()
    ids, pos, w = _batch()
    loss = chunked_clm_loss(forward_hidden(model, ids, pos), plain_head_weight(model), ids, torch.zeros_like(w))
    assert float(loss) == 0.0
    assert all(torch.isfinite(g).all() for g in _grads(model, loss).values())


def test_bad_chunk_is_refused():
    model = _model()
    ids, pos, w = _batch()
    with pytest.raises(ValueError, match=r"chunk=0; allowed: >= 1"):
        chunked_clm_loss(forward_hidden(model, ids, pos), plain_head_weight(model), ids, w, chunk=0)


def test_exact_match_from_hidden_equals_from_logits():
    model = _model()
    ids, pos, _ = _batch(B=4, T=30)
    groups = torch.full_like(ids, -1)
    groups[0, 10:13], groups[1, 5:6], groups[3, 20:29] = 0, 1, 2
    with torch.no_grad():
        logits = forward(model, ids, pos).logits
        # make answer 1 right by construction: its target is the argmax
        ids[1, 5] = logits[1, 4].argmax()
        logits = forward(model, ids, pos).logits
        hidden = forward_hidden(model, ids, pos)
    a = answer_exact_match(logits, ids, groups)
    assert a == answer_exact_match_hidden(hidden, plain_head_weight(model), ids, groups)
    assert a[1] == 3 and a[0] >= 1


def test_plain_head_only_for_known_families():
    model = _model()
    assert plain_head_weight(model) is model.lm_head.weight
    model.config.model_type = "gemma2"
    assert plain_head_weight(model) is None
