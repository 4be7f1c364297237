"""Reading back what a figure drew: error bars, bar heights and text boxes from the matplotlib artists."""

from __future__ import annotations

from math import nan

from matplotlib.container import ErrorbarContainer


def errorbars(ax, axis: str = "y") -> dict[str, list[tuple[float, float, float]]]:
    """Label -> ``(position, low, high)`` of each drawn bar of the error-bar containers of ``ax`` (``axis``: the
    bars' direction); position is the other coordinate; NaN for a point without a value. Unlabelled containers
    are ``_<k>``."""
    out = {}
    for k, c in enumerate(x for x in ax.containers if isinstance(x, ErrorbarContainer)):
        segs = []
        for coll in c.lines[2]:
            for seg in coll.get_segments():
                if len(seg) != 2:  # a point without a value (NaN): no bar
                    segs.append((nan, nan, nan))
                    continue
                (x0, y0), (x1, y1) = seg
                if axis == "y" and x0 == x1:
                    segs.append((float(x0), float(min(y0, y1)), float(max(y0, y1))))
                elif axis == "x" and y0 == y1:
                    segs.append((float(y0), float(min(x0, x1)), float(max(x0, x1))))
        label = c.get_label()
        out[label if label and not label.startswith("_") else f"_{k}"] = segs
    return out


def half_lengths(ax, axis: str = "y") -> dict[str, list[float]]:
    """Label -> half the length of each error bar (the ±SE drawn)."""
    return {k: [round((hi - lo) / 2, 9) for _, lo, hi in v] for k, v in errorbars(ax, axis).items()}
