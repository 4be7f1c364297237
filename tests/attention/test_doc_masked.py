"""``sdpa_varlen`` equals transformers' dense document mask (logits and every parameter gradient, float64), never
builds a (T, T) mask, and falls back to exactly sdpa where there is nothing to split."""

import importlib.util
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers import AttentionInterface, AttentionMaskInterface, DynamicCache, LlamaConfig, LlamaForCausalLM

import repro.attention.doc_masked as dm
from repro.attention.doc_masked import (SDPA_VARLEN, boundary_kwargs, check_attn_implementation, doc_mask, register,
                                        use_doc_masked_attention, varlen_plan, varlen_sdpa)
from repro.attention.spans import varlen_kwargs
from repro.models import forward

T = 32
ROWS = ([5, 1, 9, 3, 1, 6], [12, 1, 1, 4, 7], [T], [1, 1, 17, 2, 8])
"""Document lengths per row (uneven, 1-token documents); a shorter row ends in a padding tail, its own document."""


def _model(impl: str = "sdpa", seed: int = 0) -> LlamaForCausalLM:
    register()
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      attn_implementation=impl, use_cache=False)
    return LlamaForCausalLM(cfg).double().eval()


def _batch(rows=ROWS, seed: int = 0) -> dict[str, torch.Tensor]:
    pos, doc = [], []
    for lens in rows:
        lens = list(lens) + ([T - sum(lens)] if sum(lens) < T else [])
        pos.append(torch.cat([torch.arange(n) for n in lens]))
        doc.append(torch.cat([torch.full((n,), d) for d, n in enumerate(lens)]))
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 64, (len(rows), T), generator=g), "position_ids": torch.stack(pos),
            "doc_ids": torch.stack(doc)}


def _logits_and_grads(model, b: dict, **kwargs) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
    model.zero_grad(set_to_none=True)
    logits = forward(model, b["input_ids"], b["position_ids"], b["doc_ids"], **kwargs).logits
    w = torch.randn(logits.shape, generator=torch.Generator().manual_seed(1), dtype=logits.dtype)
    (logits * w).sum().backward()
    return logits.detach(), {n: p.grad.clone() for n, p in model.named_parameters()}


@pytest.mark.parametrize("dense_impl, tol", [("sdpa", 1e-10), ("eager", 1e-6)])
def test_logits_and_parameter_gradients_equal_the_dense_document_mask(dense_impl, tol):
    """Against transformers' block-diagonal mask, to 1e-10 (absolute) with sdpa; eager's softmax runs in float32
    even for float64 weights, hence its tolerance (relative to the largest entry)."""
    b = _batch()
    want, want_g = _logits_and_grads(_model(dense_impl), b)
    got, got_g = _logits_and_grads(_model(SDPA_VARLEN), b)
    def close(a, b):
        return (a - b).abs().max() <= tol * (1 if dense_impl == "sdpa" else b.abs().max())

    assert close(got, want)
    assert want_g.keys() == got_g.keys()
    for n in want_g:
        assert want_g[n].abs().max() > 0 and close(got_g[n], want_g[n]), n
    # the documents matter: plain causal attention over the rows differs
    plain = _model(SDPA_VARLEN)(b["input_ids"], attention_mask=torch.ones_like(b["input_ids"])).logits
    assert (plain[0] - want[0]).abs().max() > 1e-3


def test_explicit_cu_seq_lens_equal_the_position_restarts_and_repeated_kv_heads_equal_enable_gqa(monkeypatch):
    b, m = _batch(seed=2), _model(SDPA_VARLEN)
    by_pos, _ = _logits_and_grads(m, b)
    by_cu, _ = _logits_and_grads(m, b, **varlen_kwargs(b["position_ids"]))
    assert torch.equal(by_pos, by_cu)
    monkeypatch.setattr("transformers.integrations.sdpa_attention.use_gqa_in_sdpa", lambda *a: False)
    repeated, _ = _logits_and_grads(m, b)
    assert (repeated - by_pos).abs().max() <= 1e-10


def test_a_single_document_row_is_plain_causal_attention():
    b = _batch(rows=([T], [T]), seed=3)
    m = _model(SDPA_VARLEN)
    with torch.no_grad():
        got = forward(m, b["input_ids"], b["position_ids"], b["doc_ids"]).logits
        want = _model("sdpa")(b["input_ids"], attention_mask=torch.ones_like(b["input_ids"])).logits
        # the same through the per-document kernel itself (one bucket of two full rows)
        q, k, v = (torch.randn(2, 4, T, 8, dtype=torch.float64) for _ in range(3))
        per_doc = varlen_sdpa(q, k, v, torch.tensor([0, T, 2 * T], dtype=torch.int32))
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2)
    assert (got - want).abs().max() <= 1e-10
    assert (per_doc - causal).abs().max() <= 1e-12


def test_scaling_and_training_dropout_reach_the_kernel():
    q, k, v = (torch.randn(1, 4, T, 8, dtype=torch.float64) for _ in range(3))
    cu = torch.tensor([0, T], dtype=torch.int32)
    torch.manual_seed(5)
    got = varlen_sdpa(q, k, v, cu, dropout=0.3, scaling=0.7)
    torch.manual_seed(5)
    want = F.scaled_dot_product_attention(q, k, v, dropout_p=0.3, is_causal=True, scale=0.7).transpose(1, 2)
    assert torch.equal(got, want)
    assert (got - varlen_sdpa(q, k, v, cu, scaling=0.7)).abs().max() > 1e-3  # the dropout did something


