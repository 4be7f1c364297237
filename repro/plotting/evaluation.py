"""Figures of the evaluation notebook (drawing only: data, standard errors and the verdict's words come in as
arguments; the notebook composes each title from the target's claim and its report's ``agrees``).

Every figure keeps :mod:`repro.figure_rules`: at most eight series on one axes (more arms go into small
multiples, context arms are drawn muted), legends beside or below the axes, a colour bar on every heat map."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib
import matplotlib.colors
import matplotlib.patches
import matplotlib.pyplot as plt
import numpy as np

from repro.plotting.axes import SE_NOTE, noise_aware_ylim
from repro.figure_rules import MAX_SERIES

MUTED = "0.55"
"""Colour of the context arms (drawn for reference, not deciding the verdict)."""
EMPHASIS = ("C3", "C0", "C2", "C1", "C4", "C5", "C6", "C9")
"""Colours of the deciding arms, in the order the caller names them."""
OUTCOME_COLOURS = {"holds": "C2", "contrary": "C3", "tie": "0.35", "untested": "0.7"}
"""Colour of a headline claim's gap by its outcome (:mod:`repro.reports.headline`)."""


def accuracy_heatmaps(tables: Mapping[str, Mapping[tuple[int, float], float]], title: str = "",
                      marks: Mapping[str, int] | None = None):
    """One length x depth heat map of exact match per model, one shared colour bar; ``marks`` (model -> length)
    draws a dashed line right of that length (the model's training window), named in the panel's title."""
    names = list(tables)
    fig, axes = plt.subplots(1, len(names), figsize=(3.6 * len(names) + 1.2, 3.6), squeeze=False,
                             layout="constrained")
    images, norm = [], matplotlib.colors.Normalize(vmin=0, vmax=1)
    for ax, name in zip(axes[0], names):
        t = tables[name]
        lengths = sorted({k[0] for k in t})
        depths = sorted({k[1] for k in t})
        grid = np.array([[t.get((L, d), np.nan) for L in lengths] for d in depths])
        images.append(ax.imshow(grid, norm=norm, cmap="RdYlGn", aspect="auto", origin="upper"))
        ax.set_xticks(range(len(lengths)), [str(L) for L in lengths])
        ax.set_yticks(range(len(depths)), [f"{d:.2f}" for d in depths])
        for (i, j), v in np.ndenumerate(grid):
            ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.2f}", ha="center", va="center", fontsize=7)
        ax.set_xlabel("prompt length (tokens)")
        sub = name
        if marks and name in marks and marks[name] in lengths:
            ax.axvline(lengths.index(marks[name]) + 0.5, color="k", lw=1.2, ls="--")
            sub = f"{name} (dashed: window {marks[name]})"
        ax.set_title(sub, fontsize=9)
    axes[0][0].set_ylabel("needle depth")
    bar = fig.colorbar(images[-1], ax=axes[0].tolist(), shrink=0.9, label="exact match")
    for im in images:
        im.colorbar = bar  # one norm and colour map for every map: the shared bar is each one's
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def _percent(values: Sequence[float | None]) -> np.ndarray:
    """Fractions as percent, None as NaN."""
    return np.array([np.nan if v is None else 100 * v for v in values], dtype=float)


def _top(values: Sequence[float], ses: Sequence[float], floor: float = 10.0) -> float:
    """Upper y-limit (percent) holding every ``value + se`` with room, at least ``floor``, at most 103."""
    tops = [v + (s if math.isfinite(s) else 0.0) for v, s in zip(values, ses) if math.isfinite(v)]
    return min(103.0, max([floor, *tops]) * 1.12 + 1.0)


