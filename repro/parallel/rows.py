"""Sequence-parallel training of any method: each rank runs the decoder on its shard of every row, the method's
objective sees the whole rows.

Inside :func:`split_rows` every decoder call that goes through the one forward path (:func:`repro.models.forward`,
:func:`repro.models.forward_hidden`, the two views of :mod:`repro.methods.two_view`) is turned into
:func:`decoder_hidden`: the rank keeps its tokens of the full rows (:func:`repro.parallel.sequence.shard_indices`:
``input_ids`` or ``inputs_embeds`` and the rows' own ``position_ids``), runs the decoder on them with
:data:`~repro.parallel.ulysses.SP_ULYSSES` attention (every query attends over the full row, within its document
for packed rows, the boundaries taken from the full rows: :func:`repro.parallel.step.row_attention`), and the
final hidden states of every rank are all-gathered back into full rows (:class:`_GatherRows`).
A row whose length does not cut into equal shards (PoSE's ``round(0.3 T)`` tokens) runs padded at its end
(:func:`pad_rows`) and comes back cut to its own length, so every method runs under sequence parallelism as it is.

So the method's objective (CLM, the KL of the two views, LongCE's weights, CDT's detection and Eq. 2 threshold,
document masks) is computed on the full rows, the same on every rank of the group, and none of its semantics is
cut at a shard boundary. The gradients come out exact because of how the group's ranks split them:

* the all-gather's backward keeps the rank's own tokens' gradient (every rank holds the same objective, so the
  gradient of the gathered hidden states is the same on each), and the all-to-alls of the attention carry the
  gradient between ranks; a rank's decoder weights then get the gradient through its own tokens, and the sum
  over the group is the full-row gradient;
* the LM head is applied to the full rows on every rank, so its weight's gradient is scaled by ``1 / N``
  (:func:`head_weight`, :func:`head_logits`) and the sum over the group is again the full-row gradient;
* the engine (DDP or DeepSpeed) averages gradients over every process, so each rank multiplies its loss by
  ``N`` (:func:`repro.distributed.rank_scales`): the average over ``DP x N`` processes is the sum over each
  group, averaged over the data-parallel ranks.

Collectives the methods need beside the forward: :func:`group_sum` (CDT's embedding gradients, whose full rows
the threshold of Eq. 2 needs; LongCE's short-window losses, split over the group by window with
:func:`share`, run on the rank alone inside :func:`alone`).

What is replicated: the head and the loss over the full rows (about ``N x`` the head's FLOPs of one rank's
share: for Llama-3-8B the head is ~8% of a step's FLOPs, so ~0.075 (N - 1) of one rank's body work), and the
gathered final hidden states (``T x hidden`` per rank). Not shared across ranks: self-distillation's prefix-shared
pass (its key/value cache is sharded), so the skip view runs its second pass in full (two passes) under sequence
parallelism.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
import torch.distributed as dist

from repro.attention.spans import cu_seqlens
from repro.parallel.heads import head_error
from repro.parallel.sequence import gathered_order, padded_length, shard_indices
from repro.parallel.step import attention_kwargs, row_attention
from repro.parallel.ulysses import local, register, sequence_parallel


@dataclass(frozen=True)
class RowGroup:
    """The ranks that share every row of a step (one sequence-parallel group)."""

    group: object
    """The ``torch.distributed`` process group of the ``world`` ranks."""
    world: int
    """Ranks in the group (``N``, the sequence-parallel degree)."""
    rank: int
    """This process's rank in the group (0 .. N-1)."""
    layout: str = "contiguous"
    """How rows are cut (:data:`repro.parallel.sequence.LAYOUTS`)."""


_ACTIVE: list[RowGroup | None] = []


@contextlib.contextmanager
def split_rows(rows: RowGroup) -> Iterator[RowGroup]:
    """Within the block the one forward path runs each decoder call on this rank's shard of the rows (module
    docstring), and :data:`~repro.parallel.ulysses.SP_ULYSSES` attention works over ``rows.group``. Enter it
    around a whole step (forward and backward: the backward's all-to-alls, and recomputed layers under activation
    checkpointing, need it too)."""
    with sequence_parallel(rows.group, rows.layout):
        _ACTIVE.append(rows)
        try:
            yield rows
        finally:
            _ACTIVE.pop()


@contextlib.contextmanager
def alone() -> Iterator[None]:
    """Within the block this rank runs the model on whole inputs by itself (no sharding, local attention), e.g.
    LongCE's short windows shared out by :func:`share`."""
    with local():
        _ACTIVE.append(None)
        try:
            yield
        finally:
            _ACTIVE.pop()


