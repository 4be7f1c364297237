"""Named token streams: a source's documents read as one endless, seeded sequence (ProLong §3, §6).

A :class:`TokenStream` holds a source's tokenized documents. Epoch ``e`` is the documents in a seeded order
(a permutation drawn from ``(seed, stream name, e)``) concatenated; the streams run epoch after epoch. Row
``k`` of ``length`` tokens is the slice ``[k * length, (k + 1) * length)`` of that sequence, cut into one
:class:`~repro.data.packing.Segment` per document piece (positions restart per piece: document masking). A
document longer than a row continues in the next row of the stream, as ProLong cuts its 64K sequences from
long documents; short documents share a row, as ProLong packs them.

Row ``k`` is a pure function of ``(documents, seed, k)``: a run resumed mid-epoch, or rows built in parallel
workers, read exactly the rows an uninterrupted reader would. Every document is read once per epoch.

:class:`TaskStream` is the testbed's retrieval rows (:class:`repro.data.synthetic.RetrievalRows`) behind the
same interface, so the mixing layer (:mod:`repro.data.mixing`) can give them a share of the rows.
"""

from __future__ import annotations

import zlib
from functools import lru_cache
from pathlib import Path
from typing import Protocol, Sequence

import numpy as np

from repro.data.packing import Segment
from repro.io import read_json


class Stream(Protocol):
    """What the mixing layer reads: the ``k``-th row of a named source, a pure function of ``k``."""

    name: str

    def row(self, k: int, length: int) -> list[Segment]:
        """The stream's ``k``-th row of at most ``length`` tokens, as its document pieces."""


class TokenStream:
    """Documents of one source as an endless seeded sequence of rows (see the module docstring).

    ``documents``: token-id arrays, one per document (empty ones are dropped); ``weight``: loss weight of the
    tokens (the first token of each piece is never a target: :func:`repro.data.packing.pack_rows`).
    """

    def __init__(self, name: str, documents: Sequence[np.ndarray], seed: int = 0, weight: float = 1.0):
        docs = [np.asarray(d, dtype=np.int64) for d in documents if len(d)]
        if not docs:
            raise ValueError(f"stream {name!r} holds no documents; allowed: at least one non-empty document")
        self.name, self.seed, self.weight = name, int(seed), float(weight)
        self.tokens = np.concatenate(docs)
        self.lengths = np.array([len(d) for d in docs], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(self.lengths)]).astype(np.int64)
        self.epoch_tokens = int(self.offsets[-1])
        self._salt = zlib.crc32(name.encode())
        self._order = lru_cache(maxsize=4)(self._epoch_order)

    def _epoch_order(self, epoch: int) -> tuple[np.ndarray, np.ndarray]:
        """Epoch ``epoch``'s document order and the cumulative token ends along it."""
        order = np.random.default_rng([self.seed, self._salt, epoch]).permutation(len(self.lengths))
        return order, np.cumsum(self.lengths[order])

    def row(self, k: int, length: int) -> list[Segment]:
        if k < 0 or length < 1:
            raise ValueError(f"row k={k}, length={length}; allowed: k >= 0, length >= 1")
        return self.pieces(k * length, length)

    def pieces(self, start: int, length: int) -> list[Segment]:
        """Tokens ``[start, start + length)`` of the stream, one segment per document piece."""
        out: list[Segment] = []
        g, need = start, length
        while need > 0:
            epoch, off = divmod(g, self.epoch_tokens)
            order, ends = self._order(epoch)
            i = int(np.searchsorted(ends, off, side="right"))
            doc = int(order[i])
            in_doc = off - int(ends[i] - self.lengths[doc])
            take = min(need, int(self.lengths[doc]) - in_doc)
            a = int(self.offsets[doc]) + in_doc
            toks = self.tokens[a:a + take]
            out.append(Segment(toks.copy(), np.full(take, self.weight, dtype=np.float32)))
            g += take
            need -= take
        return out


class TaskStream:
    """The testbed's retrieval rows as a stream: row ``k`` is drawn with a generator seeded by ``(seed, k)``."""

    def __init__(self, name: str, retrieval, seed: int = 0, salt: int = 7):
        self.name, self.retrieval, self.seed, self.salt = name, retrieval, int(seed), int(salt)

    def row(self, k: int, length: int) -> list[Segment]:
        rng = np.random.default_rng([self.seed, self.salt, k])
        self.retrieval.eligible(length)
        return [self.retrieval.segment(rng, length)]


def merge_pieces(pieces: Sequence[Segment]) -> Segment:
    """One segment from a row's document pieces: the documents attend to each other (no document mask), with
    positions ``0..n-1`` over the row (ProLong's "w/o document masks": documents concatenated, each starting
    with the document separator, full causal attention). The targets are those of the masked row: the first token
    of each piece is not predicted."""
    if not pieces:
        raise ValueError("merge_pieces needs at least one segment")
    toks = np.concatenate([p.tokens for p in pieces])
    # the first token of every piece stays a non-target, as in the masked row: both see the same targets
    w = np.concatenate([np.r_[np.zeros(1, np.float32), p.weights[1:]] for p in pieces]).astype(np.float32)
    answers = [p.answer if p.answer is not None else np.zeros(len(p.tokens), dtype=bool) for p in pieces]
    has_answer = any(p.answer is not None for p in pieces)
    return Segment(toks, w, None, np.concatenate(answers) if has_answer else None)


def save_stream(folder, name: str, documents: Sequence[np.ndarray]) -> None:
    """Write one stream's documents into ``folder`` as ``<name>.tokens.npy`` (int32, concatenated) and
    ``<name>.lengths.npy`` (int64). A stream folder also holds ``manifest.json`` whose ``sources`` object names its
    streams (:func:`stream_names`); :func:`load_streams` reads the folder back."""
    folder = Path(folder)
    np.save(folder / f"{name}.tokens.npy", np.concatenate(documents).astype(np.int32), allow_pickle=False)
    np.save(folder / f"{name}.lengths.npy", np.array([len(d) for d in documents], dtype=np.int64), allow_pickle=False)


def stream_names(folder) -> list[str]:
    """The streams of a stream folder, in its manifest's order (the order a mixture draws them in)."""
    return list(read_json(Path(folder) / "manifest.json")["sources"])


def load_streams(folder, seed: int, names: Sequence[str] | None = None) -> list[TokenStream]:
    """The :class:`TokenStream` of each stream of a stream folder (``names``, default :func:`stream_names`),
    drawn with ``seed``."""
    folder, out = Path(folder), []
    for name in stream_names(folder) if names is None else names:
        toks = np.load(folder / f"{name}.tokens.npy", allow_pickle=False).astype(np.int64)
        ends = np.cumsum(np.load(folder / f"{name}.lengths.npy", allow_pickle=False))
        out.append(TokenStream(name, np.split(toks, ends[:-1]), seed=seed))
    return out
