"""Ordering a step's micro-batches by their attention cost, sum of squared document lengths (ProLong App. A.3).

With document masking and a variable-length attention kernel, a micro-batch's attention costs about the sum over
its documents of (length)^2, so rows of the same length differ a lot in time: a row holding one 64K document costs
far more than a row of a hundred short ones. ProLong sorts the micro-batches of each step by ``-sum(len^2)``
(its ``SortByLengthDataset``); data-parallel workers then meet micro-batches of similar cost in the same
accumulation round and wait less for the slowest one (:mod:`repro.bench.reorder_sim`). The order changes no
gradient (the accumulated gradient is a sum).

Documents are the runs of equal ``doc_ids`` in a row (:func:`repro.attention.spans.doc_spans`; the whole row without
``doc_ids``); padding is no document here, as in ProLong's key (the lengths of the packed sequences), although
``sdpa_varlen`` (:mod:`repro.attention.doc_masked`) computes a row's padding tail as one more document
(:class:`repro.bench.reorder_sim.CostModel` says what that leaves out of the modelled cost).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from repro.attention.spans import doc_spans


def as_numpy(x) -> np.ndarray:
    """A numpy view of an array or a (CPU-copied) tensor."""
    return np.asarray(x.detach().cpu() if hasattr(x, "detach") else x)


def padding_mask(batch: Mapping, pad_id: int | None = None) -> np.ndarray:
    """(rows, T) True at padding tokens: where the batch's ``attention_mask`` is 0 (packed rows carry one). A batch
    without one: with ``pad_id``, the tokens equal to it (an EOS that is also the pad token counts as padding);
    without, the convention of :func:`repro.data.packing.pack_rows`: the last segment of a row (by ``doc_ids``;
    without them, the trailing run of tokens) when none of its tokens has a target weight; a real last document
    with no weighted target is then counted as padding."""
    ids = as_numpy(batch["input_ids"])
    if batch.get("attention_mask") is not None:
        return as_numpy(batch["attention_mask"]) == 0
    if pad_id is not None:
        return ids == pad_id
    zero = as_numpy(batch["weights"]) == 0
    pad = np.zeros(ids.shape, dtype=bool)
    if "doc_ids" in batch:
        for r, row in enumerate(doc_spans(doc_ids=as_numpy(batch["doc_ids"]))):
            start = row[-1][0]
            pad[r, start:] = zero[r, start:].all()
    else:
        for r in range(ids.shape[0]):
            nz = np.flatnonzero(~zero[r])
            pad[r, (nz[-1] + 1 if len(nz) else 0):] = True
    return pad


def document_lengths(doc_ids: np.ndarray | None, padding: np.ndarray) -> list[np.ndarray]:
    """Per row, the lengths of its documents: runs of equal consecutive ``doc_ids`` (the whole row when None),
    padding tokens (``padding``, (rows, T) bool) not counted."""
    keep = ~as_numpy(padding)
    if doc_ids is None:
        return [np.array([int(k.sum())] if k.any() else [], dtype=np.int64) for k in keep]
    out = []
    for k, row in zip(keep, doc_spans(doc_ids=as_numpy(doc_ids))):
        lengths = np.array([int(k[s:e].sum()) for s, e in row], dtype=np.int64)
        out.append(lengths[lengths > 0])
    return out


def sum_sq_lengths(batch: Mapping, pad_id: int | None = None) -> int:
    """sum over the batch's documents of (length)^2: the attention cost of a variable-length kernel."""
    lengths = document_lengths(batch.get("doc_ids"), padding_mask(batch, pad_id))
    return int(sum(int((x.astype(np.int64) ** 2).sum()) for x in lengths))


def tokens(batch: Mapping) -> int:
    """Every token position of the batch, padding included (the linear layers run on each)."""
    return int(np.prod(as_numpy(batch["input_ids"]).shape))


def order_by_cost(batches: Sequence[Mapping], pad_id: int | None = None) -> list[int]:
    """Indices of ``batches`` in descending order of :func:`sum_sq_lengths` (ProLong's sort by ``-sum(len^2)``;
    stable: ties keep their order)."""
    keys = [sum_sq_lengths(b, pad_id) for b in batches]
    return sorted(range(len(batches)), key=lambda i: -keys[i])
