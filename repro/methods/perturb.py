"""Perturbations of one forward pass that are not a change of RoPE indices (self-distillation §3.6, Tables 8, 10).

- :func:`no_rope`: the pass runs without rotary embedding (NoPE view), through a forward hook on the model's
  rotary-embedding module that returns ``cos = 1, sin = 0`` (rotation by zero angle): queries and keys enter
  attention unrotated. No transformers code is patched; the hook is removed on exit.
- :func:`attention_noise`: Gaussian noise added to the pre-softmax attention scores, through an attention
  function registered in transformers' attention-function registry (``AttentionInterface``) and selected
  with the model's public ``set_attn_implementation`` for the duration of the pass; the model's own
  implementation is restored on exit (also after an error).

Dropout consistency needs no helper: the model's own dropout (``config.attention_dropout`` for Llama/Qwen),
set when the model is loaded, makes two training-mode passes differ.
"""

from __future__ import annotations

import contextlib
import contextvars
import math

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.masking_utils import eager_mask

from repro.attention.switch import attention_implementation

NOISY_ATTENTION = "repro_attention_noise"
"""Name of the noisy attention function in transformers' attention registry."""

_NOISE_STD: contextvars.ContextVar[float] = contextvars.ContextVar("attention_noise_std", default=0.0)


def rotary_module(model: torch.nn.Module) -> torch.nn.Module:
    """The model's rotary-embedding module (the submodule whose class name ends in ``RotaryEmbedding``)."""
    found = [m for m in model.modules() if type(m).__name__.endswith("RotaryEmbedding")]
    if len(found) != 1:
        raise ValueError(f"expected one rotary-embedding module in {type(model).__name__}, found {len(found)}; "
                         "NoPE views need a RoPE model whose rotary module computes (cos, sin) once per forward")
    return found[0]


def _identity_rotation(module, args, output):
    cos, sin = output
    return torch.ones_like(cos), torch.zeros_like(sin)


@contextlib.contextmanager
def no_rope(model: torch.nn.Module):
    """Within the block, ``model`` applies no rotary embedding (NoPE); outside, nothing changes."""
    handle = rotary_module(model).register_forward_hook(_identity_rotation)
    try:
        yield model
    finally:
        handle.remove()


def _repeat_kv(x: torch.Tensor, groups: int) -> torch.Tensor:
    return x if groups == 1 else x.repeat_interleave(groups, dim=1)


def noisy_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                            attention_mask: torch.Tensor | None, scaling: float | None = None, dropout: float = 0.0,
                            **kwargs) -> tuple[torch.Tensor, torch.Tensor]:
    """Eager attention with ``N(0, std^2)`` noise added to the scaled scores before the softmax (``std`` from
    :func:`attention_noise`). Same signature and output layout as transformers' attention functions:
    returns ``(B, T, heads, head_dim)`` and the probabilities."""
    groups = query.shape[1] // key.shape[1]
    k, v = _repeat_kv(key, groups), _repeat_kv(value, groups)
    scale = scaling if scaling is not None else 1.0 / math.sqrt(query.shape[-1])
    scores = query @ k.transpose(-1, -2) * scale
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask[..., :k.shape[-2]], torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask[..., :k.shape[-2]]
    elif query.shape[-2] > 1:
        q_len, k_len = query.shape[-2], k.shape[-2]
        causal = torch.ones(q_len, k_len, dtype=torch.bool, device=query.device).tril(k_len - q_len)
        scores = scores.masked_fill(~causal, torch.finfo(scores.dtype).min)
    std = _NOISE_STD.get()
    if std > 0:
        scores = scores + std * torch.randn_like(scores)
    probs = torch.softmax(scores if scores.dtype == torch.float64 else scores.float(), -1).to(query.dtype)
    probs = torch.nn.functional.dropout(probs, p=dropout, training=module.training)
    return (probs @ v).transpose(1, 2).contiguous(), probs


def _register() -> None:
    """Register the noisy attention and, for it, transformers' eager mask (a custom attention name gets no
    mask otherwise)."""
    AttentionInterface.register(NOISY_ATTENTION, noisy_attention_forward)
    AttentionMaskInterface.register(NOISY_ATTENTION, eager_mask)


@contextlib.contextmanager
def attention_noise(model, std: float):
    """Within the block, ``model``'s attention scores get ``N(0, std^2)`` noise (``std >= 0``); on exit the
    model's own attention implementation is back."""
    if not (std >= 0 and math.isfinite(std)):
        raise ValueError(f"std={std!r}; allowed: a finite value >= 0")
    _register()
    token = _NOISE_STD.set(float(std))
    try:
        with attention_implementation(model, NOISY_ATTENTION):
            yield model
    finally:
        _NOISE_STD.reset(token)
