"""Seeing what each attention layer computes, without building its T x T matrix (used by :mod:`repro.analysis.ig`
and :mod:`repro.analysis.attention_map`).

:func:`capturing_attention` switches a model, for the duration of a ``with`` block, to an attention function
registered in transformers' attention-function registry (``AttentionInterface.register``; the mask function
registered under the same name is transformers' ``sdpa_mask``). That function computes the layer's output with
transformers' own sdpa attention (``sdpa_attention_forward``: memory linear in T with a causal mask that sdpa
can skip, i.e. an all-ones ``attention_mask``) and hands the call to a callback, which sees the queries, keys and
values the layer really uses (after RoPE, q/k norms, ...), the mask transformers built for sdpa and the output.
No transformers code is patched; the model's own implementation is restored on exit, also after an error. The
forward runs through sdpa whatever the model's own implementation is (eager, flash, ...).

:func:`mask_rows` and :func:`row_probabilities` recompute the attention probabilities of chosen query rows from
such a capture: ``softmax(q_j K^T * scaling + mask_j)`` in float32 (float64 for float64 inputs).

Limits: batch size 1 (the callers' choice: one sequence per call), no KV cache (queries and keys have the same
length), no attention sinks / position biases / soft-capping (sdpa has none of them either). A model whose mask
cannot be skipped (e.g. Mistral with a sliding window shorter than the input) gets a materialised T x T boolean mask
from transformers: still correct, no longer memory linear.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from dataclasses import dataclass
from typing import Callable, Iterator

import torch
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import sdpa_mask

from repro.attention.switch import attention_implementation

CAPTURE = "repro_capture"
"""Registered name of the capturing attention (without 'sdpa' or 'flash' in it, which transformers would read as a
request for those kernels)."""


@dataclass(frozen=True)
class AttentionCall:
    """One attention call as the capturing function saw it (batch size 1)."""

    layer: int
    """The module's ``layer_idx`` (else the order in which attention modules were first called)."""
    query: torch.Tensor
    """(heads, T, head_dim), after RoPE."""
    key: torch.Tensor
    """(kv_heads, T, head_dim), after RoPE (not repeated for GQA)."""
    value: torch.Tensor
    """(kv_heads, T, head_dim)."""
    attention_mask: torch.Tensor | None
    """The 4-D mask transformers built for sdpa ((1, 1|heads, T, T), boolean: True = may attend), or None."""
    is_causal: bool
    """Whether sdpa applies its causal mask (a None mask and a causal module)."""
    scaling: float
    """Score scale (``head_dim ** -0.5`` unless the model sets another)."""
    output: torch.Tensor
    """(1, T, heads, head_dim), the attention output before ``o_proj``; it carries the graph when grads are on."""

    @property
    def groups(self) -> int:
        """Query heads per key/value head (GQA)."""
        return self.query.shape[0] // self.key.shape[0]


_CALLBACK: contextvars.ContextVar[Callable[[AttentionCall], None] | None] = contextvars.ContextVar(
    "repro_capture_callback", default=None)
_ORDER: dict[int, int] = {}


def _layer_of(module: torch.nn.Module) -> int:
    idx = getattr(module, "layer_idx", None)
    return idx if isinstance(idx, int) else _ORDER.setdefault(id(module), len(_ORDER))


def capturing_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                                attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                                is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' sdpa attention, then the active callback (if any) gets an :class:`AttentionCall`."""
    callback = _CALLBACK.get()
    if callback is not None:
        if query.shape[0] != 1:
            raise ValueError(f"batch size {query.shape[0]}; allowed: 1 (one sequence per scoring call)")
        if query.shape[2] != key.shape[2]:
            raise ValueError(f"{query.shape[2]} queries over {key.shape[2]} keys; allowed: equal lengths (no cache)")
        if dropout and module.training:
            raise ValueError(f"attention dropout {dropout} in training mode; allowed: 0 (call model.eval() first)")
        if kwargs.get("position_bias") is not None or kwargs.get("s_aux") is not None:
            raise ValueError("attention with a position bias or sinks; allowed: plain softmax attention")
    out, _ = sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                    is_causal=is_causal, **kwargs)
    if callback is not None:
        causal = getattr(module, "is_causal", True) if is_causal is None else is_causal
        callback(AttentionCall(
            layer=_layer_of(module), query=query[0].detach(), key=key[0].detach(), value=value[0].detach(),
            attention_mask=attention_mask.detach() if isinstance(attention_mask, torch.Tensor) else None,
            is_causal=bool(causal and attention_mask is None and query.shape[2] > 1),
            scaling=float(scaling) if scaling is not None else 1.0 / math.sqrt(query.shape[-1]), output=out))
    return out, None


def _register() -> None:
    AttentionInterface.register(CAPTURE, capturing_attention_forward)
    AttentionMaskInterface.register(CAPTURE, sdpa_mask)


@contextlib.contextmanager
def capturing_attention(model: torch.nn.Module, callback: Callable[[AttentionCall], None]) -> Iterator[None]:
    """Within the block, every attention call of ``model`` runs through sdpa and then ``callback(call)``."""
    _register()
    token = _CALLBACK.set(callback)
    try:
        with attention_implementation(model, CAPTURE):
            yield
    finally:
        _CALLBACK.reset(token)


def mask_rows(call: AttentionCall, rows: torch.Tensor) -> torch.Tensor:
    """Boolean (1|heads, len(rows), T): which keys the query rows ``rows`` may attend to, as sdpa applied it."""
    t = call.key.shape[1]
    if call.attention_mask is not None:
        m = call.attention_mask[0][:, rows, :t]
        if m.dtype != torch.bool:  # an additive float mask: -inf / finfo.min where masked
            m = m > torch.finfo(m.dtype).min / 2
        return m
    if call.is_causal:
        return (torch.arange(t, device=rows.device)[None, :] <= rows[:, None])[None]
    return torch.ones(1, rows.numel(), t, dtype=torch.bool, device=rows.device)


def compute_dtype(dtype: torch.dtype) -> torch.dtype:
    """float64 for float64 models, float32 otherwise (the recompute precision)."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def row_probabilities(q_rows: torch.Tensor, key: torch.Tensor, allowed: torch.Tensor, scaling: float) -> torch.Tensor:
    """``softmax(q_rows K^T * scaling)`` over the ``allowed`` keys for one head: ``q_rows`` (m, D), ``key`` (T, D),
    ``allowed`` (m, T) boolean; (m, T) in :func:`compute_dtype` of the inputs (masked keys get exactly 0)."""
    dt = compute_dtype(q_rows.dtype)
    scores = (q_rows.to(dt) @ key.to(dt).T) * scaling
    scores = scores.masked_fill(~allowed, float("-inf"))
    return torch.softmax(scores, dim=-1)
