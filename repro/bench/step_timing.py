"""What the step benchmarks (RP-Cost, CD-Cost) share: a clock that splits a step into named parts, and the summary
of interleaved rounds into medians, ratios and FLOP bounds."""

from __future__ import annotations

import statistics
import time
from typing import Sequence

import numpy as np
import torch


class Clock:
    """Seconds spent in named parts of a step: :meth:`lap` adds the time since the previous lap to a part
    (the GPU synchronized first when ``cuda``)."""

    def __init__(self, cuda: bool = False):
        self.cuda = cuda
        self.parts: dict[str, float] = {}
        self.last = 0.0

    def start(self) -> None:
        """Forget the parts and start timing."""
        self._sync()
        self.parts, self.last = {}, time.perf_counter()

    def lap(self, part: str) -> None:
        """Add the seconds since the previous lap (or :meth:`start`) to ``part``."""
        self._sync()
        now = time.perf_counter()
        self.parts[part] = self.parts.get(part, 0.0) + now - self.last
        self.last = now

    def _sync(self) -> None:
        if self.cuda:
            torch.cuda.synchronize()


def random_rows(batch_size: int, length: int, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Rows of random token ids (a step's time does not depend on the values): one document each, positions
    ``0..length-1``, every token weighted 1."""
    ids = rng.integers(0, vocab, (batch_size, length))
    return {"input_ids": ids, "position_ids": np.broadcast_to(np.arange(length), (batch_size, length)).copy(),
            "weights": np.ones((batch_size, length), np.float32)}


def summarize(times: dict[str, list[tuple[float, dict[str, float], float]]], reference: str, parts: Sequence[str],
              extra: dict) -> dict[str, dict]:
    """Per arm, from its rounds' ``(seconds, {part: seconds}, FLOPs)`` (every arm timed once per round, in the same
    rounds): ``seconds``, ``flops``, ``seconds_per_step`` (median), ``ratio`` (the median over rounds of the arm's
    seconds over ``reference``'s in the same round: paired, so a slow stretch of the machine hits both), ``bound``
    (mean FLOPs over ``reference``'s mean FLOPs), ``vs_bound`` (the median over rounds of the arm's seconds per FLOP
    over ``reference``'s in the same round: 1 when the arm runs as fast per FLOP as the reference, i.e. its ratio
    is its bound) and ``parts`` (the median of each of ``parts`` the arm has; medians need not add up), plus
    ``extra``."""
    ref = times[reference]
    ref_f = statistics.fmean(f for _, _, f in ref)
    out = {}
    for name, got in times.items():
        secs, flops = [t for t, _, _ in got], [f for _, _, f in got]
        out[name] = {"seconds": secs, "seconds_per_step": statistics.median(secs),
                     "ratio": statistics.median(t / rt for (t, _, _), (rt, _, _) in zip(got, ref)), "flops": flops,
                     "bound": statistics.fmean(flops) / ref_f,
                     "vs_bound": statistics.median((t / f) / (rt / rf) for (t, _, f), (rt, _, rf) in zip(got, ref)),
                     "parts": {p: statistics.median(d.get(p, 0.0) for _, d, _ in got) for p in parts
                               if any(p in d for _, d, _ in got)},
                     **extra}
    return out
