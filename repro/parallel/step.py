"""One sequence-parallel forward on a rank's shard, with the masking policy of :func:`repro.models.forward`.

The policy is decided on the full row (:func:`row_attention`), since a shard alone cannot tell a position
jump from a document start, and carried to :data:`repro.parallel.ulysses.SP_ULYSSES` attention by
:func:`shard_forward`:

* ``"causal"`` (one document per row, any position ids: PoSE, LongRecipe, skip views): an all-ones 2-D mask;
* ``"restarts"`` (packed rows whose positions restart at 0 exactly at each document): no mask, and the
  attention all-gathers the full rows' position ids and attends within each document;
* a cumulative-length tensor (packed rows with transformed positions): the full rows' document boundaries
  as ``cu_seq_lens_q/k`` kwargs.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch

from repro.attention.spans import cu_seqlens
from repro.data.packing import is_packed_restart


def row_attention(batch: Mapping) -> str | torch.Tensor:
    """``"causal"``, ``"restarts"`` or the int32 ``cu_seqlens`` of the full rows ``batch`` (``doc_ids`` and
    ``position_ids``, shaped (rows, T)); see the module docstring."""
    doc = batch.get("doc_ids")
    if doc is None:
        return "causal"
    doc = np.asarray(doc).reshape(-1, np.asarray(doc).shape[-1])
    if bool((doc == doc[:, :1]).all()):
        return "causal"
    pos = batch.get("position_ids")
    cu = cu_seqlens(doc_ids=doc)
    if pos is not None:
        pos = np.asarray(pos).reshape(doc.shape)
        if is_packed_restart(pos) and torch.equal(cu_seqlens(position_ids=pos), cu):
            return "restarts"
    return cu


def attention_kwargs(attention: str | torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor | None, dict]:
    """``(attention_mask, kwargs)`` of a shard's decoder call for :func:`row_attention`'s answer ``attention``
    (``ids``: the shard's (rows, t) token ids, shaping the all-ones mask)."""
    if isinstance(attention, str):
        if attention not in ("causal", "restarts"):
            raise ValueError(f"attention={attention!r}; allowed: 'causal', 'restarts' or a cu_seqlens tensor")
        return (torch.ones_like(ids) if attention == "causal" else None), {}
    cu = attention.to(ids.device)
    longest = int(cu.diff().max())
    return None, {"cu_seq_lens_q": cu, "cu_seq_lens_k": cu, "max_length_q": longest, "max_length_k": longest}


def shard_forward(model: torch.nn.Module, shard: Mapping, attention: str | torch.Tensor):
    """Run ``model`` (attention :data:`~repro.parallel.ulysses.SP_ULYSSES`, inside
    :func:`~repro.parallel.ulysses.sequence_parallel`) on a shard from :func:`repro.parallel.sequence.shard_row`
    (``input_ids``, ``position_ids`` of shape (rows, t)) with :func:`row_attention`'s answer for the full rows;
    returns the HF output (logits of the shard's tokens)."""
    device = next(model.parameters()).device
    ids = torch.as_tensor(np.asarray(shard["input_ids"]), device=device)
    pos = torch.as_tensor(np.asarray(shard["position_ids"]), device=device)
    mask, kwargs = attention_kwargs(attention, ids)
    return model(input_ids=ids, position_ids=pos, attention_mask=mask, use_cache=False, **kwargs)
