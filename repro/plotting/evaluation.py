"""Figures of the evaluation notebook (drawing only)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib
import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np

from repro.plotting.axes import SE_NOTE


def accuracy_heatmaps(tables: Mapping[str, Mapping[tuple[int, float], float]], title: str = "",
                      marks: Mapping[str, int] | None = None):
    """One length x depth heat map per model; ``marks`` draws a line at a length per model."""
    names = list(tables)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names) + 0.8, 3.4), squeeze=False)
    im = None
    for ax, name in zip(axes[0], names):
        t = tables[name]
        lengths = sorted({k[0] for k in t})
        depths = sorted({k[1] for k in t})
        grid = np.array([[t.get((L, d), np.nan) for L in lengths] for d in depths])
        im = ax.imshow(grid, vmin=0, vmax=1, cmap="RdYlGn", aspect="auto", origin="upper")
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths])
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xlabel("prompt length (tokens)")
        ax.set_title(name, fontsize=10)
        if marks and name in marks and marks[name] in lengths:
            ax.axvline(lengths.index(marks[name]) + 0.5, color="k", lw=1, ls="--")
    axes[0][0].set_ylabel("needle depth")
    fig.colorbar(im, ax=axes[0].tolist(), shrink=0.9, label="exact match")
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def decile_curves(curves: Mapping[str, list], title: str = "", ses: Mapping[str, list] | None = None):
    """Accuracy vs normalized answer position (depth decile centres), one line per model (RP-Fig1a); ``ses``
    (model -> one SE per decile, fractions as the curves; None where a decile has none) draws ±1 SE bars."""
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    x = np.arange(10) / 10 + 0.05
    for name, curve in curves.items():
        y = _percent(curve)
        err = _percent((ses or {}).get(name) or [None] * len(curve))
        ax.errorbar(x, y, yerr=np.nan_to_num(err), marker="o", capsize=2, label=name)
    ax.set_xlim(0, 1)
    _percent_axes(ax, "normalized answer position (needle depth)", title, legend=8 if curves else None,
                  ylabel=f"accuracy (%; {SE_NOTE})" if ses else "accuracy (%)")
    return fig


def _percent(values: Sequence[float | None]) -> np.ndarray:
    """Fractions as percent, None as NaN."""
    return np.array([np.nan if v is None else 100 * v for v in values], dtype=float)


def task_heatmap(values: Mapping[str, Mapping[str, float | None]], title: str = "",
                 flags: Mapping[str, bool | None] | None = None):
    """Model x task accuracy (percent; None drawn grey as n/a); ``flags[task] is False`` hatches the
    columns of tasks the base cannot do at its window (RP-Tab1/2)."""
    names = list(values)
    tasks = list(dict.fromkeys(t for v in values.values() for t in v))
    grid = np.array([[np.nan if values[n].get(t) is None else values[n][t] for t in tasks] for n in names], dtype=float)
    fig, ax = plt.subplots(figsize=(0.55 * len(tasks) + 2.2, 0.45 * len(names) + 1.6))
    cmap = matplotlib.colormaps["RdYlGn"].copy()
    cmap.set_bad("0.85")
    im = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=100, cmap=cmap, aspect="auto")
    for (i, j), v in np.ndenumerate(grid):
        ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=7)
    for j, t in enumerate(tasks):
        if flags and flags.get(t) is False:
            ax.add_patch(matplotlib.patches.Rectangle((j - 0.5, -0.5), 1, len(names), fill=False, hatch="//",
                                                      edgecolor="0.3", lw=0))
    ax.set_xticks(range(len(tasks)), tasks, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    fig.colorbar(im, ax=ax, shrink=0.9, label="accuracy (%)")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def accuracy_vs_length(series: Mapping[str, Mapping[int, float | None]], title: str = "",
                       marks: Sequence[int] = ()):
    """Accuracy (percent) vs prompt length, one line per label; ``marks`` draws vertical lines (windows). Every line
    has its own colour and line style (20 colours, then dashed, dotted, ...), and the legend sits beside the axes,
    in columns of at most :data:`LEGEND_ROWS`, so no line hides under it however many there are."""
    n = len(series)
    cols = max(1, -(-n // LEGEND_ROWS))
    fig, ax = plt.subplots(figsize=(5.2 + 2.4 * cols if n else 5.2, 3.4))
    colours = plt.get_cmap("tab20" if n > 10 else "tab10")
    for i, (label, by_len) in enumerate(series.items()):
        xs = sorted(by_len)
        ys = [np.nan if by_len[L] is None else by_len[L] for L in xs]
        ax.plot(xs, ys, marker="o", ms=4, label=label, color=colours(i % colours.N),
                ls=LINE_STYLES[(i // colours.N) % len(LINE_STYLES)])
    for m in marks:
        ax.axvline(m, color="k", lw=0.8, ls="--")
    ax.set_xscale("log", base=2)
    _percent_axes(ax, "prompt length (tokens)", title, legend=None)
    if n:
        ax.legend(fontsize=6, ncol=cols, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    fig.tight_layout()
    return fig


LEGEND_ROWS = 16
"""The most legend entries in one column of :func:`accuracy_vs_length` (more go into further columns)."""
LINE_STYLES = ("-", "--", ":", "-.")
"""Line styles :func:`accuracy_vs_length` cycles through, one per pass through the colour map."""


def _percent_axes(ax, xlabel: str, title: str, legend: int | None, ylabel: str = "accuracy (%)") -> None:
    """Shared finish of the accuracy-in-percent line plots: the fixed range 0-100 (a few points of room), so no
    axis zooms into the noise."""
    ax.set_ylim(-3, 103)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if legend:
        ax.legend(fontsize=legend)
    if title:
        ax.set_title(title, fontsize=10)


def _point(pt: Sequence[float | None]) -> tuple[float, float, float]:
    """``(x, y, se)`` of a ``(x, y)`` or ``(x, y, se)`` point; a missing SE is 0 (no bar). ValueError otherwise."""
    if len(pt) not in (2, 3):
        raise ValueError(f"point {tuple(pt)!r}; allowed: (x, y) or (x, y, se)")
    se = pt[2] if len(pt) == 3 else None
    return float(pt[0]), float(pt[1]), 0.0 if se is None else float(se)


def accuracy_vs_wallclock(points: Mapping[str, Sequence[Sequence[float | None]]], title: str = "",
                          metric: str = "accuracy"):
    """RP-Fig4: ``metric`` (percent) against training wall-clock seconds, one line per arm; points ``(seconds,
    percent)`` or ``(seconds, percent, SE)``, the SE drawn as ±1 SE bars."""
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for label, pts in points.items():
        xs, ys, ses = zip(*map(_point, pts)) if pts else ((), (), ())
        ax.errorbar(xs, ys, yerr=ses, marker="o", capsize=2, label=label)
    _percent_axes(ax, "training wall-clock (s)", title, legend=7 if points else None,
                  ylabel=f"{metric} (%; {SE_NOTE})")
    return fig
