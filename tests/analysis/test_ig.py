"""CDT's IG / FR scores (memory linear) against the direct Eq. 1, their per-type means, and the chunked maps."""

import math
import warnings

import numpy as np
import pytest
import torch

from repro.analysis.attention_map import chunk_bounds, chunked_attention_map
from repro.analysis.capture import CAPTURE
from repro.analysis.ig import TYPES, TokenScores, naive_token_scores, token_scores, topk_hits

FIELDS = ("ig", "attention", "fr", "grad_l2", "grad_l1")
EAGER64 = "test_eager_float64"


def _sharpen(model, factor=8.0):
    """Larger q/k weights: peaked attention rows (the init's rows are nearly uniform, top-k would be near ties)."""
    with torch.no_grad():
        for layer in model.model.layers:
            layer.self_attn.q_proj.weight.mul_(factor)
            layer.self_attn.k_proj.weight.mul_(factor)
    return model


@pytest.fixture
def llama64(tiny_llama):
    return _sharpen(tiny_llama("sdpa").double())


@pytest.fixture
def qwen64():
    from transformers import Qwen2Config, Qwen2ForCausalLM

    torch.manual_seed(1)
    cfg = Qwen2Config(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=1024, use_cache=False, attn_implementation="sdpa")
    return _sharpen(Qwen2ForCausalLM(cfg).eval().double())


@pytest.fixture
def mistral_window64():
    """Mistral with a sliding window shorter than the input: transformers builds a 4-D mask for sdpa."""
    from transformers import MistralConfig, MistralForCausalLM

    torch.manual_seed(2)
    cfg = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                        num_key_value_heads=2, max_position_embeddings=1024, sliding_window=16, use_cache=False,
                        attn_implementation="sdpa")
    return _sharpen(MistralForCausalLM(cfg).eval().double())


def _ids(t=48, vocab=64, seed=0):
    return torch.randint(0, vocab, (1, t), generator=torch.Generator().manual_seed(seed))


def _rel(a, b):
    return float(np.max(np.abs(np.asarray(a) - np.asarray(b))) / max(np.max(np.abs(b)), 1e-300))


def _assert_close(ours, ref, tol):
    for f in FIELDS:
        assert _rel(getattr(ours, f), getattr(ref, f)) <= tol, f
    assert math.isclose(ours.loss, ref.loss, rel_tol=tol)


@pytest.mark.parametrize("family", ["llama64", "qwen64", "mistral_window64"])
def test_memory_linear_scores_equal_the_naive_eager_eq1(family, request):
    model = request.getfixturevalue(family)
    ids, pos = _ids(), list(range(40, 48))
    ours = token_scores(model, ids, pos, top_k=4)
    ref = naive_token_scores(model, ids, pos, top_k=4)
    assert ours.ig.shape == ours.attention.shape == ours.fr.shape == (2, 4, 48)
    _assert_close(ours, ref, 1e-5)  # eager's softmax runs in float32 even for a float64 model: ~1e-7 here
    np.testing.assert_array_equal(ours.fr, ref.fr)
    assert np.allclose(ours.attention.sum(-1), len(pos))  # each answer row sums to 1
    if family == "mistral_window64":  # the sliding window (16) is applied: row 39 sees keys 24..39 only
        assert ours.attention[..., :40 - 16].sum() == 0 and ours.attention[..., 24].sum() > 0
    assert model.config._attn_implementation == "sdpa"


