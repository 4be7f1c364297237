"""Figures for the position-transform section: arrays and rows in, Figure out.

All numbers come from :mod:`repro.positions`; these functions only draw.
"""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure

METHOD_STYLE: dict[str, tuple[str, str, bool, bool]] = {
    "flt": ("0.3", "s", True, False),
    "rpes": ("C2", "D", True, True),
    "pose": ("C0", "o", True, True),
    "pose_official": ("C0", "o", False, False),
    "longrecipe_eq7": ("C1", "^", True, False),
    "longrecipe": ("C3", "o", True, True),
    "longrecipe_official": ("C3", "o", False, False),
}
"""LR-Fig2's methods -> (colour, marker, filled, deciding). The papers' readings are filled, the authors' code's
(``*_official``) hollow markers or dashed lines in the same colour; the arms LR-Fig2's verdict compares (LongRecipe,
PoSE, RPES) are ``deciding``, drawn larger or thicker, the others are context."""
ALIASES = {"longrecipe_alg1": "longrecipe"}
"""Transform names drawn in the style of the LR-Fig2 method they implement."""
VIEWS = ("skip", "cyclic", "dilation", "chunk_permutation")
"""The self-distillation views of the transforms figure (the others are context-extension transforms)."""


def _style(method: str, k: int) -> tuple[str, str, bool, bool]:
    """(colour, marker, filled, deciding) of ``method``: :data:`METHOD_STYLE`'s, purple for a self-distillation
    view, else the ``k``-th of five colours LR-Fig2 does not use."""
    if method in VIEWS:  # one colour for the self-distillation views, none of LR-Fig2's
        return "C4", "v", True, False
    return METHOD_STYLE.get(ALIASES.get(method, method), (f"C{5 + k % 5}", "v", True, False))


def _verdict_title(claim: str, verdict: str) -> str:
    """``claim: verdict`` (the claim alone without a verdict)."""
    return f"{claim}: {verdict}" if verdict else claim


def plot_transform_examples(examples: Mapping[str, np.ndarray], target: int, ncols: int = 3) -> Figure:
    """LR-Fig2 (transforms): position id vs token index, one panel per transform (self-distillation views: the
    perturbed indices), all on one y-range up to the target window (dashed) so that the reach of each transform
    compares across panels; each in its LR-Fig2 method's colour."""
    names = list(examples)
    nrows = max(1, int(np.ceil(len(names) / ncols)))
    fig, axes = plt.subplots(nrows, ncols, figsize=(3.4 * ncols, 2.5 * nrows + 0.5), squeeze=False, sharey=True)
    for k, (ax, name) in enumerate(zip(axes.flat, names)):
        p = np.asarray(examples[name])
        ax.plot(np.arange(p.size), p, ".", ms=1.5, color=_style(name, k)[0])
        ax.axhline(target - 1, color="grey", lw=0.6, ls="--")
        ax.set_title(f"{name} (self-distillation view)" if name in VIEWS else name, fontsize=8)
        ax.set_xlabel("token index", fontsize=8)
        ax.set_ylabel("position id", fontsize=8)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(names):]:
        ax.axis("off")
    n = max((np.asarray(v).size for v in examples.values()), default=0)
    fig.suptitle(f"LR-Fig2 (transforms): where one draw of each transform puts a {n}-token sample in the "
                 f"{target}-position window\n(dashed: the last position, {target - 1}; FLT and the self-distillation "
                 "views stay near the sample's own length;\nRPES and LongRecipe spread it over the whole window, PoSE "
                 "moves its second chunk by a random offset)", fontsize=9)
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
    """LR-Fig2 (coverage): tokens per position and token pairs per relative distance, per draw, for each method
    (LR-Fig2's colours; the authors' code's readings dashed, the deciding arms thicker). One legend below both
    panels.

    ``sample_len``: marks position ``n`` (tokens right of it are at positions ``>= n``)."""
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 3.9))
    for k, (name, c) in enumerate(position_counts.items()):
        colour, _, filled, deciding = _style(name, k)
        x, y = _rebin(c, bins)
        a.step(x, y / draws, where="post", label=name, lw=1.4 if deciding else 0.9, color=colour,
               ls="-" if filled else "--")
    if sample_len is not None:
        a.axvline(sample_len, color="grey", lw=0.6, ls=":")
        a.text(sample_len, 0.02, f" n = {sample_len}", fontsize=7, color="grey", transform=a.get_xaxis_transform())
    a.set_xlabel("position id")
    a.set_ylabel("tokens per position per draw")
    a.set_title("position coverage", fontsize=9)
    for k, (name, c) in enumerate(distance_counts.items()):
        colour, _, filled, deciding = _style(name, k)
        x, y = _rebin(np.asarray(c)[1:], bins)
        b.step(x + 1, y / draws, where="post", label=name, lw=1.4 if deciding else 0.9, color=colour,
               ls="-" if filled else "--")
    b.set_yscale("log")
    b.set_xlabel("relative distance")
    b.set_ylabel("token pairs per distance per draw")
    b.set_title("relative-distance coverage", fontsize=9)
    handles, labels = a.get_legend_handles_labels()
    fig.suptitle(f"LR-Fig2 (coverage): how evenly each method covers the target window, over {draws} draws "
                 "(FLT stops at n; PoSE favours low positions and short distances)", fontsize=9)
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(labels), fontsize=7,
               frameon=False)
    return fig


