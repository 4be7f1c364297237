"""Drawing training rows from named streams by proportion (ProLong §3-§6: code repos 30%, books 30%, ShortMix 40%).

:class:`Mixture` assigns each row of each step to a stream with a categorical draw seeded by ``(seed, step)``,
then reads that stream's next row: the ``k``-th row a stream contributes is its row ``k``
(:mod:`repro.data.streams`). How many rows each stream gave before a step is the sum of the earlier steps'
draws, so a step's rows are a pure function of ``(seed, step)``: resumable mid-epoch, buildable in parallel.
ProLong's code mixes streaming datasets by proportion in the same way (a random source per sample).
"""

from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from repro.data.streams import Stream


def check_proportions(proportions: Mapping[str, float], names: Sequence[str] | None = None) -> dict[str, float]:
    """``proportions`` as a dict, checked: every value in [0, 1], the sum 1 (to 1e-6), names known."""
    props = {str(k): float(v) for k, v in dict(proportions).items()}
    bad = {k: v for k, v in props.items() if not 0.0 <= v <= 1.0}
    if bad:
        raise ValueError(f"mixture proportions {bad} out of range; allowed: each in [0, 1]")
    if abs(sum(props.values()) - 1.0) > 1e-6:
        raise ValueError(f"mixture proportions {props} sum to {sum(props.values()):.6g}; allowed: a sum of 1")
    if names is not None and (unknown := sorted(set(props) - set(names))):
        raise ValueError(f"mixture names unknown stream(s) {unknown}; allowed: {', '.join(names)}")
    return props


class Mixture:
    """Rows from ``streams`` in ``proportions`` (stream name -> share of rows; zero shares allowed)."""

    def __init__(self, streams: Sequence[Stream], proportions: Mapping[str, float], seed: int = 0, salt: int = 11):
        self.streams = {s.name: s for s in streams}
        if len(self.streams) != len(streams):
            raise ValueError(f"stream names repeat: {[s.name for s in streams]}")
        props = check_proportions(proportions, list(self.streams))
        self.names = [n for n in self.streams if props.get(n, 0.0) > 0]
        self.p = np.array([props[n] for n in self.names])
        self.p = self.p / self.p.sum()
        self.seed, self.salt = int(seed), int(salt)
        self._counts: list[np.ndarray] = [np.zeros(len(self.names), dtype=np.int64)]  # rows per stream before step s
        self._rows = 0

    @property
    def proportions(self) -> dict[str, float]:
        return dict(zip(self.names, self.p.tolist()))

    def choices(self, step: int, rows: int) -> np.ndarray:
        """The stream index (into :attr:`names`) of each of step ``step``'s ``rows`` rows."""
        if step < 0 or rows < 1:
            raise ValueError(f"step={step}, rows={rows}; allowed: step >= 0, rows >= 1")
        return np.random.default_rng([self.seed, self.salt, step]).choice(len(self.names), size=rows, p=self.p)

    def counts_before(self, step: int, rows: int) -> np.ndarray:
        """Rows each stream gave in steps ``0..step-1`` (``rows`` per step; cumulative sums are cached)."""
        if rows != self._rows:
            self._counts, self._rows = [np.zeros(len(self.names), dtype=np.int64)], rows
        while len(self._counts) <= step:
            s = len(self._counts) - 1
            self._counts.append(self._counts[-1] + np.bincount(self.choices(s, rows), minlength=len(self.names)))
        return self._counts[step]

    def step_rows(self, step: int, rows: int, length: int) -> list[tuple[str, list]]:
        """Step ``step``'s rows: ``(stream name, that stream's row of document pieces)`` each."""
        picks = self.choices(step, rows)
        nxt = self.counts_before(step, rows).copy()
        out = []
        for c in picks:
            name = self.names[int(c)]
            out.append((name, self.streams[name].row(int(nxt[c]), length)))
            nxt[c] += 1
        return out
