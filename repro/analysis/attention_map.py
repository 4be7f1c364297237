"""Chunked attention maps (Context Denoising Training App. F, Fig. 14), memory linear in T.

The paper cuts the sequence into chunks (46 in Fig. 14) and shows, per layer, how much attention each chunk of
queries gives to each chunk of keys. What we compute, with the T tokens cut into ``n_chunks`` nearly equal chunks
(:func:`chunk_bounds`):

    map[layer, head, a, b] = (1 / |chunk a|) Σ_{q ∈ chunk a} Σ_{k ∈ chunk b} A[q, k]

i.e. the mean over chunk a's queries of the attention they give to chunk b. Every row of a causal map sums to 1
over b ≤ a (entries with b > a are 0); the per-layer map is the mean over heads.

One no-grad forward runs through the capturing attention of :mod:`repro.analysis.capture` (transformers' sdpa, so
the model's outputs are its own); each captured layer's probabilities are recomputed ``block`` query rows at a time
(``softmax(q K^T * scaling + mask)`` in float32, float64 for float64 models), O(heads x block x T) memory, and
reduced to the chunk map at once. Batch size 1.
"""

from __future__ import annotations

import inspect
from typing import Iterable

import numpy as np
import torch

from repro.analysis.capture import AttentionCall, capturing_attention, compute_dtype, mask_rows


def chunk_bounds(length: int, n_chunks: int) -> np.ndarray:
    """``n_chunks + 1`` boundaries cutting ``length`` tokens into nearly equal chunks (sizes differ by at most 1)."""
    if isinstance(n_chunks, bool) or not isinstance(n_chunks, (int, np.integer)) or not 1 <= n_chunks <= length:
        raise ValueError(f"n_chunks={n_chunks!r}; allowed: an integer in 1..{length} (the input length)")
    return np.array([(i * length) // n_chunks for i in range(n_chunks + 1)], dtype=np.int64)


def _layer_map(call: AttentionCall, chunk_of: torch.Tensor, n_chunks: int, block: int) -> torch.Tensor:
    """(heads, n_chunks, n_chunks) attention summed from query chunks to key chunks (not yet divided)."""
    heads, t, _ = call.query.shape
    dt = compute_dtype(call.query.dtype)
    key = call.key.to(dt).repeat_interleave(call.groups, dim=0)  # GQA: every query head's key/value head
    total = torch.zeros(heads, n_chunks, n_chunks, dtype=torch.float64, device=call.query.device)
    for start in range(0, t, block):
        rows = torch.arange(start, min(start + block, t), device=call.query.device)
        end = int(rows[-1]) + 1 if call.is_causal else t  # causal rows never see keys past their block
        scores = (call.query[:, rows].to(dt) @ key[:, :end].transpose(-1, -2)) * call.scaling
        allowed = mask_rows(call, rows)[..., :end]
        probs = torch.softmax(scores.masked_fill(~allowed, float("-inf")), dim=-1)
        per_key_chunk = torch.zeros(heads, rows.numel(), n_chunks, dtype=dt, device=probs.device)
        per_key_chunk.index_add_(2, chunk_of[:end], probs)
        total.index_add_(1, chunk_of[rows], per_key_chunk.double())
    return total


def chunked_attention_map(model: torch.nn.Module, input_ids, n_chunks: int = 46, layers: Iterable[int] | None = None,
                          block: int = 256, per_head: bool = False,
                          position_ids: torch.Tensor | None = None) -> np.ndarray:
    """Chunk-to-chunk attention of one sequence (module docstring): (layers, n_chunks, n_chunks) means over heads,
    or (layers, heads, n_chunks, n_chunks) with ``per_head``; layers in increasing order (all, or ``layers``).
    ``input_ids`` (T,) or (1, T); the forward is fully causal (an all-ones attention mask) with the given
    ``position_ids``."""
    ids = torch.as_tensor(input_ids).to(model.get_input_embeddings().weight.device)
    ids = ids[None] if ids.ndim == 1 else ids
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise ValueError(f"input_ids of shape {tuple(ids.shape)}; allowed: (T,) or (1, T): batch size 1 only")
    t = ids.shape[1]
    bounds = chunk_bounds(t, n_chunks)
    if isinstance(block, bool) or not isinstance(block, (int, np.integer)) or block < 1:
        raise ValueError(f"block={block!r}; allowed: an integer >= 1 (query rows per step)")
    n_layers = model.config.get_text_config().num_hidden_layers
    wanted = sorted(set(range(n_layers) if layers is None else (int(x) for x in layers)))
    if not wanted or wanted[0] < 0 or wanted[-1] >= n_layers:
        raise ValueError(f"layers={wanted}; allowed: a non-empty subset of 0..{n_layers - 1}")
    chunk_of = torch.as_tensor(np.searchsorted(bounds, np.arange(t), side="right") - 1, device=ids.device)
    sizes = torch.as_tensor(np.diff(bounds), dtype=torch.float64, device=ids.device)
    maps: dict[int, torch.Tensor] = {}

    def on_call(call: AttentionCall) -> None:
        if call.layer in wanted:
            maps[call.layer] = _layer_map(call, chunk_of, n_chunks, int(block)) / sizes[None, :, None]

    kwargs = {"logits_to_keep": 1} if "logits_to_keep" in inspect.signature(model.forward).parameters else {}
    with torch.no_grad(), capturing_attention(model, on_call):
        model(input_ids=ids, attention_mask=torch.ones_like(ids), position_ids=position_ids, use_cache=False, **kwargs)
    out = torch.stack([maps[i] for i in wanted]).cpu().numpy()
    return out if per_head else out.mean(axis=1)