def _compact(v: float, digits: int) -> str:
    """A value label: ``digits`` significant digits, thousands as ``k`` (``43.7k``, ``1.37k``), NaN as empty."""
    if not np.isfinite(v):
        return ""
    if abs(v) >= 1e3:  # 1370 as 1.37k, not 1.37e+03
        return f"{v / 1e3:.{digits}g}k"
    return f"{v:.{digits}g}"


def _headroom(ax, log: bool) -> None:
    """Room above the highest point for its vertical value label (a third of the axis; on a log axis a factor)."""
    lo, hi = ax.get_ylim()
    ax.set_ylim(lo, hi * 30 if log else hi + (hi - lo) / 2)


def _row_se(r: Mapping | None, key: str) -> float:
    """SE of a row's mean over its draws, the table's ``<key>_se`` column (std / sqrt(draws - 1), as the LR-Fig2
    verdict takes it, :func:`repro.positions.lr_fig2_summary`); 0 with one draw."""
    return 0.0 if r is None or r.get(f"{key}_se") is None else float(r[f"{key}_se"])


LR_FIG2_CLAIM = "LR-Fig2: LongRecipe's average token distance about 2x PoSE's at the largest target, " \
                "its continuous segments longer than RPES's"
"""The claim LR-Fig2's verdict tests (:data:`repro.claims.longrecipe.HEADLINES`)."""


def plot_lr_fig2(rows: Sequence[Mapping], methods: Sequence[str] | None = None,
                 texts: Sequence[str] | None = None, verdict: str = "") -> Figure:
    """LongRecipe Fig. 2: average token distance, mean continuous-segment length and the share of tokens at
    positions >= n per method x target, as points ±1 SE over the draws (std / sqrt(draws - 1), the SE the verdict
    uses; the share has none); one row of panels per text (``mixed``, ``prose``). The segment panel is on a log
    axis (1.4 to 10^5 tokens), the others start at 0 so that ratios read off them. Each point's value is written
    vertically above it, so that neighbouring labels never overlap. The deciding arms (LongRecipe, PoSE, RPES) are
    larger; the authors' code's readings are hollow. One legend below the panels; the title states the claim and
    ``verdict``."""
    targets = sorted({r["target"] for r in rows})
    methods = list(methods or dict.fromkeys(r["method"] for r in rows))
    texts = list(texts or dict.fromkeys(r.get("text", "mixed") for r in rows))
    by = {(r["method"], r.get("text", "mixed"), r["target"]): r for r in rows}
    panels = [("avg_token_distance", "average token distance", "mean |p_i - p_j| (positions)", False),
              ("mean_segment_length", "mean continuous segment", "tokens per +1 run (log scale)", True),
              ("share_at_or_beyond_n", "share of tokens at positions >= n", "share of the sample's tokens", False)]
    fig, axes = plt.subplots(len(texts), len(panels), figsize=(14, 3.5 * len(texts) + 0.8), squeeze=False)
    width = 0.8 / max(1, len(methods))
    x = np.arange(len(targets))
    for row, text in enumerate(texts):
        for col, (key, label, unit, log) in enumerate(panels):
            ax = axes[row, col]
            if log:
                ax.set_yscale("log")
            for i, m in enumerate(methods):
                colour, marker, filled, deciding = _style(m, i)
                rs = [by.get((m, text, t)) for t in targets]
                vals = np.array([r.get(key, np.nan) if r else np.nan for r in rs], dtype=float)
                ses = np.array([_row_se(r, key) for r in rs])
                xs = x + (i - (len(methods) - 1) / 2) * width
                ax.errorbar(xs, vals, yerr=ses, fmt=marker, ms=6.5 if deciding else 5, color=colour,
                            mfc=colour if filled else "white", mew=1.2, elinewidth=1, capsize=2, label=m)
                for xi, v, e in zip(xs, vals, ses):
                    ax.annotate(_compact(v, 2 if key == "share_at_or_beyond_n" else 3), (xi, v + e),
                                xytext=(0, 4), textcoords="offset points", ha="center", va="bottom", rotation=90,
                                fontsize=7)
            if not log:
                ax.set_ylim(bottom=0)
            _headroom(ax, log)
            ax.set_xticks(x, [f"{t // 1024}K" if t % 1024 == 0 else str(t) for t in targets])
            ax.set_xlim(-0.5, len(targets) - 0.5)
            ax.set_xlabel("target window", fontsize=8)
            ax.tick_params(labelsize=7)
            ax.grid(axis="y", alpha=0.3)
            ax.set_ylabel(unit, fontsize=7)
            ax.set_title(f"{label} ({text} text)", fontsize=8)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.suptitle(f"{_verdict_title(LR_FIG2_CLAIM, verdict)}\npoints ±1 SE over the transforms' random draws "
                 "(std / sqrt(draws - 1), the verdict's SE); hollow: the authors' code's reading", fontsize=9)
    fig.tight_layout()
    fig.legend(handles, labels, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=len(labels), fontsize=7,
               frameon=False)
    return fig


