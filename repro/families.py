"""The model families every method runs on, and the gate that refuses the ones it cannot.

Every method of :mod:`repro.methods` acts through ``position_ids`` (PoSE's and LongRecipe's jumps, the
self-distillation views, restarts in packed rows), so a model qualifies when it has rotary position
embeddings (``config.rope_parameters`` with a ``rope_theta``) and its forward takes ``position_ids``
(:func:`check_architecture`). :data:`FAMILIES` are the architectures this is tested on: tiny random-weight
configs of each (:func:`tiny_family_config`, :func:`build_family`) train with every registered method
(``tests/test_families.py``).
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
from transformers import (MODEL_FOR_CAUSAL_LM_MAPPING, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, PretrainedConfig, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

_CLASSES: dict[str, tuple[type, type]] = {
    "llama": (LlamaConfig, LlamaForCausalLM),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM),
    "mistral": (MistralConfig, MistralForCausalLM),
}
"""Config and causal-LM classes of each family."""

FAMILIES: tuple[str, ...] = tuple(_CLASSES)
"""``config.model_type`` of the architectures every method is tested on."""

_CONFIG_ONLY_KEYS = ("attn_implementation",)
"""Keyword arguments a config accepts at construction without keeping them as a plain attribute."""


def _family(family: str) -> tuple[type, type]:
    if family not in _CLASSES:
        raise ValueError(f"unknown model family {family!r}; allowed: {', '.join(FAMILIES)}")
    return _CLASSES[family]


def check_sizes(vocab_size: object, max_positions: object) -> None:
    """ValueError unless ``vocab_size`` and ``max_positions`` are integers >= 1: a model with no token or no
    position cannot run a forward, and transformers accepts both silently."""
    for name, value in (("vocab_size", vocab_size), ("max_positions", max_positions)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r}; allowed: an integer >= 1")


def tiny_family_config(family: str, vocab_size: int, max_positions: int, hidden_size: int = 64,
                       intermediate_size: int = 128, num_layers: int = 2, num_heads: int = 4, num_kv_heads: int = 2,
                       rope_theta: float = 10000.0, **overrides: Any) -> PretrainedConfig:
    """A small config of ``family`` (``LlamaConfig``, ``Qwen2Config``, ``Qwen3Config`` or ``MistralConfig``).

    Head dim is ``hidden_size / num_heads`` in every family (Qwen3's own default is 128), RoPE is the default
    kind with base ``rope_theta``, attention is full causal (Mistral's ``sliding_window`` is None, so no family
    masks differently from Llama), ``use_cache`` is False and attention is ``sdpa``. ``overrides`` set any other
    field of the family's config (``bos_token_id``, ``tie_word_embeddings``, ``attn_implementation``, ...);
    a field the config does not have is a ValueError, and so is a ``vocab_size`` or ``max_positions`` below 1.
    """
    config_cls, _ = _family(family)
    check_sizes(vocab_size, max_positions)
    if hidden_size % num_heads or num_heads % num_kv_heads:
        raise ValueError(f"hidden_size={hidden_size}, num_heads={num_heads}, num_kv_heads={num_kv_heads}; allowed: "
                         "num_heads divides hidden_size and num_kv_heads divides num_heads")
    defaults = config_cls()
    bad = sorted(k for k in overrides if k not in _CONFIG_ONLY_KEYS and not hasattr(defaults, k))
    if bad:
        raise ValueError(f"{config_cls.__name__} has no field(s) {bad}; overrides set fields of the family's config")
    kwargs: dict[str, Any] = dict(
        vocab_size=vocab_size, hidden_size=hidden_size, intermediate_size=intermediate_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, num_key_value_heads=num_kv_heads,
        head_dim=hidden_size // num_heads, max_position_embeddings=max_positions,
        rope_parameters={"rope_type": "default", "rope_theta": float(rope_theta)}, use_cache=False,
        attn_implementation="sdpa")
    if hasattr(defaults, "sliding_window"):
        kwargs["sliding_window"] = None
    kwargs.update(overrides)
    return config_cls(**kwargs)


def build_family(family: str, vocab_size: int, max_positions: int, seed: int = 0, **config: Any) -> torch.nn.Module:
    """A freshly initialised (seeded) causal LM of ``family``; ``config`` goes to :func:`tiny_family_config`."""
    _, model_cls = _family(family)
    cfg = tiny_family_config(family, vocab_size, max_positions, **config)
    torch.manual_seed(seed)
    return model_cls(cfg)


def has_rope(config: PretrainedConfig) -> bool:
    """True when ``config`` declares rotary position embeddings: a ``rope_theta`` in ``rope_parameters`` (or in
    each of its per-layer-type entries), or a ``rope_theta`` field."""
    params = getattr(config, "rope_parameters", None)
    if isinstance(params, dict) and params:
        if "rope_theta" in params:
            return True
        return all(isinstance(v, dict) and "rope_theta" in v for v in params.values())
    return getattr(config, "rope_theta", None) is not None


def check_architecture(config: PretrainedConfig, model_class: type | None = None) -> None:
    """ValueError unless the model can be trained by the methods here: RoPE (:func:`has_rope`) and a forward
    taking ``position_ids``. ``model_class``: the class to check (default: the causal-LM class transformers maps
    ``config`` to; an unmapped config, e.g. remote code before loading, has its forward checked once loaded)."""
    model_type = getattr(config, "model_type", None) or type(config).__name__
    allowed = f"supported: {', '.join(FAMILIES)} (or another causal LM with RoPE whose forward takes position_ids)"
    if not has_rope(config):
        raise ValueError(f"unsupported architecture model_type={model_type!r}: no rotary position embeddings "
                         "(no rope_parameters / rope_theta in its config); every method here changes position_ids "
                         f"of a RoPE model; {allowed}")
    cls = model_class or MODEL_FOR_CAUSAL_LM_MAPPING.get(type(config), None)
    if cls is not None and "position_ids" not in inspect.signature(cls.forward).parameters:
        raise ValueError(f"unsupported architecture model_type={model_type!r}: {cls.__name__}.forward takes no "
                         f"position_ids, which every method here changes; {allowed}")
