"""Timing: round-robin timing of several arms in one process (A B C A B C ...), so that a noisy machine slows every
arm alike; the step benchmarks (LR-Cost, RP-Cost, CD-Cost, PL-Tab15) compare arms by ratios within one such run."""

from __future__ import annotations

from typing import Any, Callable, Sequence


def interleaved_rounds(arms: Sequence[str], rounds: int, warmup: int, step: Callable[[str, int], Any],
                       desc: str = "steps", progress: bool = True) -> dict[str, list]:
    """Call ``step(arm, round)`` for every arm in every round (``warmup`` untimed rounds first, then ``rounds``);
    returns, per arm, what ``step`` returned in the ``rounds`` kept rounds (e.g. its seconds)."""
    from tqdm.auto import tqdm

    out: dict[str, list] = {a: [] for a in arms}
    with tqdm(total=(warmup + rounds) * len(arms), desc=desc, disable=not progress) as bar:
        for r in range(warmup + rounds):
            for arm in arms:
                value = step(arm, r)
                if r >= warmup:
                    out[arm].append(value)
                bar.update(1)
    return out