def active() -> RowGroup | None:
    """The :class:`RowGroup` of the innermost :func:`split_rows` (None outside one, inside :func:`alone`, or
    with a group of one rank)."""
    rows = _ACTIVE[-1] if _ACTIVE else None
    return rows if rows is not None and rows.world > 1 else None


def new_groups(world: int, size: int, layout: str = "contiguous") -> RowGroup:
    """This process's :class:`RowGroup` when ``world`` processes are split into consecutive groups of ``size``
    (ranks ``d size .. (d + 1) size - 1`` share the rows of data-parallel rank ``d``). Collective: every process
    calls it (``torch.distributed.new_group`` for every group, in the same order)."""
    if world % size:
        raise ValueError(f"sequence_parallel={size} does not divide the {world} processes; allowed: a divisor of "
                         f"{world}")
    me = dist.get_rank()
    mine = None
    for d in range(world // size):
        g = dist.new_group(list(range(d * size, (d + 1) * size)))
        if d == me // size:
            mine = g
    return RowGroup(mine, size, me % size, layout)


def local_tokens(x: torch.Tensor, rows: RowGroup, dim: int = 1) -> torch.Tensor:
    """The rank's tokens of full rows ``x`` along ``dim`` (in shard order; differentiable: the backward puts the
    gradient back at those tokens, zero elsewhere)."""
    idx = torch.as_tensor(shard_indices(x.shape[dim], rows.rank, rows.world, rows.layout), device=x.device)
    return x.index_select(dim, idx)


class _GatherRows(torch.autograd.Function):
    """All-gather (B, t, ...) shards into (B, N t, ...) full rows in row order; the backward keeps the rank's
    own tokens (the gradient of a replicated objective is already whole on every rank)."""

    @staticmethod
    def forward(ctx, x, rows: RowGroup):
        ctx.rows = rows
        parts = [torch.empty_like(x) for _ in range(rows.world)]
        dist.all_gather(parts, x.contiguous(), group=rows.group)
        full = torch.cat(parts, 1)
        if rows.layout == "contiguous":
            return full
        inverse = torch.as_tensor(np.argsort(gathered_order(full.shape[1], rows.world, rows.layout)),
                                  device=x.device)
        return full.index_select(1, inverse)

    @staticmethod
    def backward(ctx, grad):
        return local_tokens(grad, ctx.rows), None


def gather_rows(x: torch.Tensor, rows: RowGroup) -> torch.Tensor:
    """Differentiable :class:`_GatherRows`: this rank's (B, t, ...) tokens -> the full rows (B, N t, ...)."""
    return _GatherRows.apply(x, rows)


class _ScaleGrad(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, scale: float):
        ctx.scale = scale
        return x.view_as(x)

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.scale, None


def scale_grad(x: torch.Tensor, scale: float) -> torch.Tensor:
    """``x`` in the forward; its gradient times ``scale`` in the backward."""
    return _ScaleGrad.apply(x, scale) if x.requires_grad else x


def head_weight(weight: torch.Tensor) -> torch.Tensor:
    """The LM head's weight as the objective should use it: inside :func:`split_rows` its gradient is scaled by
    ``1 / N`` (every rank of the group applies the head to the full rows); unchanged otherwise."""
    rows = active()
    return weight if rows is None else scale_grad(weight, 1.0 / rows.world)


def head_logits(head: torch.nn.Module, hidden: torch.Tensor) -> torch.Tensor:
    """``head(hidden)`` with the head's parameter gradients scaled by ``1 / N`` inside :func:`split_rows` (the
    gradient of ``hidden`` unchanged), for heads that are modules rather than a plain matrix."""
    rows = active()
    if rows is None:
        return head(hidden)
    return scale_grad(head(scale_grad(hidden, float(rows.world))), 1.0 / rows.world)


def group_sum(x: torch.Tensor) -> torch.Tensor:
    """The sum of ``x`` over the group of :func:`split_rows` (``x`` itself outside one); no gradient."""
    rows = active()
    if rows is None:
        return x
    out = x.detach().clone()
    dist.all_reduce(out, group=rows.group)
    return out


def share(items: Sequence) -> list:
    """This rank's items of ``items`` (every ``N``-th from its rank; all of them outside :func:`split_rows`)."""
    rows = active()
    return list(items) if rows is None else list(items)[rows.rank::rows.world]


def pad_rows(input_ids: torch.Tensor, position_ids: torch.Tensor, doc_ids: torch.Tensor | None,
             embeds: torch.Tensor | None, pad: int) -> tuple:
    """Full rows ``(input_ids, position_ids, doc_ids, inputs_embeds)`` with ``pad`` tokens appended to each row:
    the row's last token id repeated, its positions continued (last + 1, last + 2, ...), its last document id
    repeated (they extend the row's last document, so the masking policy of :func:`row_attention` is the row's own)
    and zero embeddings. Appended at the end of a causal row, they are attended by no real token."""
    if pad == 0:
        return input_ids, position_ids, doc_ids, embeds
    B = input_ids.shape[0]
    steps = torch.arange(1, pad + 1, device=position_ids.device, dtype=position_ids.dtype)
    ids = torch.cat([input_ids, input_ids[:, -1:].expand(B, pad)], 1)
    pos = torch.cat([position_ids, position_ids[:, -1:] + steps], 1)
    doc = None if doc_ids is None else torch.cat([doc_ids, doc_ids[:, -1:].expand(doc_ids.shape[0], pad)], 1)
    emb = None if embeds is None else torch.cat([embeds, embeds.new_zeros(B, pad, embeds.shape[-1])], 1)
    return ids, pos, doc, emb


def decoder_hidden(model: torch.nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None,
                   doc_ids: torch.Tensor | None, rows: RowGroup, **kwargs) -> torch.Tensor:
    """The full rows' final hidden states (B, T, H) from the decoder run on this rank's tokens (module docstring).
    ``input_ids``, ``position_ids``, ``doc_ids`` and ``inputs_embeds`` (in ``kwargs``) are the full rows; no key/
    value cache.

    A row whose length does not cut into equal shards (:func:`repro.parallel.sequence.padded_length`: PoSE's
    ``round(0.3 T)`` tokens, say) runs padded at its end (:func:`pad_rows`) and its hidden states are cut back to
    ``T``: causal attention keeps the padding out of every real token, and the objective never sees it, so the
    loss and gradients are the unpadded row's. Rows already a multiple run unchanged."""
    if kwargs.get("past_key_values") is not None or kwargs.get("use_cache"):
        raise ValueError("a sequence-parallel decoder call keeps no key/value cache; allowed: use_cache=False")
    kwargs = {k: v for k, v in kwargs.items() if k not in ("attention_mask", "past_key_values", "use_cache")}
    B, T = input_ids.shape
    if position_ids is None:
        position_ids = torch.arange(T, device=input_ids.device).expand(B, T)
    input_ids, position_ids, doc_ids, embeds = pad_rows(
        input_ids, position_ids.expand(B, T), doc_ids, kwargs.pop("inputs_embeds", None),
        padded_length(T, rows.world, rows.layout) - T)
    full = {"doc_ids": None if doc_ids is None else doc_ids.cpu().numpy(), "position_ids": position_ids.cpu().numpy()}
    ids = local_tokens(input_ids, rows)
    attention = row_attention(full)
    if isinstance(attention, str) and attention == "restarts":  # the boundaries are known here: no all-gather
        attention = cu_seqlens(doc_ids=full["doc_ids"])
    mask, extra = attention_kwargs(attention, ids)
    if embeds is not None:
        kwargs["inputs_embeds"], ids = local_tokens(embeds, rows), None
    out = model.get_decoder()(input_ids=ids, position_ids=local_tokens(position_ids, rows),
                              attention_mask=mask, use_cache=False, **extra, **kwargs)
    hidden = gather_rows(out.last_hidden_state, rows)
    return hidden if hidden.shape[1] == T else hidden[:, :T]


def setup(model: torch.nn.Module, accelerator, size: int, layout: str = "contiguous") -> RowGroup:
    """Make ``model`` ready to train with ``size`` ranks per row under ``accelerator`` (before the engine wraps
    it): the process groups (:func:`new_groups`, collective) and :data:`~repro.parallel.ulysses.SP_ULYSSES` as
    its attention (its core: one causal sdpa call over the full row, or per document for packed rows). ValueError
    when the run has no multi-process engine or its process count is not a multiple of ``size``."""
    world = 1 if accelerator is None else accelerator.num_processes
    if accelerator is None or world % size:
        raise ValueError(f"sequence_parallel={size} needs a multiple of {size} processes started by a launcher "
                         f"(got {world}); allowed: torchrun --nproc_per_node {size} (or DP x {size}) -m repro train "
                         f"... --sequence-parallel {size}")
    config = getattr(model, "config", None)
    refused = head_error(config.to_dict(), size, "sequence_parallel=") if config is not None else None
    if refused is not None:  # train refuses it before loading (repro.parallel.heads); other callers here
        raise ValueError(refused)
    model.set_attn_implementation(register())
    return new_groups(world, size, layout)
