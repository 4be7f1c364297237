"""The masking policy of repro.models.forward and the transformers 5.23 traps it avoids."""

import math

import numpy as np
import pytest
import torch

from repro.data.packing import lm_segment, pack_rows
from transformers import AutoConfig

from repro.models import build_tiny, causal_doc_mask, forward, load_model, n_params, rope_parameters, scaled_rope
from repro.profiles import ModelConfig


def _ids(n, vocab=64, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (1, n), generator=g)


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_trap1_jump_without_mask_is_block_diagonal(tiny_llama, impl):
    """Trap 1: attention_mask=None + use_cache=False reads a position jump as a new document."""
    m = tiny_llama(impl)
    ids = _ids(16)
    pos = torch.cat([torch.arange(8), torch.arange(8) + 40])[None]
    with torch.no_grad():
        trap = m(ids, position_ids=pos, attention_mask=None, use_cache=False).logits
        alone = m(ids[:, 8:], position_ids=pos[:, 8:], attention_mask=None, use_cache=False).logits
        ours = forward(m, ids, pos).logits
        ours_alt = forward(m, torch.cat([ids[:, :1] + 1, ids[:, 1:]], 1), pos).logits
    # with the trap, the second half ignores the first half entirely
    assert torch.allclose(trap[:, 8:], alone, atol=1e-5)
    # our path is fully causal: the second half differs from the isolated run ...
    assert not torch.allclose(ours[:, 8:], alone, atol=1e-3)
    # ... and every later token sees token 0
    assert (ours_alt[0, 1:] - ours[0, 1:]).abs().amax(-1).min() > 1e-6


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_trap2_use_cache_ignores_packing(tiny_llama, impl):
    """Trap 2: with use_cache=True, packed position restarts are ignored (documents see each other)."""
    m = tiny_llama(impl)
    ids = _ids(16, seed=1)
    pos = torch.cat([torch.arange(8), torch.arange(8)])[None]
    with torch.no_grad():
        alone = m(ids[:, 8:], use_cache=False).logits
        cached = m(ids, position_ids=pos, use_cache=True).logits
        packed = m(ids, position_ids=pos, use_cache=False).logits
    assert not torch.allclose(cached[:, 8:], alone, atol=1e-3)
    assert torch.allclose(packed[:, 8:], alone, atol=1e-5)


def test_trap3_eager_misreads_boolean_4d_mask(tiny_llama):
    """A boolean 4-D mask is misread by eager attention; our additive float mask is right for both kernels."""
    ids = _ids(16, seed=2)
    pos = torch.cat([torch.arange(8) * 3, torch.arange(8) * 2])[None]
    doc = torch.tensor([[0] * 8 + [1] * 8])
    causal = torch.tril(torch.ones(16, 16, dtype=torch.bool))
    bool_mask = (causal & (doc[:, :, None] == doc[:, None, :]))[:, None]
    for impl, bool_ok in (("sdpa", True), ("eager", False)):
        m = tiny_llama(impl)
        with torch.no_grad():
            sep = m(ids[:, 8:], position_ids=pos[:, 8:], attention_mask=torch.ones(1, 8), use_cache=False).logits
            with_bool = m(ids, position_ids=pos, attention_mask=bool_mask, use_cache=False).logits
            ours = forward(m, ids, pos, doc).logits
        assert torch.allclose(ours[:, 8:], sep, atol=1e-5)
        assert torch.allclose(with_bool[:, 8:], sep, atol=1e-5) == bool_ok


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_packed_logits_equal_separate_runs(tiny_llama, impl):
    """Packing with document masking: each document's logits equal a run on it alone (ProLong §6.1)."""
    m = tiny_llama(impl)
    docs = [_ids(n, seed=s)[0].numpy() for n, s in ((11, 3), (7, 4), (9, 5))]
    packed = pack_rows([lm_segment(d) for d in docs], 32, pad_id=0)
    assert packed["input_ids"].shape == (1, 32)
    t = {k: torch.as_tensor(v) for k, v in packed.items()}
    with torch.no_grad():
        out = forward(m, t["input_ids"], t["position_ids"], t["doc_ids"]).logits
        start = 0
        for d in docs:
            alone = m(torch.as_tensor(d)[None], use_cache=False).logits
            assert torch.allclose(out[:, start:start + len(d)], alone, atol=1e-5)
            start += len(d)


def test_packed_with_transformed_positions_uses_4d_mask(tiny_llama):
    m = tiny_llama("sdpa")
    a, b = _ids(6, seed=6)[0], _ids(5, seed=7)[0]
    ids = torch.cat([a, b])[None]
    pos = torch.tensor([[0, 2, 4, 6, 8, 10, 0, 3, 6, 9, 12]])
    doc = torch.tensor([[0] * 6 + [1] * 5])
    with torch.no_grad():
        out = forward(m, ids, pos, doc).logits
        alone_b = forward(m, b[None], pos[:, 6:]).logits
    assert torch.allclose(out[:, 6:], alone_b, atol=1e-5)


