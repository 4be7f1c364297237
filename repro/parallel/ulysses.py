"""DeepSpeed-Ulysses-style sequence-parallel attention, registered in transformers' public registries.

Each rank of a sequence-parallel (SP) group runs the whole model on its shard of the row
(:func:`repro.parallel.sequence.shard_row`), with its own slice of the row's ``position_ids``, so RoPE rotates
every query and key by its position in the full row before attention. Inside attention,
:func:`ulysses_attention_forward`:

1. all-to-alls q, k and v from sequence-sharded (all heads, ``T / W`` tokens) to head-sharded (``H / W`` heads,
   all ``T`` tokens), and puts the tokens back in row order (the ``zigzag`` layout interleaves them);
2. runs causal attention over the full row: one causal sdpa call, or causal attention within each document
   (:func:`repro.attention.doc_masked.varlen_sdpa`) when the row is packed, with the boundaries of the full
   row: explicit ``cu_seq_lens_q/k`` kwargs over the full rows, else (no mask) the restarts at 0 of the full
   row's ``position_ids``, all-gathered from the group;
3. all-to-alls the output back to sequence-sharded.

Communication per layer and rank: q, k, v and the output each cross once (about ``(W - 1) / W`` of the local
activations each way), independent of ``W``, which is Ulysses' property; the backward pass does the inverse
all-to-alls. gloo implements ``all_to_all_single`` on CPU in torch 2.13, so this runs with gloo (checked by
:mod:`repro.parallel.check` with two processes); no all-gather fallback is needed.

Masking: the registered mask function is :func:`repro.attention.doc_masked.doc_mask` (an all-ones 2-D mask is
a marker for one document per row, None means packed rows), as for ``sdpa_varlen``; a 4-D mask only covers
the local shard and is refused: pass the full row's boundaries as ``cu_seq_lens_q/k``
(:func:`repro.attention.spans.varlen_kwargs` of the full row's ``doc_ids``) instead.

Outside :func:`sequence_parallel` (no group, or a group of one) the function is exactly ``sdpa_varlen``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Iterator

import torch
import torch.distributed as dist
import torch.nn.functional as F
from transformers import AttentionInterface, AttentionMaskInterface

from repro.attention.doc_masked import doc_mask, sdpa_varlen_attention_forward, varlen_sdpa
from repro.attention.spans import cu_seqlens
from repro.parallel.sequence import LAYOUTS, gathered_order

SP_ULYSSES = "sp_ulysses"
"""Name of the Ulysses attention in transformers' ``AttentionInterface`` and ``AttentionMaskInterface``."""


@dataclass(frozen=True)
class SPState:
    """The sequence-parallel group the attention function works in (set by :func:`sequence_parallel`)."""

    group: object
    """The ``torch.distributed`` process group of the ranks that share one row."""
    world: int
    """Ranks in ``group``."""
    layout: str
    """How the row is sharded (:data:`repro.parallel.sequence.LAYOUTS`)."""


_STATE: list[SPState] = []


@contextlib.contextmanager
def sequence_parallel(group=None, layout: str = "contiguous") -> Iterator[SPState]:
    """Within this block :data:`SP_ULYSSES` attention shards heads over ``group`` (default: the whole world) and
    reads the rows as sharded with ``layout``."""
    if layout not in LAYOUTS:
        raise ValueError(f"layout={layout!r}; allowed: {', '.join(repr(x) for x in LAYOUTS)}")
    group = group if group is not None else dist.group.WORLD
    state = SPState(group, dist.get_world_size(group), layout)
    _STATE.append(state)
    try:
        yield state
    finally:
        _STATE.pop()


@contextlib.contextmanager
def local() -> Iterator[SPState]:
    """Within the block :data:`SP_ULYSSES` attention is the rank's own (``sdpa_varlen`` on its inputs), also
    inside :func:`sequence_parallel`."""
    state = SPState(None, 1, "contiguous")
    _STATE.append(state)
    try:
        yield state
    finally:
        _STATE.pop()


def current() -> SPState | None:
    """The innermost :func:`sequence_parallel` state, or None outside one."""
    return _STATE[-1] if _STATE else None


