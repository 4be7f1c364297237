"""Document-masked attention that only computes each document's own block (ProLong App. A.3, Table 15).

With packed rows (:mod:`repro.data.packing`) and sdpa, transformers builds a dense (T, T) block-diagonal causal
mask and the kernel computes every masked-out block only to discard it. ProLong trains with flash-attn's
variable-length kernel, which attends within each document alone. This module is that kernel's CPU stand-in,
plugged in through transformers' public registries only (no transformers code is patched):

* :data:`SDPA_VARLEN` (``"sdpa_varlen"``) in ``AttentionInterface``: :func:`sdpa_varlen_attention_forward`
  gathers the documents of the batch into a few length buckets (documents sorted by length; a bucket takes
  documents down to :data:`BUCKET_FILL` of its longest, padded at their end) and runs one causal
  ``scaled_dot_product_attention`` per bucket: a padded key comes after every real query of its document, so
  causality alone keeps it out; the padded queries' outputs are dropped. Scaling, training dropout and GQA
  (``enable_gqa`` or repeated kv heads, as transformers' sdpa path decides) are as in
  ``sdpa_attention_forward``, and so is the output: ``((B, T, heads, head_dim), None)``.
* The same name in ``AttentionMaskInterface``: :func:`doc_mask` returns None for packed training rows (no 2-D
  mask, no cache), so no (T, T) mask exists at all; an all-ones 2-D mask comes back as is, an O(T) marker that
  the row is one document (the fully causal rows of :func:`repro.models.forward`, whose position jumps are not
  boundaries); anything else (padding, a cache) gets transformers' own sdpa mask and the dense sdpa path.

How the boundaries reach the attention function: transformers 5.23 passes ``position_ids`` from ``model(...)``
down to every attention call (``LlamaDecoderLayer`` forwards them in its kwargs), so the restarts at 0 that
packing writes are enough: :func:`repro.models.forward` needs no change for this implementation. Explicit
``cu_seq_lens_q/k`` and ``max_length_q/k`` passed to ``model(...)`` (flash-attn varlen's public kwargs,
:func:`repro.attention.spans.varlen_kwargs`) take precedence, over the rows laid end to end.

On GPUs the same masking is ``flash_attention_2`` (:func:`doc_masked_implementation`); transformers reads
packing from ``position_ids`` there only for batch 1, so :func:`boundary_kwargs` gives
:func:`repro.models.forward` the ``cu_seq_lens`` kwargs for any batch.

PyTorch flex attention with a block mask per document is ``flex_doc`` (:mod:`repro.attention.flex`), also
accepted by :func:`check_attn_implementation`. :func:`doc_masked_implementation` picks per device: on CUDA
``flash_attention_2`` when flash-attn is installed, else ``flex_doc``; on the CPU this module's ``sdpa_varlen``,
since torch 2.13's flex attention refuses the backward on the CPU (``NotImplementedError: FlexAttention does not
support backward on CPU``) and its compiled forward was slower than this function's here (0.78x and 1.10x of full
attention's forward tokens/s on rows of 1024 and 4096 tokens, against 1.05x and 1.45x: :mod:`repro.attention.flex`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations import sdpa_attention  # the module: use_gqa_in_sdpa looked up at each call
from transformers.integrations.sdpa_attention import repeat_kv, sdpa_attention_forward

from repro.accel import flash_attn_available
from repro.attention.flex import FLEX_DOC, flex_compiles
from repro.attention.flex import register as register_flex
from repro.attention.spans import doc_mask, document_route, varlen_kwargs
from repro.devices import resolve_device

SDPA_VARLEN = "sdpa_varlen"
"""Name of the per-document sdpa attention in transformers' attention and mask registries."""
BUCKET_FILL = 0.8
"""A length bucket takes documents down to this fraction of its longest one (1.0: equal lengths only; 0: one
bucket padded to the longest document). 0.7-0.85 were the fastest forward + backward on rows of documents of
50-400 tokens; the result does not depend on it."""
FLASH_IMPLEMENTATIONS = ("flash_attention_2", "flash_attention_3", "flash_attention_4")
"""transformers' flash-attn implementations, which take the boundaries as ``cu_seq_lens`` kwargs."""
ATTN_IMPLEMENTATIONS = ("sdpa", "eager", "flash_attention_2", "sdpa_varlen", "flex_doc")
"""Attention implementations a model may be loaded with; ``sdpa_varlen`` is :data:`SDPA_VARLEN` and ``flex_doc``
:data:`repro.attention.flex.FLEX_DOC` (each registered in transformers' registries when checked,
:func:`check_attn_implementation`)."""