def test_causal_doc_mask_shape_and_values():
    mask = causal_doc_mask(torch.tensor([[0, 0, 1]]), torch.float32)
    assert mask.shape == (1, 1, 3, 3)
    allowed = mask[0, 0] == 0
    assert allowed.tolist() == [[True, False, False], [True, True, False], [False, False, True]]


def test_tiny_model_size_and_save_load_with_rope_override(tmp_path):
    cfg = ModelConfig()
    m = build_tiny(cfg, vocab_size=2048, max_positions=4096, bos_id=0, eos_id=1, pad_id=2)
    assert 0.5e6 < n_params(m) < 1.5e6  # ~0.8M: 2 layers, hidden 128, tied embeddings
    m.save_pretrained(tmp_path / "ck")
    ids = torch.randint(3, 2048, (1, 40))
    with torch.no_grad():
        ref = m(ids).logits
        same = load_model(tmp_path / "ck")(ids).logits
        yarn = load_model(tmp_path / "ck", rope=rope_parameters("yarn", 1e4, 4.0, 256))
        assert yarn.config.rope_parameters["rope_type"] == "yarn"
        other = yarn(ids).logits
    assert torch.allclose(ref, same, atol=1e-6)
    assert not torch.allclose(ref, other, atol=1e-4)


def test_load_model_missing_checkpoint_names_path(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_model(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="config.json"):
        load_model(tmp_path / "empty")


def test_rope_parameters_validation():
    with pytest.raises(ValueError, match="factor"):
        rope_parameters("yarn", 1e4, None)
    assert rope_parameters("default", 1e4) == {"rope_type": "default", "rope_theta": 1e4}
    assert np.isclose(rope_parameters("dynamic", 5e5, 10.0)["factor"], 10.0)


def _short_window_model(path, positions: int = 64):
    """A tiny Llama trained for ``positions`` positions (RoPE base 10000), saved to ``path``."""
    m = build_tiny(ModelConfig(num_layers=1, hidden_size=32, intermediate_size=64, num_heads=2, num_kv_heads=2,
                               rope_theta=10_000.0), vocab_size=64, max_positions=positions, bos_id=0, eos_id=1,
                   pad_id=2)
    m.save_pretrained(path)
    return path


def test_scaled_rope_keeps_the_models_theta_and_sets_the_scaling(tmp_path):
    path = _short_window_model(tmp_path / "ck")
    cfg = AutoConfig.from_pretrained(path)
    assert scaled_rope(cfg, "linear", 2) == {"rope_type": "linear", "rope_theta": 10_000.0, "factor": 2.0}
    assert scaled_rope(cfg, "dynamic", 4.0) == {"rope_type": "dynamic", "rope_theta": 10_000.0, "factor": 4.0}
    assert scaled_rope(cfg, "yarn", 2) == {"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 2.0,
                                           "original_max_position_embeddings": 64}
    for kind, factor in (("ntk", 2.0), ("yarn", 1.0), ("linear", 0.5), ("yarn", float("inf"))):
        with pytest.raises(ValueError, match="allowed"):
            scaled_rope(cfg, kind, factor)
    plain = load_model(path).model.rotary_emb
    linear = load_model(path, rope=scaled_rope(cfg, "linear", 2)).model.rotary_emb
    yarn = load_model(path, rope=scaled_rope(cfg, "yarn", 2)).model.rotary_emb
    assert torch.equal(linear.inv_freq, plain.inv_freq / 2)  # every frequency halved: positions interpolated
    assert yarn.rope_type == "yarn" and math.isclose(yarn.attention_scaling, 0.1 * math.log(2) + 1)
    assert yarn.inv_freq[0] == plain.inv_freq[0] and yarn.inv_freq[-1] < plain.inv_freq[-1]  # fast kept, slow scaled


def test_dynamic_ntk_scales_only_past_the_models_own_positions(tmp_path):
    """Dynamic NTK reads ``max_position_embeddings`` as the trained window: --rope-scaling leaves it the model's, so
    rows within the window score as before and longer rows are scaled."""
    path = _short_window_model(tmp_path / "ck")
    plain, dyn = load_model(path), load_model(path, rope=scaled_rope(AutoConfig.from_pretrained(path), "dynamic", 2))
    assert dyn.config.max_position_embeddings == 64
    within, past = _ids(64), _ids(96)
    with torch.no_grad():
        assert torch.equal(forward(plain, within).logits, forward(dyn, within).logits)
        assert not torch.allclose(forward(plain, past).logits, forward(dyn, past).logits, atol=1e-4)


def test_raising_the_positions_changes_no_logit_of_default_rope(tmp_path):
    """Why ``evaluate`` and ``analyze`` now load a model's config as it is: the ``max_position_embeddings`` they used
    to raise is read by no default-RoPE computation, so past the window the logits are bitwise those of before."""
    path = _short_window_model(tmp_path / "ck")
    ids = _ids(100)
    with torch.no_grad():
        own = forward(load_model(path), ids).logits
        raised = forward(load_model(path, max_positions=356), ids).logits
    assert torch.equal(own, raised)