def decile_curves(curves: Mapping[str, list], title: str = "", ses: Mapping[str, list] | None = None,
                  deciding: Sequence[str] | None = None):
    """RP-Fig1a: accuracy (percent) against the normalized answer position (depth decile centres). ``ses`` (model
    -> one SE per decile, fractions as the curves; None where a decile has none) draws ±1 SE bars.

    ``deciding`` (the arms the verdict compares, the reference first: e.g. Standard, then the self-distillation
    arms) share one large panel, the reference black and the others in strong colours, each a little offset along
    x so no bar hides another; every other arm gets a small panel of its own, muted, with the reference as a thin
    dashed grey line. Without
    ``deciding`` every arm has its own panel. All panels share the y-axis, cut just above the highest bar."""
    names = list(curves)
    deciding = [n for n in (deciding or ()) if n in curves][:MAX_SERIES]
    context = [n for n in names if n not in deciding]
    x = np.arange(10) / 10 + 0.05
    ys = {n: _percent(curves[n]) for n in names}
    es = {n: np.nan_to_num(_percent((ses or {}).get(n) or [None] * len(curves[n]))) for n in names}
    top = _top([v for n in names for v in ys[n]], [e for n in names for e in es[n]])
    ylabel = f"accuracy (%; {SE_NOTE})" if ses else "accuracy (%)"
    ncol = max(1, math.ceil(len(context) / 2))
    if deciding:
        fig = plt.figure(figsize=(5.0 + 2.3 * ncol if context else 5.6, 4.6), layout="constrained")
        grid = fig.add_gridspec(2, 2 + ncol if context else 2)
        main = fig.add_subplot(grid[:, :2])
        small = [fig.add_subplot(grid[i % 2, 2 + i // 2], sharey=main) for i in range(len(context))]
    else:
        rows = 1 if len(names) <= 3 else 2
        ncol = max(1, math.ceil(len(names) / rows))
        fig, axs = plt.subplots(rows, ncol, figsize=(2.6 * ncol + 0.6, 2.4 * rows + 0.8), sharey=True,
                                squeeze=False, layout="constrained")
        main, small, context = None, list(axs.flat), names
        for ax in small[len(names):]:
            ax.set_visible(False)
    if main is not None:
        width = 0.012
        for i, n in enumerate(deciding):
            off = (i - (len(deciding) - 1) / 2) * width
            main.errorbar(x + off, ys[n], yerr=es[n], marker="o", ms=5, lw=2 if i == 0 else 1.6, capsize=2,
                          color="k" if i == 0 else EMPHASIS[i % len(EMPHASIS)], label=n)  # black: the reference
        main.set_title("deciding arms", fontsize=9)
        main.set_ylabel(ylabel)
        main.set_xlabel("normalized answer position (needle depth)")
        main.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=min(4, len(deciding)))
    ref = deciding[0] if deciding else None
    for ax, n in zip(small, context):
        if ref is not None:
            ax.plot(x, ys[ref], color="0.75", lw=1, ls="--")
        ax.errorbar(x, ys[n], yerr=es[n], marker="o", ms=3, lw=1, capsize=1.5, color=MUTED if main else "C0",
                    label=n)
        ax.set_title(n + (f" (dashed: {ref})" if ref else ""), fontsize=8)
        ax.tick_params(labelsize=7)
        if main is None:
            ax.set_ylabel(ylabel, fontsize=8)
    for ax in ([main] if main is not None else []) + small:
        ax.set_xlim(0, 1)
        ax.set_ylim(-0.03 * top, top)
        ax.grid(alpha=0.3)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def task_heatmap(values: Mapping[str, Mapping[str, float | None]], title: str = "",
                 flags: Mapping[str, bool | None] | None = None, emphasise: Sequence[str] = ()):
    """Model x task accuracy (percent; None drawn grey as n/a); ``flags[task] is False`` hatches the
    columns of tasks the base cannot do at its window (RP-Tab1/2); ``emphasise`` (the arms the verdict
    compares) are named in bold with a frame round their rows."""
    names = list(values)
    tasks = list(dict.fromkeys(t for v in values.values() for t in v))
    grid = np.array([[np.nan if values[n].get(t) is None else values[n][t] for t in tasks] for n in names], dtype=float)
    fig, ax = plt.subplots(figsize=(0.55 * len(tasks) + 2.6, 0.45 * len(names) + 1.8), layout="constrained")
    cmap = matplotlib.colormaps["RdYlGn"].with_extremes(bad="0.85")
    im = ax.imshow(np.ma.masked_invalid(grid), vmin=0, vmax=100, cmap=cmap, aspect="auto")
    for (i, j), v in np.ndenumerate(grid):
        ax.text(j, i, "n/a" if np.isnan(v) else f"{v:.0f}", ha="center", va="center", fontsize=7)
    for j, t in enumerate(tasks):
        if flags and flags.get(t) is False:
            ax.add_patch(matplotlib.patches.Rectangle((j - 0.5, -0.5), 1, len(names), fill=False, hatch="//",
                                                      edgecolor="0.3", lw=0))
    ax.set_xticks(range(len(tasks)), tasks, rotation=60, ha="right", fontsize=8)
    ax.set_yticks(range(len(names)), names)
    for i, (n, tick) in enumerate(zip(names, ax.get_yticklabels())):
        if n in emphasise:
            tick.set_fontweight("bold")
            ax.add_patch(matplotlib.patches.Rectangle((-0.5, i - 0.5), len(tasks), 1, fill=False, edgecolor="k",
                                                      lw=1.5))
    fig.colorbar(im, ax=ax, shrink=0.9, label="accuracy (%)")
    if title:
        ax.set_title(title, fontsize=10)
    return fig


def accuracy_vs_length(series: Mapping[str, Mapping[int, float | None]], title: str = "",
                       marks: Sequence[int] = (), ses: Mapping[str, Mapping[int, float | None]] | None = None):
    """Accuracy (percent) vs prompt length, one line per label; ``marks`` draws dashed vertical lines (windows);
    ``ses`` (label -> length -> SE in percent) draws ±1 SE bars. Up to :data:`repro.figure_rules.MAX_SERIES`
    labels share one axes with the legend beside it; more are drawn as small multiples, one panel per label
    (its name the panel's title), every panel on the same axes."""
    labels = list(series)
    one = len(labels) <= MAX_SERIES
    if one:
        fig, ax = plt.subplots(figsize=(7.2 if labels else 5.2, 3.4), layout="constrained")
        axes = [ax] * len(labels) or [ax]
    else:
        ncol = min(4, len(labels))
        rows = math.ceil(len(labels) / ncol)
        fig, grid = plt.subplots(rows, ncol, figsize=(2.4 * ncol + 0.6, 2.1 * rows + 0.8), sharex=True,
                                 sharey=True, squeeze=False, layout="constrained")
        axes = list(grid.flat)
        for ax in axes[len(labels):]:
            ax.set_visible(False)
    for i, label in enumerate(labels):
        ax, by_len = axes[i], series[label]
        xs = sorted(by_len)
        ys = [np.nan if by_len[L] is None else by_len[L] for L in xs]
        err = [((ses or {}).get(label) or {}).get(L) or 0.0 for L in xs]
        ax.errorbar(xs, ys, yerr=err if ses else None, marker="o", ms=4, capsize=2, label=label,
                    color=f"C{i % 10}" if one else "C0")
        if not one:
            ax.set_title(label, fontsize=8)
    for ax in dict.fromkeys(axes):
        for m in marks:
            ax.axvline(m, color="k", lw=0.8, ls="--")
        ax.set_xscale("log", base=2)
        ticks = sorted({L for by_len in series.values() for L in by_len} | set(marks))
        ax.set_xticks(ticks, [str(L) for L in ticks])
        ax.minorticks_off()
        ax.set_ylim(-3, 103)
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=7 if not one else 9)
    ylabel = f"accuracy (%; {SE_NOTE})" if ses else "accuracy (%)"
    xlabel = "prompt length (tokens)" + ("; dashed: window" if marks else "")
    if one:
        axes[0].set_xlabel(xlabel)
        axes[0].set_ylabel(ylabel)
        if labels:
            axes[0].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
        if title:
            axes[0].set_title(title, fontsize=10)
    else:
        fig.supxlabel(xlabel, fontsize=9)
        fig.supylabel(ylabel, fontsize=9)
        if title:
            fig.suptitle(title, fontsize=10)
    return fig


def _span(values: Sequence[float], ses: Sequence[float], least: float) -> tuple[float, float]:
    """y-limits (percent) holding every ``value ± se`` inside 0-100 with 5% room, at least ``least`` points wide
    (widened evenly, then shifted back inside 0-100): a small gap is shown against its noise, never blown up."""
    lo = max(0.0, min(v - s for v, s in zip(values, ses)))
    hi = min(100.0, max(v + s for v, s in zip(values, ses)))
    if hi - lo < least:
        mid = min(max((lo + hi) / 2, least / 2), 100.0 - least / 2)
        lo, hi = mid - least / 2, mid + least / 2
    room = 0.05 * (hi - lo)
    return lo - room, hi + room


def _percent_axes(ax, xlabel: str, title: str, ylabel: str = "accuracy (%)") -> None:
    """Shared finish of the accuracy-in-percent line plots: labels, grid, title."""
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    if title:
        ax.set_title(title, fontsize=10)


def _point(pt: Sequence[float | None]) -> tuple[float, float, float]:
    """``(x, y, se)`` of a ``(x, y)`` or ``(x, y, se)`` point; a missing SE is 0 (no bar). ValueError otherwise."""
    if len(pt) not in (2, 3):
        raise ValueError(f"point {tuple(pt)!r}; allowed: (x, y) or (x, y, se)")
    se = pt[2] if len(pt) == 3 else None
    return float(pt[0]), float(pt[1]), 0.0 if se is None else float(se)


def accuracy_vs_wallclock(points: Mapping[str, Sequence[Sequence[float | None]]], title: str = "",
                          metric: str = "accuracy", xlabel: str = "training wall-clock (s)"):
    """RP-Fig4: ``metric`` (percent) against training wall-clock seconds, one line per arm (the first named
    drawn thicker: the arm the claim is about); points ``(seconds, percent)`` or ``(seconds, percent, SE)``, the
    SE drawn as ±1 SE bars. The y-axis holds every bar with at least 20 points of range (never zoomed into the
    noise); the legend sits below the axes; ``xlabel`` says how the seconds were timed."""
    if len(points) > MAX_SERIES:
        raise ValueError(f"{len(points)} arms; allowed: at most {MAX_SERIES} on one axes")
    fig, ax = plt.subplots(figsize=(5.6, 4.0), layout="constrained")
    values, errs = [], []
    for i, (label, pts) in enumerate(points.items()):
        xs, ys, ses = zip(*map(_point, pts)) if pts else ((), (), ())
        ax.errorbar(xs, ys, yerr=ses, marker="o", capsize=2, label=label, lw=2 if i == 0 else 1.4,
                    color=EMPHASIS[i % len(EMPHASIS)])
        values, errs = values + list(ys), errs + list(ses)
    if values:
        ax.set_ylim(*_span(values, errs, 20.0))
    _percent_axes(ax, xlabel, title, ylabel=f"{metric} (%; {SE_NOTE})")
    if points:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(3, len(points)))
    return fig