def _eager64(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Eager attention with the softmax in the model's dtype (float64 here), for a tight comparison."""
    rep = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    w = query @ k.transpose(-1, -2) * scaling + attention_mask
    w = torch.softmax(w, dim=-1)
    return (w @ v).transpose(1, 2).contiguous(), w


def test_scores_equal_an_all_float64_eq1_to_1e10(llama64):
    from transformers import AttentionInterface, AttentionMaskInterface
    from transformers.masking_utils import eager_mask

    AttentionInterface.register(EAGER64, _eager64)
    AttentionMaskInterface.register(EAGER64, eager_mask)
    ids, pos = _ids(seed=3), [20, 30, 46, 47]
    ours = token_scores(llama64, ids, pos, top_k=3)
    ref = naive_token_scores(llama64, ids, pos, top_k=3, attn_implementation=EAGER64)
    _assert_close(ours, ref, 1e-10)
    assert llama64.config._attn_implementation == "sdpa"


def test_topk_hits_on_hand_built_rows():
    rows = torch.tensor([[0.1, 0.4, 0.0, 0.3, 0.2],
                         [0.5, 0.0, 0.0, 0.0, 0.5 - 1e-9]])
    np.testing.assert_allclose(topk_hits(rows, 2).numpy(), [0.5, 0.5, 0.0, 0.5, 0.5])
    # k above the number of non-zero keys: masked (zero) keys never count
    np.testing.assert_allclose(topk_hits(rows[1:], 4).numpy(), [1.0, 0.0, 0.0, 0.0, 1.0])
    np.testing.assert_allclose(topk_hits(rows, 9).numpy(), [1.0, 0.5, 0.0, 0.5, 1.0])
    with pytest.raises(ValueError, match="top_k=0"):
        topk_hits(rows, 0)


def _hand_scores():
    ig = np.zeros((2, 2, 6))
    ig[0, 0] = [0, 4, 2, 1, 3, 9]
    ig[0, 1] = [0, 2, 2, 1, 1, 9]
    ig[1] = 1.0
    att = np.zeros((2, 2, 6))
    att[1, 1, [1, 2]] = 5.0  # the head most on critical tokens: (layer 1, head 1)
    att[0, 0, 3] = 1.0
    fr = np.full((2, 2, 6), 0.25)
    fr[1, 1] = [0, 1, 0.5, 0, 0, 0]
    g = np.array([0.0, 2.0, 4.0, 1.0, 3.0, 7.0])
    return TokenScores(ig=ig, attention=att, fr=fr, grad_l2=g, grad_l1=2 * g, loss=1.0, answer_positions=(5,),
                       top_k=2)


LABELS = ["prompt", "supporting", "interference", "irrelevant", "irrelevant", "prompt"]


def test_per_type_means_on_hand_built_values():
    s = _hand_scores()
    ig = s.ig_by_type(LABELS)
    assert ig["supporting"] == pytest.approx((4 + 2 + 1 + 1) / 4)
    assert ig["interference"] == pytest.approx((2 + 2 + 1 + 1) / 4)
    assert ig["irrelevant"] == pytest.approx(((1 + 3) / 2 + (1 + 1) / 2 + 1 + 1) / 4)
    assert math.isnan(ig["low_frequency"])  # no such token; "prompt" tokens are left out
    per_layer = s.ig_by_type(LABELS, per_layer=True)
    np.testing.assert_allclose(per_layer["supporting"], [3.0, 1.0])
    shares = s.ig_by_type(LABELS, normalized=True)
    assert sum(v for v in shares.values() if not math.isnan(v)) == pytest.approx(1.0)
    assert shares["supporting"] == pytest.approx(2.0 / (2.0 + 1.5 + 1.25))
    np.testing.assert_allclose(np.nansum([v for v in s.ig_by_type(LABELS, True, True).values()], 0), [1, 1])
    assert s.grad_by_type(LABELS) == {"supporting": 2.0, "interference": 4.0, "irrelevant": 2.0,
                                      "low_frequency": pytest.approx(float("nan"), nan_ok=True)}
    assert s.grad_by_type(LABELS, norm="l1")["irrelevant"] == 4.0
    assert s.attention_by_type(LABELS)["supporting"] == pytest.approx(5.0 / 4)
    with pytest.raises(ValueError, match="norm='l3'"):
        s.grad_by_type(LABELS, norm="l3")
    with pytest.raises(ValueError, match="5 type labels for 6 tokens"):
        s.ig_by_type(LABELS[:5])


def test_fr_over_all_heads_and_the_top_heads():
    s = _hand_scores()
    assert s.fr_by_type(LABELS)["supporting"] == pytest.approx((3 * 0.25 + 1.0) / 4)
    assert s.top_heads(LABELS, 2) == [(1, 1), (0, 0)]
    top1 = s.fr_by_type(LABELS, top_heads=1)
    assert (top1["supporting"], top1["interference"], top1["irrelevant"]) == (1.0, 0.5, 0.0)
    with pytest.warns(UserWarning, match="the model has 4"):
        everything = s.fr_by_type(LABELS, top_heads=30)
    assert everything["supporting"] == pytest.approx(s.fr_by_type(LABELS)["supporting"])
    with pytest.raises(ValueError, match="top_heads and per_layer"):
        s.fr_by_type(LABELS, top_heads=2, per_layer=True)
    with pytest.raises(ValueError, match="no supporting or interference"):
        s.top_heads(["irrelevant"] * 6)


def test_parameters_untouched_and_implementation_restored(llama64):
    llama64.lm_head.weight.requires_grad_(False)  # tied with the embeddings: both flags are the same tensor's
    flags = [p.requires_grad for p in llama64.parameters()]
    s = token_scores(llama64, _ids(), [47], return_embedding_grad=True)
    assert all(p.grad is None for p in llama64.parameters())
    assert [p.requires_grad for p in llama64.parameters()] == flags
    assert llama64.config._attn_implementation == "sdpa"
    assert s.embedding_grad.shape == (48, 32)
    np.testing.assert_allclose(s.embedding_grad.norm(dim=-1).numpy(), s.grad_l2)
    assert s.grad_l2[47] == 0.0 and s.grad_l2[46] > 0  # the last token's embedding cannot reach the loss


def test_restored_after_an_error(tiny_llama):
    model = tiny_llama("sdpa")
    model.config.attention_dropout = 0.1
    for layer in model.model.layers:
        layer.self_attn.attention_dropout = 0.1
    model.train()
    with pytest.raises(ValueError, match=r"attention dropout 0.1 in training mode; allowed: 0 \(call model.eval"):
        token_scores(model, _ids(), [47])
    assert model.config._attn_implementation == "sdpa"
    assert all(p.requires_grad and p.grad is None for p in model.parameters())


def test_clear_errors(tiny_llama):
    model = tiny_llama("sdpa")
    with pytest.raises(ValueError, match=r"allowed: \(T,\) or \(1, T\): batch size 1 only"):
        token_scores(model, torch.zeros(2, 8, dtype=torch.long), [5])
    with pytest.raises(ValueError, match=r"answer positions \[8\] out of range; allowed: 1..7"):
        token_scores(model, _ids(8), [3, 8])
    with pytest.raises(ValueError, match=r"answer positions \[0\] out of range"):
        token_scores(model, _ids(8), [0])
    with pytest.raises(ValueError, match="exactly one of"):
        token_scores(model, _ids(8), [3], answer_mask=torch.ones(8, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"answer_mask of shape \(7,\)"):
        token_scores(model, _ids(8), answer_mask=torch.ones(7, dtype=torch.bool))
    with pytest.raises(ValueError, match="top_k=0"):
        token_scores(model, _ids(8), [3], top_k=0)
    with pytest.raises(ValueError, match="inputs_embeds of shape"):
        token_scores(model, _ids(8), [3], inputs_embeds=torch.zeros(1, 7, 32))
    assert model.config._attn_implementation == "sdpa"


def test_positions_mask_and_labels_agree_and_embeddings_can_be_given(llama64):
    ids = _ids()
    a = token_scores(llama64, ids, [44, 46, 45])
    mask = torch.zeros(48, dtype=torch.bool)
    mask[44:47] = True
    labels = torch.full((1, 48), -100)
    labels[0, 44:47] = ids[0, 44:47]
    b = token_scores(llama64, ids, answer_mask=mask)
    c = token_scores(llama64, ids, labels=labels)
    emb = llama64.get_input_embeddings()(ids).detach()
    d = token_scores(llama64, ids, [44, 45, 46], inputs_embeds=emb[0])
    for other in (b, c, d):
        _assert_close(a, other, 1e-12)
    assert a.answer_positions == (44, 45, 46)
    e = token_scores(llama64, ids, [44, 45, 46], inputs_embeds=0.5 * emb)  # e.g. denoised embeddings E'
    assert _rel(e.ig, a.ig) > 1e-3


def test_a_saved_model_loaded_by_path(tmp_path, tiny_llama):
    from repro.models import load_model

    model = tiny_llama("sdpa")
    model.save_pretrained(tmp_path / "m")
    loaded = load_model(tmp_path / "m").eval()
    ids = _ids()
    _assert_close(token_scores(loaded, ids, [46, 47]), token_scores(model, ids, [46, 47]), 1e-6)
    assert loaded.config._attn_implementation == "sdpa"


def test_capture_leaves_the_model_outputs_unchanged(llama64):
    from repro.analysis.capture import capturing_attention

    ids = _ids()
    with torch.no_grad():
        ref = llama64(input_ids=ids).logits
        with capturing_attention(llama64, lambda call: None):
            assert llama64.config._attn_implementation == CAPTURE
            got = llama64(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
    assert torch.allclose(got, ref, rtol=0, atol=1e-12)
    assert llama64.config._attn_implementation == "sdpa"


# -- chunked attention maps ------------------------------------------------------------------------------
def test_chunk_bounds():
    assert chunk_bounds(10, 3).tolist() == [0, 3, 6, 10]
    assert chunk_bounds(46, 46).tolist() == list(range(47))
    with pytest.raises(ValueError, match=r"n_chunks=11; allowed: an integer in 1..10"):
        chunk_bounds(10, 11)


@pytest.mark.parametrize("family", ["llama64", "qwen64", "mistral_window64"])
def test_chunked_map_equals_the_eager_attention(family, request):
    model = request.getfixturevalue(family)
    ids, n = _ids(37), 5
    got = chunked_attention_map(model, ids, n_chunks=n, block=8, per_head=True)
    assert model.config._attn_implementation == "sdpa"
    model.set_attn_implementation("eager")
    with torch.no_grad():
        att = model(input_ids=ids, output_attentions=True).attentions
    model.set_attn_implementation("sdpa")
    b = chunk_bounds(37, n)
    ref = np.zeros((2, 4, n, n))
    for li, a in enumerate(att):
        for qa in range(n):
            for kb in range(n):
                ref[li, :, qa, kb] = a[0, :, b[qa]:b[qa + 1], b[kb]:b[kb + 1]].sum((-1, -2)).numpy() / (
                    b[qa + 1] - b[qa])
    assert _rel(got, ref) < 1e-6
    np.testing.assert_allclose(got.sum(-1), 1.0)
    assert np.all(np.triu(got, 1) == 0)  # causal: no attention to later chunks
    layer1 = chunked_attention_map(model, ids, n_chunks=n, layers=[1], block=64)
    np.testing.assert_allclose(layer1[0], got[1].mean(0), atol=1e-12)
    with pytest.raises(ValueError, match=r"layers=\[2\]; allowed: a non-empty subset of 0..1"):
        chunked_attention_map(model, ids, n_chunks=n, layers=[2])


def test_type_names_match_the_multihop_task():
    from repro.tasks.multihop import TOKEN_TYPES

    assert set(TYPES) <= set(TOKEN_TYPES)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _hand_scores().fr_by_type(LABELS, top_heads=4)  # no warning when n fits