def test_no_dense_mask_is_built_and_no_kernel_call_spans_more_than_one_document(monkeypatch):
    b, model = _batch(seed=4), _model(SDPA_VARLEN)  # built (and registered) before the spies go in
    masks, seen, calls = [], [], []
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, SDPA_VARLEN,
                        lambda **kw: masks.append(doc_mask(**kw)) or masks[-1])
    monkeypatch.setitem(AttentionInterface._global_mapping, SDPA_VARLEN,
                        lambda module, q, k, v, mask, **kw: seen.append(mask) or
                        dm.sdpa_varlen_attention_forward(module, q, k, v, mask, **kw))
    sdpa = F.scaled_dot_product_attention
    monkeypatch.setattr(F, "scaled_dot_product_attention",
                        lambda q, k, v, **kw: calls.append((q.shape[-2], kw.get("attn_mask"))) or sdpa(q, k, v, **kw))
    _logits_and_grads(model, b)
    assert masks == [None] and seen == [None, None]  # one mask for the model, None; None in both layers
    longest = max(max(r) for r in ROWS[:2] + ROWS[3:])
    assert calls and all(mask is None for _, mask in calls)
    assert max(n for n, _ in calls) == T  # the one-document row ...
    assert sorted({n for n, _ in calls})[-2] == longest  # ... else never more than the longest document


def test_where_there_is_nothing_to_split_it_is_exactly_sdpa():
    b = _batch(seed=6)
    ids, pos = b["input_ids"], b["position_ids"]
    varlen, sdpa = _model(SDPA_VARLEN), _model("sdpa")
    jumped = pos.clone()
    jumped[:, T // 2:] += 100  # transformed positions: forward's explicit 4-D float mask
    with torch.no_grad():
        for args in ((ids, pos), (ids, jumped, b["doc_ids"])):  # all-ones 2-D mask (fully causal), 4-D mask
            assert torch.equal(forward(varlen, *args).logits, forward(sdpa, *args).logits)
        ones = torch.ones_like(ids)
        assert torch.equal(varlen(ids, position_ids=pos, attention_mask=ones).logits,
                           sdpa(ids, position_ids=pos, attention_mask=ones).logits)
        padded = ones.clone()
        padded[:, :3] = 0  # left padding: transformers' sdpa mask and kernel
        assert torch.equal(varlen(ids, attention_mask=padded).logits, sdpa(ids, attention_mask=padded).logits)
        outs = []
        for m in (varlen, sdpa):  # a cache: prefill then one decoding step
            cache = DynamicCache(config=m.config)
            m(ids[:1, :-1], past_key_values=cache, use_cache=True)
            outs.append(m(ids[:1, -1:], past_key_values=cache, use_cache=True).logits)
        assert (outs[0] - outs[1]).abs().max() <= 1e-12


def test_registration_switching_and_the_flash_boundary_kwargs():
    assert check_attn_implementation(SDPA_VARLEN) == SDPA_VARLEN
    m = use_doc_masked_attention(_model("sdpa"))
    assert m.config._attn_implementation == SDPA_VARLEN  # no flash-attn GPU here
    pos = _batch()["position_ids"]
    flash = SimpleNamespace(config=SimpleNamespace(_attn_implementation="flash_attention_2"))
    kw = boundary_kwargs(flash, pos)
    assert torch.equal(kw["cu_seq_lens_q"], varlen_kwargs(pos)["cu_seq_lens_q"]) and kw["max_length_q"] == T
    assert boundary_kwargs(m, pos) == {} and boundary_kwargs(_model("sdpa"), pos) == {}


@pytest.mark.skipif(torch.cuda.is_available() and importlib.util.find_spec("flash_attn") is not None,
                    reason="flash-attn present")
def test_flash_attention_is_refused_clearly_without_gpu():
    assert check_attn_implementation("sdpa") == "sdpa"
    with pytest.raises(RuntimeError, match="needs a CUDA GPU and the flash-attn package"):
        check_attn_implementation("flash_attention_2")
    with pytest.raises(ValueError, match="allowed: sdpa, eager, flash_attention_2"):
        check_attn_implementation("xformers")


def test_forward_hands_flash_attention_the_boundaries_of_packed_rows_only():
    class Recorder(torch.nn.Module):
        config = SimpleNamespace(_attn_implementation="flash_attention_2")

        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))
            self.kwargs = {}

        def forward(self, **kw):
            self.kwargs = kw

    rec, b = Recorder(), _batch()
    forward(rec, b["input_ids"], b["position_ids"], b["doc_ids"])
    assert rec.kwargs["attention_mask"] is None
    assert rec.kwargs["cu_seq_lens_q"].tolist() == varlen_kwargs(b["position_ids"])["cu_seq_lens_q"].tolist()
    forward(rec, b["input_ids"], torch.arange(T).expand(len(ROWS), T))  # one document per row: no kwargs
    assert "cu_seq_lens_q" not in rec.kwargs


def test_bad_boundaries_and_settings_name_the_allowed_values():
    q = torch.randn(1, 2, 6, 4)
    with pytest.raises(ValueError, match="ends at 5; allowed: B \\* T = 6"):
        varlen_sdpa(q, q, q, torch.tensor([0, 2, 5]))
    with pytest.raises(ValueError, match="strictly increasing"):
        varlen_plan(torch.tensor([0, 3, 3, 6]))
    with pytest.raises(ValueError, match="fill=1.5; allowed: 0 <= fill <= 1"):
        varlen_plan(torch.tensor([0, 6]), fill=1.5)
    b, m = _batch(), _model(SDPA_VARLEN)
    kw = varlen_kwargs(b["position_ids"])
    with pytest.raises(ValueError, match="cu_seq_lens_k must equal cu_seq_lens_q"):
        m(b["input_ids"], position_ids=b["position_ids"],
          **{**kw, "cu_seq_lens_k": torch.tensor([0, T * len(ROWS)], dtype=torch.int32)})
