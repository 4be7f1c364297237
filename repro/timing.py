"""Timing: round-robin timing of several arms in one process (A B C A B C ...), so that a noisy machine slows every arm
alike; the step benchmarks (LR-Cost, RP-Cost, CD-Cost, PL-Tab15) compare arms by ratios within one such run.

On a CPU a step also depends on the step before it: right after a bigger arm's step (another graph's memory just
freed, the allocator's heap left in that arm's shape) a cheap arm's step ran slower than in a run of its own steps
(the tiny model's Standard step, 2 threads: 0.72 s after skip + LongCE's step against 0.65 s trained alone; 1
thread: 1.32 s of CPU against 1.17 s alone), which penalises the cheap arms' ratios. ``settle`` untimed steps of the
same arm right before each timed one make every timed step follow a step of its own arm, as in training, while the
rounds stay paired."""

from __future__ import annotations

import gc
import statistics
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from tqdm.auto import tqdm


WARMUP_STEPS = 5
"""Steps of a training run left out of its median seconds per step (:func:`run_seconds`)."""


def run_seconds(metrics: Sequence[Mapping[str, Any]], skip: int = WARMUP_STEPS) -> float | None:
    """Median seconds per step of a training run's metrics rows (those with ``seconds``), the first ``skip`` of them
    left out as warm-up (all of them kept when no more are left); None when no row has ``seconds``."""
    secs = [r["seconds"] for r in metrics if "seconds" in r]
    return statistics.median(secs[skip:] or secs) if secs else None


def interleaved_rounds(arms: Sequence[str], rounds: int, warmup: int, step: Callable[[str, int], Any],
                       desc: str = "steps", progress: bool = True, settle: int = 0) -> dict[str, list]:
    """Call ``step(arm, round)`` for every arm in every round (``warmup`` untimed rounds first, then ``rounds``);
    returns, per arm, what ``step`` returned in the ``rounds`` kept rounds (e.g. its seconds).

    ``settle``: in each kept round, ``step(arm, round)`` is called ``settle`` more times right before the kept call
    and what they return is dropped (A A B B C C with ``settle=1``), so that every kept step follows a step of its
    own arm rather than another arm's; ``step`` must then allow more than one call with the same round (e.g. time
    and count inside the call, not append to a list by round). Before every call, cyclic garbage is collected
    (:func:`gc.collect`), so that no graph of an earlier step is freed by the collector inside a timed one. What was
    alive before the rounds (imported modules, the models) is moved out of the collector's reach for their duration
    (:func:`gc.freeze`): each collection then scans only what the steps made, not the whole heap (in a notebook
    kernel 0.1-0.4 s a call), and handed back (:func:`gc.unfreeze`) afterwards."""
    if rounds < 0 or warmup < 0 or settle < 0:
        raise ValueError(f"rounds={rounds}, warmup={warmup}, settle={settle}; allowed: each >= 0")
    out: dict[str, list] = {a: [] for a in arms}
    gc.collect()
    gc.freeze()
    try:
        _rounds(arms, rounds, warmup, step, desc, progress, settle, out)
    finally:
        gc.unfreeze()
    return out


def _rounds(arms, rounds, warmup, step, desc, progress, settle, out: dict[str, list]) -> None:
    """The rounds of :func:`interleaved_rounds`, appending each kept call's value to ``out[arm]``."""
    with tqdm(total=(warmup + rounds * (1 + settle)) * len(arms), desc=desc, disable=not progress) as bar:
        for r in range(warmup + rounds):
            kept = r >= warmup
            for arm in arms:
                for _ in range(settle if kept else 0):
                    gc.collect()
                    step(arm, r)
                    bar.update(1)
                gc.collect()
                value = step(arm, r)
                if kept:
                    out[arm].append(value)
                bar.update(1)


@dataclass(frozen=True)
class StepTiming:
    """Where one arm's seconds per step come from, for a comparison at equal wall-clock."""

    seconds: float
    """Seconds per optimizer step (a median over the measurement's steps or rounds)."""
    threads: int
    """torch CPU threads of the process that timed it (0: the process's own default)."""
    beside: int
    """How many other processes were computing beside it (0: it ran alone; an interleaved benchmark runs alone)."""
    source: str
    """Which measurement: e.g. ``RP-Cost interleaved benchmark``, or ``its own training run``."""


def check_equal_timing(timings: Mapping[str, StepTiming], what: str) -> None:
    """Raise ValueError when two arms of one equal-wall-clock comparison (``what``) were timed under different thread
    counts, beside different numbers of other processes, or by different measurements: their seconds per step would
    not compare (a step beside another stage took 1.9x the same step alone in the tiny run)."""
    conditions = {(t.threads, t.beside, t.source): name for name, t in timings.items()}
    if len(conditions) > 1:
        seen = "; ".join(f"{name}: {threads} thread(s), beside {beside} process(es), {source}"
                         for (threads, beside, source), name in conditions.items())
        raise ValueError(f"{what}: arms timed under different conditions ({seen}); allowed: one measurement at one "
                         f"thread count with the same concurrency for every arm")
