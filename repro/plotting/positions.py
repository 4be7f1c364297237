"""Figures for the position-transform section: arrays and rows in, Figure out.

All numbers come from :mod:`repro.positions`; these functions only draw.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure


def plot_transform_examples(examples: Mapping[str, np.ndarray], target: int, ncols: int = 3) -> Figure:
    """Position vs token index, one panel per transform (views: the perturbed indices)."""
    names = list(examples)
    nrows = max(1, int(np.ceil(len(names) / ncols)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.6 * ncols, 2.8 * nrows), squeeze=False)
    for ax, name in zip(axes.flat, names):
        p = np.asarray(examples[name])
        ax.plot(np.arange(p.size), p, ".", ms=1.5)
        ax.axhline(target - 1, color="grey", lw=0.6, ls="--")
        ax.set_title(name, fontsize=9)
        ax.set_xlabel("token index", fontsize=8)
        ax.set_ylabel("position id", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    fig.suptitle(f"one draw per transform (dashed: target - 1 = {target - 1})", fontsize=10)
    fig.tight_layout()
    return fig


def _rebin(counts: np.ndarray, bins: int) -> tuple[np.ndarray, np.ndarray]:
    counts = np.asarray(counts, dtype=np.float64)
    edges = np.linspace(0, counts.size, min(bins, counts.size) + 1).astype(int)
    sums = np.add.reduceat(counts, edges[:-1])
    widths = np.diff(edges)
    return edges[:-1], sums / widths


def plot_coverage(position_counts: Mapping[str, np.ndarray], distance_counts: Mapping[str, np.ndarray],
                  draws: int, bins: int = 128, sample_len: int | None = None) -> Figure:
    """Coverage of the target window: tokens per position and pairs per distance, per draw.

    ``sample_len``: marks position ``n`` (tokens right of it are at positions ``>= n``)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.6))
    for name, c in position_counts.items():
        x, y = _rebin(c, bins)
        a.step(x, y / draws, where="post", label=name, lw=1)
    if sample_len is not None:
        a.axvline(sample_len, color="grey", lw=0.6, ls="--")
        a.text(sample_len, 0.02, f" n = {sample_len}", fontsize=7, color="grey", transform=a.get_xaxis_transform())
    a.set_xlabel("position id")
    a.set_ylabel("tokens per position per draw")
    a.set_title("position coverage")
    for name, c in distance_counts.items():
        x, y = _rebin(np.asarray(c)[1:], bins)
        b.step(x + 1, y / draws, where="post", label=name, lw=1)
    b.set_yscale("log")
    b.set_xlabel("relative distance")
    b.set_ylabel("token pairs per distance per draw")
    b.set_title("relative-distance coverage")
    a.legend(fontsize=7, loc="upper right", ncol=2)
    fig.tight_layout()
    return fig


def _compact(v: float, digits: int) -> str:
    """A value label: ``digits`` significant digits, thousands as ``k`` (``43.7k``), NaN as empty."""
    if not np.isfinite(v):
        return ""
    if abs(v) >= 1e4:
        return f"{v / 1e3:.{digits}g}k"
    return f"{v:.{digits}g}"


def _headroom(ax, log: bool) -> None:
    """Room above the tallest bar for its vertical value label (a third of the axis; on a log axis a factor)."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 30 if log else hi + (hi - lo) / 2)


def plot_lr_fig2(rows: Sequence[Mapping], methods: Sequence[str] | None = None,
                 texts: Sequence[str] | None = None) -> Figure:
    """LongRecipe Fig. 2: average token distance, mean continuous-segment length and the share of tokens at
    positions >= n per method x target; one row of panels per text (``mixed``, ``prose``). Each bar's value is
    written vertically above it, so that neighbouring labels never overlap."""
    targets = sorted({r["target"] for r in rows})
    methods = list(methods or dict.fromkeys(r["method"] for r in rows))
    texts = list(texts or dict.fromkeys(r.get("text", "mixed") for r in rows))
    by = {(r["method"], r.get("text", "mixed"), r["target"]): r for r in rows}
    panels = [("avg_token_distance", "average token distance", False),
              ("mean_segment_length", "mean continuous segment (tokens)", True),
              ("share_at_or_beyond_n", "share of tokens at positions >= n", False)]
    fig, axes = plt.subplots(len(texts), len(panels), figsize=(16, 3.8 * len(texts)), squeeze=False)
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(targets))
    for row, text in enumerate(texts):
        for col, (key, label, log) in enumerate(panels):
            ax = axes[row, col]
            if log:
                ax.set_yscale("log")
            for i, m in enumerate(methods):
                vals = [by[(m, text, t)].get(key, np.nan) if (m, text, t) in by else np.nan for t in targets]
                bars = ax.bar(x + (i - (len(methods) - 1) / 2) * width, vals, width, label=m)
                ax.bar_label(bars, labels=[_compact(v, 2 if key == "share_at_or_beyond_n" else 3) for v in vals],
                             fontsize=6, rotation=90, padding=2)
            _headroom(ax, log)
            ax.set_xticks(x, [f"{t // 1024}K" if t % 1024 == 0 else str(t) for t in targets])
            ax.set_xlabel("target window")
            ax.set_title(f"{label} ({text} text)", fontsize=10)
    axes[0, 0].legend(fontsize=7)
    fig.tight_layout()
    return fig


def plot_lr_alg1(trace: Mapping, tokens: Sequence[str] | None = None) -> Figure:
    """LongRecipe Algorithm 1 worked example from :func:`repro.positions.longrecipe_alg1_trace`.

    Top: the target window's cells (grey empty, coloured by sentence). Bottom:
    position id vs token index, sentence starts marked.
    """
    cells = np.asarray(trace["cells"])
    pos = np.asarray(trace["positions"])
    starts = np.asarray(trace["sentence_starts"])
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 4.6), gridspec_kw={"height_ratios": [1, 2.2]})
    cmap = plt.get_cmap("tab10")
    colours = np.array([(0.88, 0.88, 0.88, 1.0) if c < 0 else cmap(c % 10) for c in cells])
    a.imshow(colours[None, :, :], aspect="auto", interpolation="nearest")
    a.set_yticks([])
    a.set_xlabel("cell of the target window (= new position id)")
    slots = np.asarray(trace["slots"])
    a.set_title(f"Algorithm 1: N = {starts.size} sentences, {cells.size - pos.size} empty cells, "
                f"slots q = {slots.tolist()}", fontsize=9)
    sent = np.repeat(np.arange(starts.size), np.asarray(trace["sentence_lengths"]))
    b.scatter(np.arange(pos.size), pos, c=[cmap(s % 10) for s in sent], s=10)
    for s in starts:
        b.axvline(s - 0.5, color="grey", lw=0.5, ls=":")
    if tokens is not None:
        b.set_xticks(np.arange(len(tokens)), [t.replace("\n", "\\n") for t in tokens], rotation=90, fontsize=6)
    b.set_xlabel("token index")
    b.set_ylabel("position id")
    fig.tight_layout()
    return fig
