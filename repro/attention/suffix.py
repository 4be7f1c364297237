"""Attention of packed suffixes over their rows' cached prefixes: the prefix-shared second pass of
self-distillation (:func:`repro.methods.two_view.perturbed_hidden_shared`) in one decoder call for every row.

The skip view's second pass recomputes only each row's suffix ``[s_b, T)``. Rows draw different ``s_b``, so the
suffixes have different lengths; run one call per row (or per distinct ``s``) and every call is a small batch-1
pass (on a 2-core CPU at 8 rows of 512 tokens, a third of the second pass's time went there). Here the suffixes
are laid end to end into one row of ``N = sum (T - s_b)`` tokens and go through the decoder once; the cache holds
the rows' prefixes laid end to end likewise (``P = sum s_b`` keys), so each layer's keys are ``[prefixes |
suffixes]``. :func:`suffix_attention_forward`, registered as :data:`SUFFIX` in transformers' attention registry
(and in its mask registry as "no mask": no ``(N, P + N)`` mask is ever built), attends each *segment* alone: a
row's suffix over that row's keys, or with packed documents (``doc_ids``) each document's part of the suffix over
that document's keys. A segment's ``n`` queries see its ``m`` keys causally aligned at the bottom right (query
``i`` sees keys ``0 .. m - n + i``): one ``scaled_dot_product_attention`` per segment, ``is_causal`` when ``n ==
m``, else a lower-right causal mask: ``torch.nn.attention.bias.causal_lower_right`` on CUDA, whose kernels skip
the masked blocks; elsewhere, whose kernels compute every score a mask leaves out, the segment's queries go in
chunks of :data:`CPU_CHUNK`, each over the keys up to its last query with an explicit boolean mask, which computes
about the causal scores instead of the whole ``n x m`` rectangle (with ``s`` uniform, ``T^2 / 2`` scores per row on
average against causal attention's ``T^2 / 3``; zero queries in front to make a square causal problem were no
faster on this CPU: 9.0 against 4.9 ms forward and backward for 256 queries over 512 keys).

The layout reaches the attention function as the ``suffix_layout`` keyword of the decoder call, which transformers
passes down to every attention call (as it passes ``position_ids``); the implementation is switched for that call
only (:func:`repro.attention.switch.attention_implementation`). Losses and gradients equal two full
passes to float64 rounding (``tests/methods/test_two_view.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention.bias import causal_lower_right
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations import sdpa_attention  # the module: use_gqa_in_sdpa looked up at each call
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

SUFFIX = "suffix_varlen"
"""Name of :func:`suffix_attention_forward` in transformers' attention and mask registries."""
CPU_CHUNK = 256
"""Off CUDA, a segment's queries go in chunks of this many, each over the keys up to its last query."""


@dataclass(frozen=True)
class Segment:
    """Queries ``[q_start, q_stop)`` of the packed suffixes over the keys ``keys`` (indices into ``[prefixes |
    suffixes]``), bottom-right causal."""

    q_start: int
    q_stop: int
    keys: torch.Tensor


@dataclass(frozen=True)
class SuffixLayout:
    """Where every row's suffix and prefix sit in the packed pass, and its attention segments (in query order)."""

    splits: tuple[int, ...]
    length: int
    segments: tuple[Segment, ...]

    @property
    def prefix_tokens(self) -> int:
        return sum(self.splits)

    @property
    def suffix_tokens(self) -> int:
        return sum(self.length - s for s in self.splits)


