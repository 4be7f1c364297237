"""Per-document attention on CPU: the cost profile of a variable-length attention kernel.

On CPU, transformers turns packed rows into one dense block-diagonal (T, T) mask, so attention costs ``T^2`` per
row whatever the documents; a variable-length kernel (flash attention's ``varlen`` on GPUs, what ProLong trains
with) costs ``sum(len^2)``. :func:`per_document_attention` swaps the model's attention for one that calls
``scaled_dot_product_attention`` (causal) once per document of each row, skipping padding (its outputs are zeros:
padding predicts nothing and nothing attends to it). The linear layers still run on every position. Timings with
it are those of a hypothetical varlen kernel built from explicit per-document calls (plus a call's overhead per
document), used to fit :class:`repro.bench.reorder_sim.CostModel` and as the real work of
:mod:`repro.bench.reorder`.
"""

from __future__ import annotations

import contextlib
import contextvars
from typing import Mapping

import numpy as np
import torch
import torch.nn.functional as F

from repro.data.balance import as_numpy, padding_mask

PER_DOCUMENT = "per_document_sdpa"
"""The attention name registered in transformers' registry."""
_SPANS: contextvars.ContextVar[list | None] = contextvars.ContextVar("per_document_spans", default=None)


def document_spans(batch: Mapping, pad_id: int | None = None) -> list[list[tuple[int, int]]]:
    """Per row, the ``(start, end)`` token spans of its documents (runs of equal ``doc_ids``; the row without
    them), padding (:func:`repro.data.balance.padding_mask`) left out."""
    pad = padding_mask(batch, pad_id)
    docs = as_numpy(batch["doc_ids"]) if "doc_ids" in batch else np.zeros(pad.shape, dtype=np.int64)
    out = []
    for r in range(pad.shape[0]):
        cut = np.flatnonzero(np.r_[True, docs[r, 1:] != docs[r, :-1], True])
        out.append([(int(s), int(e)) for s, e in zip(cut[:-1], cut[1:]) if not pad[r, s:e].all()])
    return out


def per_document_forward(module, query, key, value, attention_mask, dropout=0.0, scaling=None, **kwargs):
    """transformers attention function: causal sdpa per document span (:func:`per_document_attention`'s spans),
    zeros at padding; returns ``(B, T, heads, head_dim)`` and no probabilities."""
    spans = _SPANS.get()
    if spans is None or len(spans) != query.shape[0]:
        raise RuntimeError("per-document attention needs the batch's spans: run the model inside "
                           "per_document_attention(model, batch)")
    out = torch.zeros_like(query)
    groups = query.shape[1] // key.shape[1]
    for b, row in enumerate(spans):
        for s, e in row:
            out[b:b + 1, :, s:e] = F.scaled_dot_product_attention(
                query[b:b + 1, :, s:e], key[b:b + 1, :, s:e], value[b:b + 1, :, s:e], is_causal=True,
                scale=scaling, enable_gqa=groups > 1)
    return out.transpose(1, 2).contiguous(), None


def _no_mask(*args, **kwargs):
    return None


@contextlib.contextmanager
def per_document_attention(model, batch: Mapping, pad_id: int | None = None):
    """Within the block, ``model`` attends within each document of ``batch``'s rows by one sdpa call per document
    (run it on that batch with ``attention_mask=None``); on exit its own attention is back."""
    from transformers import AttentionInterface, AttentionMaskInterface

    AttentionInterface.register(PER_DOCUMENT, per_document_forward)
    AttentionMaskInterface.register(PER_DOCUMENT, _no_mask)
    previous = model.config._attn_implementation
    token = _SPANS.set(document_spans(batch, pad_id))
    model.set_attn_implementation(PER_DOCUMENT)
    try:
        yield model
    finally:
        model.set_attn_implementation(previous)
        _SPANS.reset(token)
