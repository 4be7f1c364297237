"""ProLong's training rows (§3-§6): a mixture of named streams, packed with or without document masks.

Each row of a step is one stream's row (:class:`repro.data.mixing.Mixture`): a window of a long document
(code repositories, books), several short documents packed (ShortMix), or a testbed task row. With document
masks (``doc_masks=True``, ProLong's default) each document piece is its own segment: positions restart and
attention stays inside it (:func:`repro.data.packing.pack_rows`; on CPU, :mod:`repro.attention` computes only
the in-document blocks). Without, the pieces are concatenated into one segment (documents separated by their
BOS token, full causal attention across them), with the same prediction targets
(:func:`repro.data.streams.merge_pieces`).

The method's state counts rows and tokens per stream (``rows_<stream>``, ``tokens_<stream>``): the mix actually
trained on (PL-Tab3).
"""

from __future__ import annotations

import numpy as np

from repro.data.mixing import Mixture
from repro.data.packing import pack_rows
from repro.data.streams import merge_pieces


class ProLongMix:
    """``batch_size`` rows of ``length`` tokens a step from ``mixture`` (see the module docstring)."""

    def __init__(self, name: str, mixture: Mixture, length: int, batch_size: int, pad_id: int,
                 doc_masks: bool = True):
        if length < 2 or batch_size < 1:
            raise ValueError(f"length={length}, batch_size={batch_size}; allowed: length >= 2, batch_size >= 1")
        self.name, self.mixture, self.length, self.batch_size = name, mixture, int(length), int(batch_size)
        self.pad_id, self.doc_masks = int(pad_id), bool(doc_masks)
        self.stats: dict[str, int] = {"rows": 0, "tokens": 0}

    def state_dict(self) -> dict:
        return dict(self.stats)

    def load_state_dict(self, state: dict) -> None:
        self.stats = {k: int(v) for k, v in state.items()}

    def finished(self, step: int) -> bool:
        return False

    def observe(self, step: int, metrics: dict) -> None:
        pass

    def batch(self, step: int) -> dict[str, np.ndarray]:
        rows = []
        for stream, pieces in self.mixture.step_rows(step, self.batch_size, self.length):
            segs = pieces if self.doc_masks else [merge_pieces(pieces)]
            packed = pack_rows(segs, self.length, self.pad_id)
            if len(packed["input_ids"]) != 1:
                raise AssertionError(f"stream {stream!r} gave a row of more than {self.length} tokens")
            rows.append(packed)
            n = sum(len(s.tokens) for s in segs)
            for k, v in ((f"rows_{stream}", 1), (f"tokens_{stream}", n), ("rows", 1), ("tokens", n)):
                self.stats[k] = self.stats.get(k, 0) + v
        return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}
