"""Sequence-parallel sharding of training rows: each rank gets a slice of every row, targets already shifted.

Every method here chooses ``position_ids`` (PoSE, LongRecipe, the skip view, packed documents restarting at 0),
so a sequence-parallel rank must receive exactly the position ids, document ids and targets of its tokens, cut
from the full row, never recomputed on its slice: RoPE is applied on each rank with its own ids, and a shard's
first token is in general not a document start.

Layouts (:data:`LAYOUTS`) over a row of ``T`` tokens and ``W`` ranks:

* ``contiguous``: rank ``r`` gets tokens ``[r T / W, (r + 1) T / W)``;
* ``zigzag``: the row is cut into ``2 W`` equal chunks and rank ``r`` gets chunks ``r`` and ``2 W - 1 - r``
  (in that order), so each rank holds one early and one late chunk and the causal attention work is balanced.

The next-token targets are shifted on the full row before slicing (:func:`shift_targets`): the target of a
shard's last token is the first token of the token that follows it in the row (on another rank), and its loss
weight is that token's weight; the row's last token has no target (``IGNORE``, weight 0). Hence the sum over
ranks of :func:`shard_loss_sum` divided by the row's total target weight is exactly
:func:`repro.loss.weighted_clm_loss` of the full row.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np
import torch
import torch.nn.functional as F

from repro.attention.spans import starts_mask

LAYOUTS: tuple[str, ...] = ("contiguous", "zigzag")
"""Sequence layouts: ``contiguous`` (one slice per rank) and ``zigzag`` (chunks ``r`` and ``2W-1-r``)."""
IGNORE = -100
"""Target id of a token that has no next token in its row (the row's last token); its weight is 0."""
DERIVED_KEYS: tuple[str, ...] = ("targets", "target_weights", "doc_starts", "token_index")
"""Keys :func:`shard_row` adds: shifted ``targets`` and ``target_weights``, ``doc_starts`` (True at a token
that starts a document of the full row) and ``token_index`` (each token's index in the full row)."""


def _check_layout(layout: str) -> None:
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}; allowed: {', '.join(repr(x) for x in LAYOUTS)}")


def _check_rank(rank: int, world: int) -> None:
    if not isinstance(world, (int, np.integer)) or world < 1:
        raise ValueError(f"world={world!r}; allowed: an integer >= 1")
    if not isinstance(rank, (int, np.integer)) or not 0 <= rank < world:
        raise ValueError(f"rank={rank!r}; allowed: 0 <= rank < world={world}")


def pieces(layout: str, world: int) -> int:
    """How many equal chunks a row is cut into: ``world`` (contiguous) or ``2 * world`` (zigzag)."""
    _check_layout(layout)
    return world if layout == "contiguous" else 2 * world


def check_length(length: int, world: int, layout: str = "contiguous") -> int:
    """The shard length of a row of ``length`` tokens; ValueError naming the length, world, layout and the
    padding needed when the row does not cut evenly."""
    n = pieces(layout, world)
    if length < n or length % n:
        pad = (-length) % n if length >= n else n - length
        raise ValueError(f"row length {length} does not shard evenly over world={world} with layout={layout!r}: "
                         f"it needs a multiple of {n} tokens; pad each row by {pad} token(s) to {length + pad}")
    return length // world