LR_ALG1_CLAIM = "LR-Alg1: sentences keep their order and inner positions, the first at 0, spread over the window"
"""The claim LR-Alg1's verdict tests (:data:`repro.claims.longrecipe.HEADLINES`)."""


def plot_lr_alg1(trace: Mapping, tokens: Sequence[str] | None = None, verdict: str = "") -> Figure:
    """LongRecipe Algorithm 1 worked example from :func:`repro.positions.longrecipe_alg1_trace`.

    Top: the target window's cells (grey empty, coloured by sentence; drawn as spans, not an image). Bottom:
    position id vs token index, sentence starts dotted. The title states the claim and ``verdict``.
    """
    cells = np.asarray(trace["cells"])
    pos = np.asarray(trace["positions"])
    starts = np.asarray(trace["sentence_starts"])
    fig, (a, b) = plt.subplots(2, 1, figsize=(11, 5.0), gridspec_kw={"height_ratios": [1, 2.2]})
    cmap = plt.get_cmap("tab10")
    edges = np.flatnonzero(np.diff(cells)) + 1
    for lo, hi in zip(np.r_[0, edges], np.r_[edges, cells.size]):
        c = cells[lo]
        a.broken_barh([(lo - 0.5, hi - lo)], (0, 1), color=(0.88, 0.88, 0.88) if c < 0 else cmap(c % 10))
    a.set_xlim(-0.5, cells.size - 0.5)
    a.set_ylim(0, 1)
    a.set_yticks([])
    a.set_xlabel("cell of the target window (= new position id; grey: empty)", fontsize=8)
    slots = np.asarray(trace["slots"])
    a.set_title(f"N = {starts.size} sentences, {cells.size - pos.size} empty cells, slots q = {slots.tolist()}",
                fontsize=8)
    sent = np.repeat(np.arange(starts.size), np.asarray(trace["sentence_lengths"]))
    b.scatter(np.arange(pos.size), pos, c=[cmap(s % 10) for s in sent], s=10)
    for s in starts:
        b.axvline(s - 0.5, color="grey", lw=0.5, ls=":")
    if tokens is not None:
        b.set_xticks(np.arange(len(tokens)), [t.replace("\n", "\\n") for t in tokens], rotation=90, fontsize=7)
    b.set_xlabel("token (dotted: sentence starts)", fontsize=8)
    b.set_ylabel("position id", fontsize=8)
    b.tick_params(axis="y", labelsize=7)
    fig.suptitle(_verdict_title(LR_ALG1_CLAIM, verdict), fontsize=9)
    fig.tight_layout()
    return fig