def _metric_of(arm: str) -> tuple[str, str]:
    """``(checkpoint, metric)`` of a headline arm ``"<checkpoint>: <metric>"`` (metric ``""`` without one)."""
    name, _, metric = arm.partition(": ")
    return name, metric


def claim_gaps(ax, claims: Sequence[Mapping], unit: str = "pts") -> None:
    """Draw on ``ax`` each headline claim (:attr:`repro.reports.common.Report.claims`: ``a``, ``b``, ``expect``,
    ``gap``, ``se``, ``outcome``) as its gap ``a - b`` with the ±1 SE bar the verdict used, coloured by its
    outcome, against a zero line; the x tick names ``b`` and the x label the direction the paper expects."""
    for i, c in enumerate(claims):
        gap = np.nan if c.get("gap") is None else float(c["gap"])
        se = 0.0 if c.get("se") is None else float(c["se"])
        ax.errorbar([i], [gap], yerr=[se], fmt="o", ms=6, capsize=4, color=OUTCOME_COLOURS.get(c.get("outcome"), "k"),
                    label=f"{c['a']} - {c['b']}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xlim(-0.6, len(claims) - 0.4)
    ax.set_xticks(range(len(claims)), [f"vs {_metric_of(c['b'])[0]}\n({c.get('outcome')})" for c in claims],
                  fontsize=7)
    a = ", ".join(sorted({_metric_of(c["a"])[0] for c in claims}))
    expect = "/".join(sorted({c.get("expect") for c in claims}))
    ax.set_xlabel(f"gap: {a} - arm; paper: {a} {expect}", fontsize=8)
    ax.set_ylabel(f"gap ({unit}; ±1 paired SE)", fontsize=8)
    values = [float(c["gap"]) for c in claims if c.get("gap") is not None]
    noise_aware_ylim(ax, values + [0.0], [float(c.get("se") or 0.0) for c in claims if c.get("gap") is not None]
                     + [0.0], pad=0.15)
    ax.grid(alpha=0.3, axis="y")


def cd_tab2_panels(by_length: Mapping[str, Mapping[int, float | None]], claims: Sequence[Mapping],
                   title: str = "", deciding: Sequence[str] = (), marks: Sequence[int] = (),
                   units: Mapping[str, str] | None = None, ylabel: str = "RULER (%)"):
    """CD-Tab2: the left panel draws ``by_length`` (arm -> length -> percent, e.g. RULER over the tasks the base
    can do) with the ``deciding`` arms (CDT and the objectives it is compared with) in strong colours and every
    other arm muted and dashed; ``marks`` are dashed vertical lines (base window, target). One panel per metric of
    the headline ``claims`` (``"<arm>: <metric>"``: RULER-13, BABILong, LongPPL) follows, each claim's gap with
    the paired SE the verdict used (:func:`claim_gaps`; ``units``: metric -> unit, default points)."""
    metrics = list(dict.fromkeys(_metric_of(c["a"])[1] for c in claims))
    fig = plt.figure(figsize=(6.0 + 2.3 * len(metrics), 4.2), layout="constrained")
    grid = fig.add_gridspec(1, 3 + len(metrics))
    ax = fig.add_subplot(grid[0, :3])
    arms = [a for a in deciding if a in by_length] + [a for a in by_length if a not in deciding]
    if len(arms) > MAX_SERIES:
        raise ValueError(f"{len(arms)} arms; allowed: at most {MAX_SERIES} on one axes")
    values = []
    for i, arm in enumerate(arms):
        xs = sorted(by_length[arm])
        ys = [np.nan if by_length[arm][L] is None else by_length[arm][L] for L in xs]
        values += [y for y in ys if np.isfinite(y)]
        k = deciding.index(arm) if arm in deciding else None
        ax.plot(xs, ys, marker="o", ms=5 if k is not None else 3, lw=2 if k is not None else 1,
                ls="-" if k is not None else "--", color=EMPHASIS[k % len(EMPHASIS)] if k is not None else MUTED,
                label=arm if k is not None else f"{arm} (context)")
    for m in marks:
        ax.axvline(m, color="k", lw=0.8, ls=":")
    ax.set_xscale("log", base=2)
    ticks = sorted({L for arm in arms for L in by_length[arm]} | set(marks))
    ax.set_xticks(ticks, [str(L) for L in ticks])
    ax.minorticks_off()
    ax.set_ylim(-2, _top(values, [0.0] * len(values)))
    ax.set_xlabel("prompt length (tokens)" + ("; dotted: base window, target" if marks else ""), fontsize=9)
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    ax.set_title("by length (mean over training seeds)", fontsize=9)
    if arms:
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=min(4, len(arms)))
    for j, metric in enumerate(metrics):
        bx = fig.add_subplot(grid[0, 3 + j])
        claim_gaps(bx, [c for c in claims if _metric_of(c["a"])[1] == metric], (units or {}).get(metric, "pts"))
        bx.set_title(metric, fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def deciding_arms(claims: Sequence[Mapping]) -> list[str]:
    """The checkpoints a headline's ``claims`` compare (:attr:`repro.reports.common.Report.claims`), the
    references (each claim's ``b``) first: a claim arm ``"<checkpoint>: <metric>"`` or ``"<checkpoint> <stat>"``
    names its checkpoint before the first ``": "`` or space."""
    def arm(name: str) -> str:
        return name.split(": ", 1)[0].split(" ", 1)[0]

    return list(dict.fromkeys([arm(c["b"]) for c in claims] + [arm(c["a"]) for c in claims]))
