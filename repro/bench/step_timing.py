"""What the step benchmarks (RP-Cost, CD-Cost) share: a clock that splits a step into named parts, and the summary
of interleaved rounds into medians, ratios and FLOP bounds."""

from __future__ import annotations

import statistics
import time

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


def summarize(times: dict[str, list[tuple[float, float]]], reference: str, extra: dict) -> dict[str, dict]:
    """Per arm, from its rounds' ``(seconds, FLOPs)`` (every arm timed once per round, in the same rounds):
    ``seconds``, ``flops``, ``seconds_per_step`` (median), ``ratio`` (the median over rounds of the arm's seconds
    over ``reference``'s in the same round: paired, so a slow stretch of the machine hits both), ``bound`` (mean
    FLOPs over ``reference``'s mean FLOPs) and ``vs_bound`` (the median over rounds of the arm's seconds per FLOP
    over ``reference``'s in the same round: 1 when the arm runs as fast per FLOP as the reference, i.e. its ratio
    is its bound), plus ``extra``."""
    ref = times[reference]
    ref_f = statistics.fmean(f for _, f in ref)
    out = {}
    for name, got in times.items():
        secs, flops = [t for t, _ in got], [f for _, f in got]
        out[name] = {"seconds": secs, "seconds_per_step": statistics.median(secs),
                     "ratio": statistics.median(t / rt for (t, _), (rt, _) in zip(got, ref)), "flops": flops,
                     "bound": statistics.fmean(flops) / ref_f,
                     "vs_bound": statistics.median((t / f) / (rt / rf) for (t, f), (rt, rf) in zip(got, ref)),
                     **extra}
    return out
