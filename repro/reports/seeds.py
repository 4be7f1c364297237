"""Arms trained with several seeds: ``flt``, ``flt@seed1``, ``flt@seed2`` in a suite are three training-seed
replicates of one arm ``flt`` (names: :mod:`repro.methods.arms`). The tables show such an arm once, as
mean ± std (sample std) across its replicates, and say which arms are multi-seed (:func:`multi_seed_note`).

Every replicate is evaluated on the same prompts as every other checkpoint, so per-task cells pool the
replicates' rows (:func:`pooled`: the mean over all rows is the mean over replicates).
"""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

from repro.reports.common import Scores
from repro.stats import seed_spread


def seed_groups(names: Iterable[str]) -> dict[str, tuple[str, ...]]:
    """Arm -> its replicate names, the plain name first, then ``@seed1``, ``@seed2``, ... (arms in order of
    first appearance)."""
    from repro.methods.arms import split_seed  # lazy: repro.methods loads torch; the reports load without it

    groups: dict[str, list[tuple[int, str]]] = {}
    for n in names:
        arm, k = split_seed(n)
        groups.setdefault(arm, []).append((k, n))
    return {a: tuple(n for _, n in sorted(v)) for a, v in groups.items()}


def pooled(suite: Mapping[str, Mapping[str, Any]], names: Sequence[str], part: str) -> Scores:
    """One :class:`Scores` over the rows (and skipped cells) of every replicate in ``names``."""
    results: list[dict] = []
    skipped: list[dict] = []
    for n in names:
        rec = suite.get(n, {}).get(part) or {}
        results += rec.get("results", [])
        skipped += rec.get("skipped", [])
    return Scores({"results": results, "skipped": skipped})


def per_seed(suite: Mapping[str, Mapping[str, Any]], names: Sequence[str], part: str,
             fn: Callable[[Scores], float | None]) -> list[float | None]:
    """``fn`` of each replicate's scores of ``part``."""
    return [fn(Scores(suite.get(n, {}).get(part))) for n in names]


def seed_mean_std(values: Sequence[float | None]) -> tuple[float | None, float | None]:
    """Mean and sample std (ddof 1) of the values that exist; std None below two values, both None with none."""
    v = [x for x in values if x is not None]
    if not v:
        return None, None
    return sum(v) / len(v), (seed_spread(v) if len(v) > 1 else None)


def cell(values: Sequence[float | None], why: str = "n/a", scale: float = 100.0, digits: int = 1) -> float | str:
    """A table cell: one value scaled and rounded (``scale=100``: percent), ``"mean ± std"`` over several
    replicates, or ``why`` when none exists."""
    m, s = seed_mean_std(values)
    if m is None:
        return why
    if s is None:
        return round(scale * m, digits)
    return f"{scale * m:.{digits}f} ± {scale * s:.{digits}f}"


def seeds_label(label: str, names: Sequence[str]) -> str:
    """``label`` with ``(k seeds)`` when the arm has ``k > 1`` replicates."""
    return f"{label} ({len(names)} seeds)" if len(names) > 1 else label


def multi_seed_note(groups: Mapping[str, Sequence[str]], label: Callable[[str], str] = str) -> str:
    """Which arms of a table are multi-seed (shown as mean ± std across training seeds)."""
    multi = [f"{label(a)} ({len(n)} seeds)" for a, n in groups.items() if len(n) > 1]
    if not multi:
        return "Every arm has one training seed (no training-seed spread measured)."
    return (f"Multi-seed arms (mean ± std across training seeds): {', '.join(multi)}; "
            "the other arms have one training seed.")