def padded_length(length: int, world: int, layout: str = "contiguous") -> int:
    """The row length :func:`repro.parallel.rows.decoder_hidden` runs the decoder on: ``length`` rounded up to a
    multiple of :func:`pieces` (``length`` itself when it already is one, so such rows run unchanged)."""
    n = pieces(layout, world)
    return max(n, -(-length // n) * n)


def shard_indices(length: int, rank: int, world: int, layout: str = "contiguous") -> np.ndarray:
    """(length / world,) int64: the full-row index of each token of rank ``rank``'s shard, in shard order."""
    _check_rank(rank, world)
    check_length(length, world, layout)
    if layout == "contiguous":
        size = length // world
        return np.arange(rank * size, (rank + 1) * size, dtype=np.int64)
    c = length // (2 * world)
    return np.concatenate([np.arange(rank * c, (rank + 1) * c), np.arange((2 * world - 1 - rank) * c,
                                                                         (2 * world - rank) * c)]).astype(np.int64)


def gathered_order(length: int, world: int, layout: str = "contiguous") -> np.ndarray:
    """(length,) int64: the full-row index of each token when the shards of ranks ``0..world-1`` are laid end to
    end (what an all-gather or an all-to-all along the sequence returns); ``argsort`` of it restores row order."""
    return np.concatenate([shard_indices(length, r, world, layout) for r in range(world)])


def _as_rows(x, name: str) -> np.ndarray:
    a = np.asarray(x.detach().cpu() if isinstance(x, torch.Tensor) else x)
    if a.ndim not in (1, 2):
        raise ValueError(f"{name} of shape {a.shape}; allowed: (T,) or (rows, T)")
    return a


def shift_targets(input_ids, weights=None) -> tuple[np.ndarray, np.ndarray]:
    """Next-token ``targets`` and ``target_weights`` of full rows (same shape as ``input_ids``): position ``t``
    predicts ``input_ids[..., t + 1]`` with weight ``weights[..., t + 1]`` (the convention of
    :func:`repro.loss.weighted_clm_loss`; ``weights`` None: 1 everywhere but the row's first token); the last
    position gets :data:`IGNORE` and weight 0."""
    ids = _as_rows(input_ids, "input_ids").astype(np.int64)
    w = np.ones(ids.shape, np.float64) if weights is None else _as_rows(weights, "weights")
    if w.shape != ids.shape:
        raise ValueError(f"weights of shape {w.shape} but input_ids of shape {ids.shape}; allowed: the same shape")
    targets = np.full_like(ids, IGNORE)
    targets[..., :-1] = ids[..., 1:]
    tw = np.zeros(w.shape, dtype=np.result_type(w.dtype, np.float32))
    tw[..., :-1] = w[..., 1:]
    return targets, tw


def _doc_starts(batch: Mapping, length: int, shape: tuple) -> np.ndarray:
    """True at each token that starts a document of the full row: where ``doc_ids`` changes if given, else where
    ``position_ids`` restarts at 0 (:func:`repro.attention.spans.starts_mask`); the row's first token always."""
    if batch.get("doc_ids") is not None:
        starts = starts_mask(doc_ids=_as_rows(batch["doc_ids"], "doc_ids").reshape(-1, length))
    elif batch.get("position_ids") is not None:
        starts = starts_mask(position_ids=_as_rows(batch["position_ids"], "position_ids").reshape(-1, length))
    else:
        starts = torch.zeros((int(np.prod(shape[:-1], dtype=np.int64)), length), dtype=torch.bool)
        starts[:, 0] = True
    return starts.numpy().reshape(shape)


def shard_row(batch: Mapping, rank: int, world: int, layout: str = "contiguous") -> dict[str, np.ndarray]:
    """Rank ``rank``'s shard of full rows ``batch`` (arrays or tensors shaped (T,) or (rows, T); ``input_ids``
    required, ``position_ids``, ``doc_ids``, ``weights`` and any other per-token array optional).

    Every array whose last axis is the row length is sliced at :func:`shard_indices` (``position_ids`` and
    ``doc_ids`` included, so RoPE ids and document ids are the full row's); strings and scalars are left out.
    Added (:data:`DERIVED_KEYS`):
    ``targets`` / ``target_weights`` shifted on the full row (:func:`shift_targets`) before slicing,
    ``doc_starts`` computed on the full row and ``token_index``. ValueError when the row length does not shard
    evenly (:func:`check_length`)."""
    if "input_ids" not in batch:
        raise ValueError(f"batch has keys {sorted(batch)}; required: input_ids")
    ids = _as_rows(batch["input_ids"], "input_ids")
    length = ids.shape[-1]
    idx = shard_indices(length, rank, world, layout)
    targets, tw = shift_targets(ids, batch.get("weights"))
    out: dict[str, np.ndarray] = {}
    for k, v in batch.items():
        if v is None or k in DERIVED_KEYS or isinstance(v, str) or np.ndim(v) == 0:
            continue  # not a per-token array (e.g. a name or a layout)
        a = _as_rows(v, k)
        if a.shape != ids.shape:
            raise ValueError(f"{k} of shape {a.shape} but input_ids of shape {ids.shape}; allowed: the same shape")
        out[k] = np.ascontiguousarray(a[..., idx])
    out["targets"] = np.ascontiguousarray(targets[..., idx])
    out["target_weights"] = np.ascontiguousarray(tw[..., idx])
    out["doc_starts"] = np.ascontiguousarray(_doc_starts(batch, length, ids.shape)[..., idx])
    out["token_index"] = idx
    return out


def gather_row(shards: Sequence[Mapping], layout: str = "contiguous") -> dict[str, np.ndarray]:
    """Inverse of :func:`shard_row`: the full rows from the shards of ranks ``0..W-1`` (in rank order). Per-token
    arrays (``targets`` and ``target_weights`` included) come back in row order; ``token_index`` becomes
    ``arange(T)``."""
    world = len(shards)
    if world < 1:
        raise ValueError("gather_row needs the shards of ranks 0..W-1; got none")
    size = np.asarray(shards[0]["input_ids"]).shape[-1]
    length = size * world
    order = gathered_order(length, world, layout)
    inverse = np.argsort(order, kind="stable")
    keys = [k for k in shards[0] if k != "token_index"]
    out = {k: np.concatenate([np.asarray(s[k]) for s in shards], axis=-1)[..., inverse] for k in keys}
    out["token_index"] = np.arange(length, dtype=np.int64)
    return out


def shard_loss_sum(logits: torch.Tensor, targets: torch.Tensor, target_weights: torch.Tensor) -> torch.Tensor:
    """``sum_t w_t * CE(logits_t, target_t)`` over a shard's tokens (logits (..., T, V); fp32, fp64 stays fp64);
    tokens with target :data:`IGNORE` contribute 0. Divide the sum over ranks by the row's total target weight
    to get :func:`repro.loss.weighted_clm_loss`."""
    lg = logits if logits.dtype == torch.float64 else logits.float()
    ce = F.cross_entropy(lg.reshape(-1, lg.shape[-1]), targets.reshape(-1).long(), ignore_index=IGNORE,
                         reduction="none")
    return (ce * target_weights.reshape(-1).to(ce.dtype)).sum()