@dataclass(frozen=True)
class Bucket:
    """Documents of similar length attended in one call."""

    index: torch.Tensor
    """(G, L) long: token index (in the rows laid end to end) of each slot; a document shorter than ``L``
    repeats its last token in its padding slots."""
    valid: torch.Tensor | None
    """(G, L) bool: real slots; None when every document of the bucket has ``L`` tokens."""


@dataclass(frozen=True)
class VarlenPlan:
    """How :func:`varlen_sdpa` gathers the documents and puts the outputs back."""

    buckets: tuple[Bucket, ...]
    """Length buckets, longest documents first."""
    inverse: torch.Tensor
    """(N,) long: where each token's output lies in the buckets' real slots concatenated."""


def varlen_plan(cu: torch.Tensor, fill: float = BUCKET_FILL) -> VarlenPlan:
    """The buckets of the documents ``[cu[i], cu[i+1])`` (int cumulative lengths, 0 first, every length >= 1)."""
    if not 0.0 <= fill <= 1.0:
        raise ValueError(f"fill={fill!r}; allowed: 0 <= fill <= 1")
    bounds = cu.tolist()
    if len(bounds) < 2 or bounds[0] != 0 or any(b <= a for a, b in zip(bounds, bounds[1:])):
        raise ValueError(f"cu_seqlens {bounds[:8]}{'...' if len(bounds) > 8 else ''}; allowed: 0 first, then "
                         "strictly increasing (every document has at least one token)")
    starts, lens = bounds[:-1], [b - a for a, b in zip(bounds, bounds[1:])]
    order = sorted(range(len(lens)), key=lambda i: -lens[i])
    groups: list[list[int]] = []
    for i in order:
        if not groups or lens[i] < fill * lens[groups[-1][0]]:
            groups.append([])
        groups[-1].append(i)
    buckets, dests = [], []
    for g in groups:
        st = torch.tensor([starts[i] for i in g])
        ln = torch.tensor([lens[i] for i in g])
        slot = torch.arange(int(ln[0]))
        index = st[:, None] + torch.minimum(slot[None], ln[:, None] - 1)
        valid = slot[None] < ln[:, None]
        full = bool(valid.all())
        buckets.append(Bucket(index.to(cu.device), None if full else valid.to(cu.device)))
        dests.append(index.flatten() if full else index[valid])
    return VarlenPlan(tuple(buckets), torch.argsort(torch.cat(dests)).to(cu.device))


def varlen_sdpa(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor,
                dropout: float = 0.0, scaling: float | None = None, enable_gqa: bool = False,
                fill: float = BUCKET_FILL) -> torch.Tensor:
    """Causal attention within each document ``[cu[i], cu[i+1])`` of the rows laid end to end. ``query``
    (B, H, T, D), ``key``/``value`` (B, H_kv, T, D) with ``H_kv == H`` unless ``enable_gqa``; returns
    (B, T, H, D), contiguous."""
    B, H, T, D = query.shape
    if int(cu[-1]) != B * T:
        raise ValueError(f"cu_seqlens ends at {int(cu[-1])}; allowed: B * T = {B * T} (the rows laid end to end)")
    plan = varlen_plan(cu, fill)

    def tokens(x: torch.Tensor) -> torch.Tensor:  # (B, h, T, d) -> (B * T, h, d)
        return x.transpose(1, 2).reshape(B * T, x.shape[1], x.shape[-1])

    q, k, v = tokens(query), tokens(key), tokens(value)
    outs = []
    for b in plan.buckets:
        o = F.scaled_dot_product_attention(q[b.index].transpose(1, 2), k[b.index].transpose(1, 2),
                                           v[b.index].transpose(1, 2), dropout_p=dropout, is_causal=True,
                                           scale=scaling, enable_gqa=enable_gqa).transpose(1, 2)
        outs.append(o.reshape(-1, H, o.shape[-1]) if b.valid is None else o[b.valid])
    return torch.cat(outs)[plan.inverse].view(B, T, H, -1)


