"""Document boundaries of packed rows, in the forms attention kernels take them.

A packed row (:func:`repro.data.packing.pack_rows`) restarts its ``position_ids`` at 0 at every document (and at
its padding tail, which is a document of its own). From those restarts (or from ``doc_ids``):

* :func:`doc_spans`: per row, the ``[start, end)`` of each document;
* :func:`cu_seqlens`: the int32 cumulative lengths over the rows laid end to end (``B * T`` tokens) that
  flash-attn's variable-length kernel takes (``cu_seqlens_q/k``), starting at 0 and ending at ``B * T``;
* :func:`varlen_kwargs`: those as the keyword arguments transformers forwards from ``model(...)`` to the
  attention function (``cu_seq_lens_q/k``, ``max_length_q/k``);
* :func:`packed_boundaries`: what a per-document attention function reads back inside the model (those kwargs,
  else the restarts of the ``position_ids`` transformers forwards to it);
* :func:`doc_mask`: the mask function the per-document implementations (``sdpa_varlen``, ``flex_doc``,
  ``sp_ulysses``) register in transformers' ``AttentionMaskInterface``: no mask at all for packed rows.

A document starts at the first token of a row and wherever the position id is 0, as flash-attn's convention
in transformers (``prepare_fa_kwargs_from_position_ids``) reads it; a jump to a nonzero position is not a
boundary.
"""

from __future__ import annotations

import numpy as np
import torch
from transformers.masking_utils import sdpa_mask


def _as_2d(x, name: str) -> torch.Tensor:
    t = torch.as_tensor(np.asarray(x)) if not isinstance(x, torch.Tensor) else x
    if t.ndim == 1:
        t = t[None]
    if t.ndim != 2 or t.shape[-1] < 1 or t.dtype.is_floating_point or t.dtype == torch.bool:
        raise ValueError(f"{name} of shape {tuple(t.shape)} and dtype {t.dtype}; allowed: integer ids of shape "
                         "(rows, T) or (T,), T >= 1")
    return t


def starts_mask(position_ids=None, doc_ids=None) -> torch.Tensor:
    """(B, T) bool: True at the first token of each document. Give exactly one of ``position_ids`` (a document
    starts at each 0) or ``doc_ids`` (a document starts where the id changes); the first token of a row always
    starts one."""
    if (position_ids is None) == (doc_ids is None):
        raise ValueError("give exactly one of position_ids or doc_ids; "
                         f"got position_ids={'set' if position_ids is not None else None}, "
                         f"doc_ids={'set' if doc_ids is not None else None}")
    if position_ids is not None:
        new = _as_2d(position_ids, "position_ids") == 0
    else:
        ids = _as_2d(doc_ids, "doc_ids")
        new = torch.ones_like(ids, dtype=torch.bool)
        new[:, 1:] = ids[:, 1:] != ids[:, :-1]
    new = new.clone()
    new[:, 0] = True
    return new


def doc_spans(position_ids=None, doc_ids=None) -> list[list[tuple[int, int]]]:
    """Per row, the ``[start, end)`` of each document in order (they tile the row). Exactly one of
    ``position_ids`` or ``doc_ids``, shaped (B, T) or (T,) (one row), tensors or arrays."""
    new = starts_mask(position_ids, doc_ids).cpu()
    T = new.shape[-1]
    out = []
    for row in new:
        starts = row.nonzero().flatten().tolist()
        out.append(list(zip(starts, starts[1:] + [T])))
    return out


def cu_seqlens(position_ids=None, doc_ids=None) -> torch.Tensor:
    """int32 cumulative document lengths over the rows laid end to end: ``[0, end_1, ..., B * T]`` (a row
    boundary is always a document boundary), on the ids' device; flash-attn varlen's ``cu_seqlens``."""
    new = starts_mask(position_ids, doc_ids).flatten()
    total = torch.tensor([new.numel()], dtype=torch.int32, device=new.device)
    return torch.cat([new.nonzero().flatten().to(torch.int32), total])


