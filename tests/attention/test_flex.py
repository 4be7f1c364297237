"""``flex_doc`` (flex attention with a block mask per packed document): every document's logits equal the model run
on that document alone and ``sdpa_varlen``'s (float64), the block mask is the one ``create_block_mask`` finds but
never a (T, T) tensor, training on the CPU is refused clearly (torch has no CPU backward), and the default
implementation is picked per device."""

import pytest
import torch
from torch.nn.attention.flex_attention import BlockMask, create_block_mask, flex_attention
from transformers import AttentionInterface, AttentionMaskInterface, LlamaConfig, LlamaForCausalLM

import repro.attention.doc_masked as dm
import repro.attention.flex as fx
from repro.attention.doc_masked import SDPA_VARLEN, check_attn_implementation, doc_masked_implementation, varlen_sdpa
from repro.attention.flex import FLEX_DOC, block_structure, doc_block_mask, doc_ids, flex_doc
from repro.attention.spans import cu_seqlens, doc_mask, varlen_kwargs
from repro.models import forward

T = 48
ROWS = ([5, 1, 9, 3, 1, 6, 20], [12, 1, 1, 4, 7], [T], [1, 1, 17, 2, 8, 19])
"""Document lengths per row (uneven, 1-token documents); a shorter row ends in a padding tail, its own document."""


def _model(impl: str, seed: int = 0, hidden: int = 32) -> LlamaForCausalLM:
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=64, hidden_size=hidden, intermediate_size=2 * hidden, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      attn_implementation=check_attn_implementation(impl), use_cache=False)
    return LlamaForCausalLM(cfg).double().eval()


def _lengths(rows=ROWS, length: int = T) -> list[list[int]]:
    return [list(r) + ([length - sum(r)] if sum(r) < length else []) for r in rows]


def _batch(rows=ROWS, seed: int = 0, length: int = T) -> dict[str, torch.Tensor]:
    lens = _lengths(rows, length)
    pos = torch.stack([torch.cat([torch.arange(n) for n in r]) for r in lens])
    doc = torch.stack([torch.cat([torch.full((n,), d) for d, n in enumerate(r)]) for r in lens])
    g = torch.Generator().manual_seed(seed)
    return {"input_ids": torch.randint(0, 64, (len(rows), length), generator=g), "position_ids": pos,
            "doc_ids": doc}


def test_every_document_equals_the_model_on_that_document_alone_and_sdpa_varlen():
    b = _batch()
    flex, alone = _model(FLEX_DOC), _model("sdpa")
    with torch.no_grad():
        got = forward(flex, b["input_ids"], b["position_ids"], b["doc_ids"]).logits
        varlen = forward(_model(SDPA_VARLEN), b["input_ids"], b["position_ids"], b["doc_ids"]).logits
        by_cu = flex(b["input_ids"], position_ids=b["position_ids"], **varlen_kwargs(b["position_ids"])).logits
        for r, lens in enumerate(_lengths()):
            start = 0
            for n in lens:
                ids = b["input_ids"][r:r + 1, start:start + n]
                want = alone(ids, attention_mask=torch.ones_like(ids)).logits[0]
                assert (got[r, start:start + n] - want).abs().max() <= 1e-10, (r, start, n)
                start += n
        plain = flex(b["input_ids"], attention_mask=torch.ones_like(b["input_ids"])).logits
    assert (got - varlen).abs().max() <= 1e-10
    assert torch.equal(got, by_cu)  # explicit cu_seq_lens kwargs: the same boundaries
    assert (plain[0] - got[0]).abs().max() > 1e-3  # the documents matter


