"""Document boundaries of packed rows, in the forms attention kernels take them.

A packed row (:func:`repro.data.packing.pack_rows`) restarts its ``position_ids`` at 0 at every document (and at
its padding tail, which is a document of its own). From those restarts (or from ``doc_ids``):

* :func:`doc_spans`: per row, the ``[start, end)`` of each document;
* :func:`cu_seqlens`: the int32 cumulative lengths over the rows laid end to end (``B * T`` tokens) that
  flash-attn's variable-length kernel takes (``cu_seqlens_q/k``), starting at 0 and ending at ``B * T``;
* :func:`varlen_kwargs`: those as the keyword arguments transformers forwards from ``model(...)`` to the
  attention function (``cu_seq_lens_q/k``, ``max_length_q/k``).

A document starts at the first token of a row and wherever the position id is 0, as flash-attn's convention
in transformers (``prepare_fa_kwargs_from_position_ids``) reads it; a jump to a nonzero position is not a
boundary.
"""

from __future__ import annotations

import numpy as np
import torch


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