def _seq_to_head(x: torch.Tensor, group, world: int) -> torch.Tensor:
    """(B, h, t, D) sequence shard with all heads -> (B, h / W, W t, D): this rank's heads, the shards of ranks
    0..W-1 laid end to end."""
    B, h, t, D = x.shape
    send = x.reshape(B, world, h // world, t, D).transpose(0, 1).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.permute(1, 2, 0, 3, 4).reshape(B, h // world, world * t, D)


def _head_to_seq(y: torch.Tensor, group, world: int) -> torch.Tensor:
    """Inverse of :func:`_seq_to_head`: (B, h / W, W t, D) -> (B, h, t, D)."""
    B, hl, T, D = y.shape
    send = y.reshape(B, hl, world, T // world, D).permute(2, 0, 1, 3, 4).contiguous()
    recv = torch.empty_like(send)
    dist.all_to_all_single(recv, send, group=group)
    return recv.transpose(0, 1).reshape(B, hl * world, T // world, D)


class _AllToAll(torch.autograd.Function):
    """An all-to-all ``there`` (:func:`_seq_to_head` or :func:`_head_to_seq`) with its inverse ``back`` as the
    backward pass."""

    @staticmethod
    def forward(ctx, x, group, world, there, back):
        ctx.group, ctx.world, ctx.back = group, world, back
        return there(x, group, world)

    @staticmethod
    def backward(ctx, grad):
        return ctx.back(grad.contiguous(), ctx.group, ctx.world), None, None, None, None


def seq_to_head(x: torch.Tensor, group, world: int) -> torch.Tensor:
    """Differentiable all-to-all, (B, h, T / W, D) sequence-sharded -> (B, h / W, T, D) head-sharded (shards in
    rank order). ``h`` must be divisible by ``world``."""
    if x.shape[1] % world:
        raise ValueError(f"{x.shape[1]} heads do not split over a sequence-parallel group of {world}; allowed: "
                         f"a head count divisible by {world}")
    return _AllToAll.apply(x, group, world, _seq_to_head, _head_to_seq)


def head_to_seq(y: torch.Tensor, group, world: int) -> torch.Tensor:
    """Differentiable inverse of :func:`seq_to_head`."""
    return _AllToAll.apply(y, group, world, _head_to_seq, _seq_to_head)


def _full_positions(position_ids: torch.Tensor, state: SPState, B: int, t: int) -> torch.Tensor:
    """The full rows' position ids (B, W t) in gathered order, all-gathered from the group."""
    local = position_ids.expand(B, t).contiguous()
    parts = [torch.empty_like(local) for _ in range(state.world)]
    dist.all_gather(parts, local, group=state.group)
    return torch.cat(parts, dim=-1)


def ulysses_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attention_mask: torch.Tensor | None, dropout: float = 0.0,
                              scaling: float | None = None, is_causal: bool | None = None,
                              **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature: ``query`` (B, H, t, D), ``key``/``value`` (B, H_kv, t, D) of
    this rank's shard (RoPE applied); returns ((B, t, H, D), None) with every query attending causally to the
    full row (within its document for packed rows). See the module docstring."""
    state = current()
    if state is None or state.world == 1:
        return sdpa_varlen_attention_forward(module, query, key, value, attention_mask, dropout=dropout,
                                             scaling=scaling, is_causal=is_causal, **kwargs)
    B, H, t, D = query.shape
    if key.shape[2] != t:
        raise ValueError(f"{SP_ULYSSES} is training attention over sharded rows: keys of length {key.shape[2]} "
                         f"but queries of length {t} (no cache); allowed: equal lengths")
    if attention_mask is not None and attention_mask.ndim == 4:
        raise ValueError(f"{SP_ULYSSES} got a 4-D attention mask of shape {tuple(attention_mask.shape)}, which "
                         "covers one shard only; allowed: an all-ones 2-D mask (one document per row), None "
                         "(packed rows restarting at 0) or cu_seq_lens_q/k kwargs over the full rows")
    if attention_mask is not None and not bool(attention_mask.all()):
        raise ValueError(f"{SP_ULYSSES} does not support padding masks; allowed: an all-ones 2-D mask or None")
    if not (is_causal if is_causal is not None else getattr(module, "is_causal", True)):
        raise ValueError(f"attn_implementation={SP_ULYSSES!r} computes causal attention only; got is_causal=False")
    world, T = state.world, t * state.world
    groups = H // key.shape[1]
    if key.shape[1] % world:  # too few kv heads to split: repeat them to the query heads
        key, value = key.repeat_interleave(groups, dim=1), value.repeat_interleave(groups, dim=1)
        groups = 1
    order = torch.as_tensor(gathered_order(T, world, state.layout), device=query.device)
    natural = state.layout != "contiguous"
    inverse = torch.argsort(order) if natural else None
    q, k, v = (seq_to_head(x, state.group, world) for x in (query, key, value))
    if natural:
        q, k, v = q[:, :, inverse], k[:, :, inverse], v[:, :, inverse]
    cu = kwargs.get("cu_seq_lens_q")
    if cu is None and attention_mask is None and kwargs.get("position_ids") is not None:
        full = _full_positions(kwargs["position_ids"], state, B, t)
        cu = cu_seqlens(full[:, inverse] if natural else full)
    gqa = groups > 1
    if cu is None or torch.equal(cu.cpu().long(), torch.arange(0, B * T + 1, T)):
        out = F.scaled_dot_product_attention(q, k, v, dropout_p=dropout, is_causal=True, scale=scaling,
                                             enable_gqa=gqa).transpose(1, 2)
    else:
        out = varlen_sdpa(q, k, v, cu, dropout, scaling, gqa)  # (B, T, h, D)
    out = out.transpose(1, 2)  # (B, h, T, D) in row order
    if natural:
        out = out[:, :, order]
    return head_to_seq(out.contiguous(), state.group, world).transpose(1, 2).contiguous(), None


def register() -> str:
    """Register :data:`SP_ULYSSES` in transformers' attention and mask registries (idempotent); returns the name
    for ``attn_implementation=`` or ``model.set_attn_implementation``."""
    AttentionInterface.register(SP_ULYSSES, ulysses_attention_forward)
    AttentionMaskInterface.register(SP_ULYSSES, doc_mask)
    return SP_ULYSSES