@pytest.mark.parametrize("length, block", [(300, 128), (512, 32), (64, 16), (48, 128)])
def test_the_block_mask_is_create_block_masks_without_a_dense_mask(length, block, monkeypatch):
    rows = {300: ([100, 60, 140], [7, 250, 43]), 512: ([5, 100, 7, 300, 100], [512], [200, 56, 256]),
            64: ([1, 1, 62], [16, 16, 32]), 48: ROWS}[length]
    cu = cu_seqlens(_batch(rows, length=length)["position_ids"])
    ids = doc_ids(cu, len(rows), length, block)[:, :length]
    want = create_block_mask(lambda b, h, q, k: (ids[b, q] == ids[b, k]) & (q >= k), len(rows), None, length, length,
                             device="cpu", BLOCK_SIZE=block)
    monkeypatch.setattr("torch.nn.attention.flex_attention.create_block_mask", None)  # never called
    monkeypatch.setattr("torch.nn.attention.flex_attention.create_mask", None)
    fx._CACHE.clear()
    got = doc_block_mask(cu, len(rows), length, "cpu", block)
    for name in ("kv_num_blocks", "kv_indices", "full_kv_num_blocks", "full_kv_indices", "q_num_blocks",
                 "q_indices", "full_q_num_blocks", "full_q_indices"):
        assert torch.equal(getattr(got, name), getattr(want, name)), name
    n = -(-length // block)
    assert got.kv_indices.shape == (len(rows), 1, n, n) and got.seq_lengths == (length, length)
    assert doc_block_mask(cu, len(rows), length, "cpu", block) is got  # cached for the same boundaries


def test_long_rows_of_short_documents_skip_most_blocks():
    rows = ([41] * 99,) * 2  # 4096 tokens of 41-token documents (and a tail of 37), none starting a block
    cu = cu_seqlens(_batch(rows, length=4096)["position_ids"])
    partial, full = block_structure(doc_ids(cu, 2, 4096), 4096)
    n = 4096 // 128
    assert partial.shape == (2, n, n) and not full.any()  # no block holds a single document
    assert int(partial.sum()) == 2 * (2 * n - 1)  # the diagonal and the one block before it: 6% of the tiles
    one = doc_block_mask(torch.tensor([0, 4096, 8192], dtype=torch.int32), 2, 4096)
    assert int(one.full_kv_num_blocks.sum()) == 2 * n * (n - 1) // 2  # one document: every block below is full


def test_no_dense_mask_reaches_the_kernel(monkeypatch):
    b, model = _batch(seed=4), _model(FLEX_DOC)
    masks, seen = [], []
    monkeypatch.setitem(AttentionMaskInterface._global_mapping, FLEX_DOC,
                        lambda **kw: masks.append(doc_mask(**kw)) or masks[-1])
    kernel = fx._kernel
    monkeypatch.setattr(fx, "_kernel", lambda q: lambda *a, **kw: seen.append((a, kw)) or kernel(q)(*a, **kw))
    with torch.no_grad():
        forward(model, b["input_ids"], b["position_ids"], b["doc_ids"])
    assert masks == [None] and len(seen) == 2  # no mask for the model; one flex call per layer
    for args, kw in seen:
        assert isinstance(kw["block_mask"], BlockMask) and kw["block_mask"].kv_indices.shape[-1] == 1
        assert kw["enable_gqa"] and all(a.shape[-2:] != (T, T) for a in args)
    assert seen[0][1]["block_mask"] is seen[1][1]["block_mask"]  # built once for both layers


def test_training_on_the_cpu_is_refused_clearly_as_torch_refuses_it():
    q = torch.randn(1, 2, 16, 8, requires_grad=True)
    with pytest.raises(NotImplementedError, match="does not support backward on CPU"):
        flex_attention(q, q, q)  # torch itself: lift the refusal below once this passes
    b, model = _batch(), _model(FLEX_DOC).train()
    with pytest.raises(NotImplementedError, match=r"cannot train on the CPU.*allowed: flex_doc for forward passes "
                                                  r"only there \(torch.no_grad\), or train with sdpa_varlen"):
        forward(model, b["input_ids"], b["position_ids"], b["doc_ids"])
    single = _batch(rows=([T], [T]))  # one document per row: plain causal sdpa, which trains
    loss = forward(model, single["input_ids"], single["position_ids"], single["doc_ids"]).logits.sum()
    loss.backward()
    assert all(p.grad is not None for p in model.parameters())


def test_compiled_float32_kernel_uses_the_blocks_and_matches_sdpa_varlen():
    """float32 goes through ``torch.compile(flex_attention)``, the kernel that skips blocks (float64 on the CPU is
    torch's unfused reference)."""
    lens = _lengths(([100, 60, 7, 1, 40], [256], [3, 250]), 256)
    cu = cu_seqlens(torch.stack([torch.cat([torch.arange(n) for n in r]) for r in lens]))
    g = torch.Generator().manual_seed(0)
    q = torch.randn(3, 4, 256, 16, generator=g)
    k, v = (torch.randn(3, 2, 256, 16, generator=g) for _ in range(2))
    with torch.no_grad():
        got = flex_doc(q, k, v, cu, scaling=0.3, block_size=64)
    want = varlen_sdpa(q.double(), k.double(), v.double(), cu, scaling=0.3, enable_gqa=True)
    assert got.shape == (3, 256, 4, 16) and got.is_contiguous()
    assert (got.double() - want).abs().max() <= 1e-5


def test_the_default_is_picked_per_device(monkeypatch):
    assert doc_masked_implementation("cpu") == SDPA_VARLEN
    assert doc_masked_implementation(torch.device("cpu")) == SDPA_VARLEN
    if not torch.cuda.is_available():
        assert doc_masked_implementation() == SDPA_VARLEN
    monkeypatch.setattr(dm, "flash_attn_available", lambda: False)
    monkeypatch.setattr(dm, "flex_compiles", lambda device="cpu": True)
    assert doc_masked_implementation("cuda") == FLEX_DOC and FLEX_DOC in AttentionInterface._global_mapping
    monkeypatch.setattr(dm, "flex_compiles", lambda device="cpu": False)
    assert doc_masked_implementation("cuda:0") == SDPA_VARLEN
    monkeypatch.setattr(dm, "flash_attn_available", lambda: True)
    assert doc_masked_implementation("cuda") == "flash_attention_2"
    assert doc_masked_implementation("cpu") == SDPA_VARLEN


def test_without_flex_attention_the_error_names_the_alternatives(monkeypatch):
    monkeypatch.setattr(fx, "flex_available", lambda: False)
    with pytest.raises(RuntimeError, match=r"flex_doc' needs torch.nn.attention.flex_attention .*allowed here: "
                                           r"sdpa_varlen, sdpa, eager"):
        check_attn_implementation(FLEX_DOC)


def test_bad_settings_name_the_allowed_values():
    q = torch.randn(1, 4, 8, 4)
    with pytest.raises(ValueError, match="allowed: 0 to B \\* T = 8"):
        flex_doc(q, q, q, torch.tensor([0, 3, 7]))
    with pytest.raises(ValueError, match="4 query heads and 3 key/value heads; allowed: a multiple"):
        flex_doc(q, q[:, :3], q[:, :3], torch.tensor([0, 8]))
    b = _batch()
    model = _model(FLEX_DOC)
    model.model.layers[0].self_attn.attention_dropout = 0.1
    model.train()
    with pytest.raises(ValueError, match="no attention dropout .*allowed: attention_dropout=0, or sdpa_varlen"):
        forward(model, b["input_ids"], b["position_ids"], b["doc_ids"])
    with pytest.raises(ValueError, match="cu_seq_lens_k must equal cu_seq_lens_q"):
        kw = {**varlen_kwargs(b["position_ids"]), "cu_seq_lens_k": torch.tensor([0, T * len(ROWS)], dtype=torch.int32)}
        with torch.no_grad():
            model.eval()(b["input_ids"], position_ids=b["position_ids"], **kw)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_a_bf16_training_step_on_cuda_matches_sdpa_varlen():
    b = {k: v.cuda() for k, v in _batch(length=T).items()}
    out = {}
    for impl in (FLEX_DOC, SDPA_VARLEN):
        model = _model(impl, hidden=256).to("cuda", torch.bfloat16).train()  # head_dim 64
        logits = forward(model, b["input_ids"], b["position_ids"], b["doc_ids"]).logits
        logits.float().logsumexp(-1).mean().backward()
        grads = torch.cat([p.grad.float().flatten() for p in model.parameters()])
        assert torch.isfinite(grads).all() and grads.abs().max() > 0
        out[impl] = (logits.detach().float(), grads)
    assert (out[FLEX_DOC][0] - out[SDPA_VARLEN][0]).abs().max() <= 5e-2
    assert torch.nn.functional.cosine_similarity(out[FLEX_DOC][1], out[SDPA_VARLEN][1], dim=0) > 0.99
