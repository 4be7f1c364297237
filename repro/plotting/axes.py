"""Axis helpers shared by the figures: y-limits that show the noise band, labels that say what the bars are.

Drawing only: the standard errors come with the data (the reports compute them); these helpers place them.
"""

from __future__ import annotations

import math
from typing import Sequence

SE_NOTE = "bars ±1 SE"
"""Appended to an axis label or legend where error bars are drawn."""


def _finite_pairs(values: Sequence[float | None], ses: Sequence[float | None]) -> list[tuple[float, float]]:
    """``(value, se)`` pairs with a finite value; a missing or non-finite SE counts as 0. ValueError for
    sequences of different lengths or a negative SE."""
    if len(values) != len(ses):
        raise ValueError(f"{len(values)} values but {len(ses)} standard errors; allowed: one SE per value")
    out = []
    for v, s in zip(values, ses):
        if s is not None and math.isfinite(s) and s < 0:
            raise ValueError(f"standard error {s!r} for value {v!r}; allowed: se >= 0 or None")
        if v is not None and math.isfinite(v):
            out.append((float(v), float(s) if s is not None and math.isfinite(s) else 0.0))
    return out


def noise_band(values: Sequence[float | None], ses: Sequence[float | None],
               bounds: tuple[float | None, float | None] = (None, None)) -> tuple[float, float] | None:
    """The smallest interval holding every ``value ± se`` (None and NaN values skipped), clipped to ``bounds``
    (e.g. ``(0, 100)`` for accuracies in percent); None without a finite value."""
    pairs = _finite_pairs(values, ses)
    if not pairs:
        return None
    lo, hi = min(v - s for v, s in pairs), max(v + s for v, s in pairs)
    if bounds[0] is not None:
        lo = max(lo, bounds[0])
    if bounds[1] is not None:
        hi = min(hi, bounds[1])
    return lo, hi


def noise_aware_ylim(ax, values: Sequence[float | None], ses: Sequence[float | None],
                     bounds: tuple[float | None, float | None] = (None, None), pad: float = 0.05
                     ) -> tuple[float, float]:
    """Widen ``ax``'s y-limits (never narrow them) so that every ``value ± se`` is inside, with ``pad`` x the span
    of room each side: an axis never zooms into a band narrower than the noise. The band is clipped to ``bounds``
    before padding (values cannot leave ``[0, 100]``, the room around them may). On a log axis the padding is
    multiplicative and the band's non-positive end is left out. Returns the limits set."""
    if not 0.0 <= pad < 1.0:
        raise ValueError(f"pad={pad!r}; allowed: 0 <= pad < 1")
    band = noise_band(values, ses, bounds)
    cur = ax.get_ylim()
    if band is None:
        return cur
    if ax.get_yscale() == "log":
        lo, hi = (band[0] if band[0] > 0 else cur[0]), band[1]
        f = (hi / lo) ** pad if hi > lo else 1.0 + pad
        lo, hi = lo / f, hi * f
    else:
        room = pad * (band[1] - band[0]) or pad * max(abs(band[1]), 1.0)
        lo, hi = band[0] - room, band[1] + room
    lim = (min(lo, cur[0]), max(hi, cur[1]))
    ax.set_ylim(*lim)
    return lim