def suffix_layout(split: torch.Tensor, length: int, doc_ids: torch.Tensor | None = None) -> SuffixLayout:
    """The layout of rows of ``length`` tokens split at ``split`` (B,): row ``b``'s suffix ``[s_b, length)`` and its
    prefix ``[0, s_b)``; with ``doc_ids`` (B, length) one segment per document reaching into the suffix."""
    splits = tuple(int(s) for s in split.tolist())
    if any(not 0 <= s < length for s in splits):
        raise ValueError(f"split {list(splits)}: expected 0 <= split < T = {length} for every row")
    device = split.device
    P = sum(splits)
    segments = []
    off_p = off_s = 0
    for b, s in enumerate(splits):
        if doc_ids is None:
            spans = [(0, length)]
        else:
            d = doc_ids[b]
            cuts = (torch.nonzero(d[1:] != d[:-1]).flatten() + 1).tolist()
            bounds = [0, *cuts, length]
            spans = [(a, e) for a, e in zip(bounds, bounds[1:]) if e > s]
        for a, e in spans:
            pre = torch.arange(a, max(a, min(e, s)), device=device) + off_p
            suf = torch.arange(max(a, s) - s, e - s, device=device) + P + off_s
            segments.append(Segment(off_s + max(a, s) - s, off_s + e - s, torch.cat([pre, suf])))
        off_p += s
        off_s += length - s
    return SuffixLayout(splits, length, tuple(segments))


def _lower_right(n: int, m: int, device: torch.device):
    if device.type == "cuda":
        return causal_lower_right(n, m)
    return torch.ones(n, m, dtype=torch.bool, device=device).tril(m - n)


def suffix_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                             attention_mask: torch.Tensor | None, dropout: float = 0.0, scaling: float | None = None,
                             is_causal: bool | None = None, **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: with ``suffix_layout`` (a :class:`SuffixLayout`) each segment
    attends alone (module docstring); without it, exactly transformers' ``sdpa_attention_forward``."""
    layout = kwargs.get("suffix_layout")
    if layout is None:
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)
    if query.shape[0] != 1 or query.shape[2] != layout.suffix_tokens or \
            key.shape[2] != layout.prefix_tokens + layout.suffix_tokens:
        raise ValueError(f"query {tuple(query.shape)} and key {tuple(key.shape)} do not match the suffix layout "
                         f"(1 row, {layout.suffix_tokens} queries, {layout.prefix_tokens} + {layout.suffix_tokens} "
                         "keys)")
    groups = getattr(module, "num_key_value_groups", 1)
    # CUDA's lower-right bias calls the flash kernel directly, which takes as many key heads as query heads
    gqa = groups > 1 and query.device.type != "cuda" and sdpa_attention.use_gqa_in_sdpa(None, key, value)
    if groups > 1 and not gqa:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    p = dropout if module.training else 0.0
    outs = []
    for seg in layout.segments:
        q = query[:, :, seg.q_start:seg.q_stop]
        k, v = key.index_select(2, seg.keys), value.index_select(2, seg.keys)
        n, m = q.shape[2], k.shape[2]
        if n == m:
            o = F.scaled_dot_product_attention(q, k, v, dropout_p=p, is_causal=True, scale=scaling, enable_gqa=gqa)
        elif q.device.type == "cuda":
            o = F.scaled_dot_product_attention(q, k, v, attn_mask=_lower_right(n, m, q.device), dropout_p=p,
                                               scale=scaling, enable_gqa=gqa)
        else:  # query chunks, each over the keys up to its last query: about causal work, not the rectangle's
            parts = []
            for i in range(0, n, CPU_CHUNK):
                stop = m - n + min(i + CPU_CHUNK, n)
                parts.append(F.scaled_dot_product_attention(
                    q[:, :, i:i + CPU_CHUNK], k[:, :, :stop], v[:, :, :stop],
                    attn_mask=_lower_right(min(CPU_CHUNK, n - i), stop, q.device), dropout_p=p, scale=scaling,
                    enable_gqa=gqa))
            o = torch.cat(parts, 2)
        outs.append(o)
    return torch.cat(outs, 2).transpose(1, 2).contiguous(), None


def _no_mask(*args, **kwargs) -> None:
    """The mask function of :data:`SUFFIX`: none (the layout is the mask)."""
    return None


def register() -> str:
    """Register :data:`SUFFIX` in transformers' attention and mask registries (idempotent); returns the name."""
    AttentionInterface.register(SUFFIX, suffix_attention_forward)
    AttentionMaskInterface.register(SUFFIX, _no_mask)
    return SUFFIX