def varlen_kwargs(position_ids=None, doc_ids=None) -> dict:
    """Keyword arguments for ``model(...)`` that carry the document boundaries to the attention function
    (``cu_seq_lens_q``, ``cu_seq_lens_k``: :func:`cu_seqlens`; ``max_length_q``, ``max_length_k``: the longest
    document, an int), as transformers' flash-attention path reads them."""
    cu = cu_seqlens(position_ids, doc_ids)
    longest = int(cu.diff().max())
    return {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}


def packed_boundaries(position_ids: torch.Tensor | None, B: int, T: int, kwargs: dict,
                      name: str = "this implementation") -> torch.Tensor | None:
    """The :func:`cu_seqlens` of the rows an attention function gets (``B`` rows of ``T`` tokens): explicit
    ``cu_seq_lens_q/k`` in ``kwargs`` first (they must be equal: self-attention), else the restarts of
    ``position_ids`` (broadcast to (B, T)); None without either. ``name`` (the implementation) is for the error."""
    cu_q, cu_k = kwargs.get("cu_seq_lens_q"), kwargs.get("cu_seq_lens_k")
    if cu_q is not None or cu_k is not None:
        if cu_q is None or (cu_k is not None and not torch.equal(cu_q, cu_k)):
            raise ValueError(f"{name} is self-attention: cu_seq_lens_k must equal cu_seq_lens_q (or be "
                             "left out); got " + ("no cu_seq_lens_q" if cu_q is None else "different tensors"))
        return cu_q
    if position_ids is None:
        return None
    return cu_seqlens(position_ids.expand(B, T))


def doc_mask(batch_size: int, q_length: int, kv_length: int, q_offset: int = 0, kv_offset: int = 0,
             attention_mask: torch.Tensor | None = None, **kwargs):
    """The mask function of the per-document attention implementations (transformers' mask-interface
    signature): None for packed training rows (no 2-D mask, no cache: the attention reads the boundaries itself,
    :func:`packed_boundaries`); an all-ones 2-D mask as is, O(T), marking one document per row; otherwise
    transformers' ``sdpa_mask``."""
    plain = q_length == kv_length and not _nonzero(q_offset) and not _nonzero(kv_offset)
    if plain and attention_mask is None:
        return None
    if plain and attention_mask.ndim == 2 and attention_mask.shape[-1] == kv_length and bool(attention_mask.all()):
        return attention_mask
    return sdpa_mask(batch_size=batch_size, q_length=q_length, kv_length=kv_length, q_offset=q_offset,
                     kv_offset=kv_offset, attention_mask=attention_mask, **kwargs)


def _nonzero(x) -> bool:
    return bool(x != 0) if x is not None else False


def document_route(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor, attention_mask, is_causal,
                   kwargs: dict, name: str) -> tuple[str, torch.Tensor | None]:
    """Where a per-document attention function sends a call: ``("dense", mask)`` for transformers' own sdpa (a
    4-D mask, the 2-D one-document marker -> no mask, decoding, a cache, one document per row), else
    ``("documents", cu)`` with the rows' :func:`cu_seqlens`. A non-causal module or a softcap is a ValueError
    naming ``name``."""
    if attention_mask is not None:
        return "dense", attention_mask if attention_mask.ndim == 4 else None
    B, _, T, _ = query.shape
    if T == 1 or key.shape[2] != T:
        return "dense", None
    if not (is_causal if is_causal is not None else getattr(module, "is_causal", True)):
        raise ValueError(f"attn_implementation={name!r} computes causal attention only; got is_causal=False in "
                         f"{type(module).__name__} (allowed: a causal decoder, or sdpa)")
    if kwargs.get("softcap") is not None:
        raise ValueError(f"attn_implementation={name!r} does not support softcap; use eager")
    cu = packed_boundaries(kwargs.get("position_ids"), B, T, kwargs, name)
    if cu is None or torch.equal(cu.cpu(), torch.arange(0, B * T + 1, T, dtype=cu.dtype)):
        return "dense", None  # one document per row: plain causal sdpa
    return "documents", cu
