"""Packing segments into fixed-length rows with document masking (ProLong §6.1, B.2).

A row holds several segments (documents, or chunks of a long document). Each
segment's positions restart at 0 and the first token of a segment is never a
prediction target, so nothing is learned across a boundary. Attention is kept
inside segments by the model path in :mod:`repro.models`, which passes the
restarting ``position_ids`` with ``attention_mask=None`` and ``use_cache=False``:
transformers then builds the block-diagonal causal mask itself (and uses the
variable-length flash-attention kernel on GPUs).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np


@dataclass(frozen=True)
class Segment:
    """A run of tokens that attends only to itself."""

    tokens: np.ndarray
    """Token ids (int64)."""
    weights: np.ndarray
    """Loss weight of predicting each token (index 0 is ignored: nothing precedes it)."""
    positions: np.ndarray | None = None
    """Position ids (None: ``0..len-1``). Non-contiguous ids are allowed (position transforms)."""
    answer: np.ndarray | None = None
    """Boolean mask of answer tokens (retrieval rows), used for training exact match."""

    def __post_init__(self):
        if len(self.tokens) != len(self.weights) or (
                self.positions is not None and len(self.positions) != len(self.tokens)):
            raise ValueError(f"segment arrays differ in length: tokens {len(self.tokens)}, weights {len(self.weights)}"
                             + ("" if self.positions is None else f", positions {len(self.positions)}"))


def lm_segment(tokens: Sequence[int], weight: float = 1.0) -> Segment:
    toks = np.asarray(tokens, dtype=np.int64)
    return Segment(toks, np.full(len(toks), weight, dtype=np.float32))


def pack_rows(segments: Iterable[Segment], seq_len: int, pad_id: int) -> dict[str, np.ndarray]:
    """Greedily pack segments (in order) into rows of ``seq_len`` tokens.

    Returns ``input_ids``, ``weights`` (target weight of each token), ``position_ids``,
    ``doc_ids`` (segment index inside its row; padding gets its own id),
    ``answer_group`` (index of the answer a token belongs to, -1 elsewhere) and
    ``attention_mask`` (1 on the segments' tokens, 0 on padding: HF's convention, and the only
    record of which tokens are padding, since the pad token may also be a real EOS), each of
    shape (rows, seq_len). A segment longer than ``seq_len`` is an error: split it
    first with :func:`chunk_document`.
    """
    rows: list[list[Segment]] = [[]]
    used = 0
    for seg in segments:
        n = len(seg.tokens)
        if n > seq_len:
            raise ValueError(f"segment of {n} tokens is longer than the row length seq_len={seq_len}; "
                             "allowed: <= seq_len (split long documents with chunk_document)")
        if n == 0:
            continue
        if used + n > seq_len:
            rows.append([])
            used = 0
        rows[-1].append(seg)
        used += n
    if not rows[-1]:
        rows.pop()
    out = {k: np.zeros((len(rows), seq_len), dtype=np.int64)
           for k in ("input_ids", "position_ids", "doc_ids", "attention_mask")}
    out["weights"] = np.zeros((len(rows), seq_len), dtype=np.float32)
    out["answer_group"] = np.full((len(rows), seq_len), -1, dtype=np.int64)
    group = 0
    for r, row in enumerate(rows):
        t = 0
        for d, seg in enumerate(row):
            n = len(seg.tokens)
            out["input_ids"][r, t:t + n] = seg.tokens
            w = seg.weights.astype(np.float32).copy()
            w[0] = 0.0
            out["weights"][r, t:t + n] = w
            out["position_ids"][r, t:t + n] = np.arange(n) if seg.positions is None else seg.positions
            out["doc_ids"][r, t:t + n] = d
            out["attention_mask"][r, t:t + n] = 1
            if seg.answer is not None and seg.answer.any():
                out["answer_group"][r, t:t + n][seg.answer] = group
                group += 1
            t += n
        if t < seq_len:  # padding: its own document, positions restart, no loss
            out["input_ids"][r, t:] = pad_id
            out["position_ids"][r, t:] = np.arange(seq_len - t)
            out["doc_ids"][r, t:] = len(row)
    return out


def chunk_document(tokens: Sequence[int], seq_len: int) -> list[np.ndarray]:
    """Split a long document into consecutive chunks of at most ``seq_len`` tokens."""
    toks = np.asarray(tokens, dtype=np.int64)
    return [toks[i:i + seq_len] for i in range(0, len(toks), seq_len)]


def is_packed_restart(position_ids: np.ndarray) -> bool:
    """True when every row's positions are 0..k-1 runs (pure packing, no position transform)."""
    pos = np.asarray(position_ids)
    step = np.diff(pos, axis=-1)
    return bool(np.all(pos[..., 0] == 0) and np.all((step == 1) | (pos[..., 1:] == 0)))
