"""Tests for repro.analysis.attention_distance: recorded rows vs the eager kernel, outputs unchanged, the
implementation restored, and the distance histogram on hand-made rows (RoPE-perturbed self-distillation Fig. 2)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from repro.analysis import attention_distance as ad
from repro.models import forward

FAMILIES = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM),
            "qwen3": (Qwen3Config, Qwen3ForCausalLM)}
T, Q = 40, 7
JUMP = torch.cat([torch.arange(20), torch.arange(300, 320)])  # a PoSE-like jump of 280 positions


def _pair(family: str, impl: str, seed: int = 0):
    """(model with ``impl``, eager model with the same weights), float64, GQA (4 query heads, 2 kv heads)."""
    cfg_cls, model_cls = FAMILIES[family]
    kw = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, head_dim=8, max_position_embeddings=4096, use_cache=False)
    torch.manual_seed(seed)
    model = model_cls(cfg_cls(**kw, attn_implementation=impl)).double().eval()
    ref = model_cls(cfg_cls(**kw, attn_implementation="eager")).double().eval()
    ref.load_state_dict(model.state_dict())
    return model, ref


def _ids(batch: int = 2, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, 64, (batch, T), generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("family", list(FAMILIES))
@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_rows_equal_eager_output_attentions_with_a_position_jump(family, impl):
    model, ref = _pair(family, impl)
    ids, pos = _ids(), JUMP[None].expand(2, -1)
    with torch.no_grad():
        want = forward(ref, ids, position_ids=pos, output_attentions=True).attentions
    rows = ad.query_attention(model, ids, Q, position_ids=pos)
    assert sorted(rows) == [0, 1, 2]
    for layer, got in rows.items():
        assert got.shape == (2, 4, Q, T) and got.dtype == torch.float32
        # layer 0 sees the same queries and keys under both kernels; deeper layers inherit the kernels' own
        # float64-vs-float32 softmax difference through the hidden states
        tol = 1e-10 if impl == "eager" or layer == 0 else 1e-6
        torch.testing.assert_close(got, want[layer][:, :, -Q:].float(), atol=tol, rtol=0)
        assert torch.allclose(got.sum(-1), torch.ones(2, 4, Q), atol=1e-6)
        assert got[:, :, 0, T - Q + 1:].abs().max() == 0  # causal: the first kept query sees no later key
    plain = ad.query_attention(model, ids, Q)  # without the jump: the positions really reach the rows
    assert (plain[2] - rows[2]).abs().max() > 1e-3


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_rows_with_a_packed_document_mask_equal_eager(impl):
    # repro.models.forward: transformed positions + doc_ids -> a float 4-D mask; restarting positions -> the model's
    # own packed mask (boolean for sdpa, float for eager): both mask paths of the recorder
    model, ref = _pair("qwen3", impl, seed=3)
    ids = _ids(1, seed=4)
    doc = torch.tensor([[0] * 25 + [1] * 15])
    for pos in (JUMP[None], torch.cat([torch.arange(25), torch.arange(15)])[None]):
        with torch.no_grad():
            want = forward(ref, ids, position_ids=pos, doc_ids=doc, output_attentions=True).attentions
            with ad.recording_query_rows(model, Q) as session:
                forward(model, ids, position_ids=pos, doc_ids=doc)
        for layer in range(3):
            tol = 1e-10 if impl == "eager" or layer == 0 else 1e-6
            torch.testing.assert_close(session.rows[layer], want[layer][:, :, -Q:].float(), atol=tol, rtol=0)
        assert session.rows[0][0, :, :, :25].abs().max() == 0  # the last queries are in document 1


@pytest.mark.parametrize("impl", ["eager", "sdpa"])
def test_outputs_unchanged_and_implementation_restored(impl):
    model, _ = _pair("llama", impl)
    ids, pos = _ids(), JUMP[None].expand(2, -1)
    with torch.no_grad():
        plain = forward(model, ids, position_ids=pos).logits
        with ad.recording_query_rows(model, Q) as session:
            assert model.config._attn_implementation.startswith("query_rows_")
            recorded = forward(model, ids, position_ids=pos).logits
    assert torch.equal(recorded, plain)
    assert len(session.rows) == 3
    assert model.config._attn_implementation == impl and not ad._ACTIVE
    with pytest.raises(RuntimeError, match="boom"):
        with ad.recording_query_rows(model, Q):
            raise RuntimeError("boom")
    assert model.config._attn_implementation == impl and not ad._ACTIVE
    with pytest.raises(ValueError, match=r"queries=41; allowed: 1 <= queries <= 40"):  # raised inside the forward
        with torch.no_grad(), ad.recording_query_rows(model, T + 1):
            forward(model, ids)
    assert model.config._attn_implementation == impl and not ad._ACTIVE
    with torch.no_grad():
        assert torch.equal(forward(model, ids, position_ids=pos).logits, plain)


def test_layers_reduce_and_bad_values():
    model, _ = _pair("llama", "sdpa")
    ids = _ids(1)
    seen = []
    out = ad.query_attention(model, ids, 3, layers=[2, 0], reduce=lambda layer, rows: seen.append((layer, rows.shape)))
    assert out == {} and seen == [(0, (1, 4, 3, T)), (2, (1, 4, 3, T))]
    assert sorted(ad.query_attention(model, ids, 3, layers=[1])) == [1]
    with pytest.raises(ValueError, match=r"layers=\[3\]; allowed: a non-empty set of 0..2"):
        ad.query_attention(model, ids, 3, layers=[3])
    for bad in (0, T + 1):
        with pytest.raises(ValueError, match=rf"queries={bad}; allowed: 1 <= queries <= {T}"):
            ad.query_attention(model, ids, bad)
    with pytest.raises(ValueError, match="allowed: one recording_query_rows at a time"):
        with ad.recording_query_rows(model, 2), ad.recording_query_rows(model, 2):
            pass
    assert model.config._attn_implementation == "sdpa" and not ad._ACTIVE
    model.config._attn_implementation_internal = "flex_attention"  # (a config as if loaded with flex attention)
    with pytest.raises(ValueError, match="'flex_attention'; allowed: eager, sdpa, flash_attention_2"):
        ad.query_attention(model, ids, 2)


# -- histogram -----------------------------------------------------------------------------------
def _hand_rows() -> torch.Tensor:
    """(1 batch, 2 heads, 2 queries, 5 keys): the queries are tokens 3 and 4, so key k lies at distance 3-k / 4-k."""
    return torch.tensor([[[[0.5, 0.0005, 0.2, 0.2995, 0.0],     # head 0, token 3: d = 3, (2), 1, 0
                           [0.1, 0.1, 0.1, 0.1, 0.6]],          # head 0, token 4: d = 4, 3, 2, 1, 0
                          [[0.001, 0.999, 0.0, 0.0, 0.0],       # head 1, token 3: d = 2 (0.001 is not > 1e-3)
                           [0.0, 0.0, 0.0, 0.0, 1.0]]]], dtype=torch.float64)  # head 1, token 4: d = 0


def test_histogram_counts_on_hand_made_rows():
    h = ad.distance_histogram(_hand_rows(), edges=[0, 2, 4, 5], threshold=1e-3, far=0.5)
    # entries > 1e-3 by distance: d=0: 0.2995, 0.6, 1.0 | d=1: 0.2, 0.1 | d=2: 0.1, 0.999 | d=3: 0.5, 0.1 | d=4: 0.1
    # bins [0,2) [2,4) [4,5]: 5 entries, 4 entries, 1 entry
    np.testing.assert_array_equal(h.counts, [5, 4, 1])
    np.testing.assert_allclose(h.mass, [0.2995 + 0.6 + 1.0 + 0.2 + 0.1, 0.1 + 0.999 + 0.5 + 0.1, 0.1])
    assert (h.rows, h.entries, h.length) == (4, 10, 5)
    s = h.summary()
    assert s["mean_distance"] == pytest.approx((0 * 3 + 1 * 2 + 2 * 2 + 3 * 2 + 4) / 10)
    wd = 0.2 + 0.1 + 2 * (0.1 + 0.999) + 3 * (0.5 + 0.1) + 4 * 0.1
    assert s["weighted_mean_distance"] == pytest.approx(wd / 3.9985)
    assert s["far_share"] == pytest.approx(3 / 10)  # distance > 2.5: d = 3, 3, 4
    assert s["far_mass_share"] == pytest.approx(0.7 / 3.9985)
    assert s["entries_per_row"] == pytest.approx(2.5)
    # threshold 0.15 keeps 0.5 (d 3), 0.2 (d 1), 0.2995, 0.6, 1.0 (d 0) and 0.999 (d 2)
    h2 = ad.distance_histogram(_hand_rows(), edges=[0, 2, 4], threshold=0.15)
    np.testing.assert_array_equal(h2.counts, [4, 2])
    assert h2.entries == 6 and h2.far_entries == 1
    # edges that leave distance 4 out: its entry counts in the totals, not in the bins
    h3 = ad.distance_histogram(_hand_rows(), edges=[0, 2, 3.5])
    np.testing.assert_array_equal(h3.counts, [5, 4])
    assert h3.entries == 10 and h3.summary()["far_share"] == pytest.approx(0.3)


def test_histograms_add_up_and_round_trip():
    rows = _hand_rows()
    edges = ad.distance_edges(5, 5)
    np.testing.assert_allclose(edges, [0, 1, 2, 3, 4, 5])
    one = ad.distance_histogram(rows, edges)
    both = one + ad.distance_histogram(torch.cat([rows, rows]), edges) + one
    np.testing.assert_array_equal(both.counts, 4 * one.counts)
    assert both.entries == 4 * one.entries and both.rows == 16
    assert both.summary()["far_share"] == pytest.approx(one.summary()["far_share"])
    back = ad.DistanceHistogram.from_dict(both.to_dict())
    assert back.summary() == both.summary() and np.array_equal(back.counts, both.counts)
    with pytest.raises(ValueError, match="allowed: the same values and edges"):
        one + ad.distance_histogram(rows, edges, threshold=0.01)


@pytest.mark.parametrize("kw, msg", [
    (dict(threshold=0.0), r"threshold=0.0; allowed: 0 < threshold < 1"),
    (dict(threshold=1.0), r"threshold=1.0; allowed: 0 < threshold < 1"),
    (dict(far=1.5), r"far=1.5; allowed: 0 < far < 1"),
    (dict(edges=[0, 3, 3]), r"allowed: >= 2 finite, strictly increasing values"),
    (dict(rows=torch.ones(2, 2, 6, 5)), r"6 queries over 5 keys; allowed: 1 <= queries <= T"),
    (dict(rows=torch.ones(2, 5)), r"allowed: a \(batch, heads, queries, T\) tensor"),
])
def test_histogram_bad_values(kw, msg):
    args = {"rows": _hand_rows(), "edges": [0, 5], **kw}
    with pytest.raises(ValueError, match=msg):
        ad.distance_histogram(args.pop("rows"), **args)