def sdpa_varlen_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                                  value: torch.Tensor, attention_mask: torch.Tensor | None, dropout: float = 0.0,
                                  scaling: float | None = None, is_causal: bool | None = None,
                                  **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature. With no mask (:func:`doc_mask`'s answer for packed rows) and
    ``q_len == kv_len > 1``, causal attention within each document, the boundaries from ``cu_seq_lens_q/k`` or
    the restarts of ``position_ids``; otherwise (a 4-D mask, the 2-D one-document marker, a cache) exactly
    transformers' ``sdpa_attention_forward``."""
    def dense(mask):
        return sdpa_attention_forward(module, query, key, value, mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)

    route, found = document_route(module, query, key, attention_mask, is_causal, kwargs, SDPA_VARLEN)
    if route == "dense":
        return dense(found)
    cu = found
    groups = getattr(module, "num_key_value_groups", 1)
    gqa = groups > 1 and sdpa_attention.use_gqa_in_sdpa(None, key, value)
    if groups > 1 and not gqa:
        key, value = repeat_kv(key, groups), repeat_kv(value, groups)
    return varlen_sdpa(query, key, value, cu, dropout, scaling, gqa), None


def register() -> str:
    """Register :data:`SDPA_VARLEN` in transformers' attention and mask registries (idempotent); returns the
    name, for ``attn_implementation=`` or ``model.set_attn_implementation``."""
    AttentionInterface.register(SDPA_VARLEN, sdpa_varlen_attention_forward)
    AttentionMaskInterface.register(SDPA_VARLEN, doc_mask)
    return SDPA_VARLEN


def check_attn_implementation(name: str) -> str:
    """Return ``name`` if it can run here (registering :data:`SDPA_VARLEN` or :data:`FLEX_DOC` when asked), else
    raise with the install hint."""
    if name not in ATTN_IMPLEMENTATIONS:
        raise ValueError(f"attn_implementation={name!r}; allowed: {', '.join(ATTN_IMPLEMENTATIONS)}")
    if name == SDPA_VARLEN:
        return register()
    if name == FLEX_DOC:
        return register_flex()
    if name == "flash_attention_2" and not flash_attn_available():
        raise RuntimeError("attn_implementation='flash_attention_2' needs a CUDA GPU and the flash-attn package "
                           "(pip install -r requirements-gpu.txt --no-build-isolation); use 'sdpa' on CPU")
    return name


def doc_masked_implementation(device: str | torch.device | None = None) -> str:
    """The attention implementation that computes each packed document alone and trains on ``device`` (a device
    or its type; None or ``auto``: where training goes by default, :func:`repro.devices.resolve_device`), the
    first available of:

    * CUDA: ``flash_attention_2`` when flash-attn is installed (:func:`repro.accel.flash_attn_available`; the
      kernel ProLong trained with), else :data:`FLEX_DOC` (flex attention with a block mask,
      :mod:`repro.attention.flex`) when this torch compiles it (triton), else :data:`SDPA_VARLEN`. The two CUDA
      kernels were not timed against each other here (no GPU); ``python -m repro.bench.doc_attention`` does on one;
    * the CPU: :data:`SDPA_VARLEN`. flex attention has no CPU backward in torch 2.13, so :data:`FLEX_DOC` cannot
      train there, and its compiled forward was slower than this one's on rows of 1024 and 4096 tokens
      (:mod:`repro.bench.doc_attention`).

    The chosen one is registered; its name is returned."""
    if (resolve_device("auto") if device in (None, "auto") else torch.device(device)).type == "cuda":
        if flash_attn_available():
            return "flash_attention_2"
        if flex_compiles("cuda"):
            return register_flex()
    return register()


def use_doc_masked_attention(model: torch.nn.Module, device: str | torch.device | None = None) -> torch.nn.Module:
    """Switch ``model`` to :func:`doc_masked_implementation` for ``device`` (None: where training goes by
    default; a model still on the CPU is moved there by the trainer) through its public
    ``set_attn_implementation``; returns it."""
    model.set_attn_implementation(doc_masked_implementation(device))
    return model


def boundary_kwargs(model: torch.nn.Module, position_ids: torch.Tensor) -> dict:
    """Extra ``model(...)`` kwargs that carry packed rows' boundaries to the model's attention: flash-attn's
    ``cu_seq_lens_q/k`` and ``max_length_q/k`` (:func:`repro.attention.spans.varlen_kwargs`) for the
    flash implementations, which read ``position_ids`` only at batch 1; nothing for the others
    (:data:`SDPA_VARLEN` reads ``position_ids``, sdpa and eager get transformers' mask)."""
    name = getattr(getattr(model, "config", None), "_attn_implementation", None)
    return varlen_kwargs(position_ids) if name in FLASH_IMPLEMENTATIONS else {}
