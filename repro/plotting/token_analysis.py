"""Figures of the token-analysis notebook (drawing only; data comes from repro.analysis.tokens)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D


def pos_frequency_figure(tags: Sequence[str], freq: np.ndarray, edges: np.ndarray, show: Sequence[str],
                         base_rate: Mapping[str, float] | None = None, title: str = "", verdict: str = "",
                         claim_tags: Sequence[str] = (), subtitle: str = ""):
    """LR-Fig3: share of each POS tag of ``show`` among the impactful tokens per position bin (solid), with its
    share among all tokens (dotted, same colour) for reference.

    ``claim_tags``: the tags the verdict compares, the first (the paper's most frequent tag) thickest; the other
    tags of ``show`` are context, drawn dashed and thinner. The legend, beside the axes, names both line styles;
    the title is ``title: verdict`` with ``subtitle`` below it."""
    centers = (np.asarray(edges[:-1]) + np.asarray(edges[1:])) / 2
    fig, ax = plt.subplots(figsize=(8.0, 3.9))
    handles = []
    for k, tag in enumerate(show):
        if tag not in tags:
            continue
        color = f"C{k % 10}"
        deciding = not claim_tags or tag in claim_tags
        lw = 2.2 if claim_tags and tag == claim_tags[0] else 1.4 if deciding else 0.9
        handles += ax.plot(centers, freq[list(tags).index(tag)], marker="o", ms=3.5 if deciding else 2.5, lw=lw,
                           ls="-" if deciding else "--", color=color, label=tag if deciding else f"{tag} (context)")
        if base_rate and tag in base_rate:
            ax.axhline(base_rate[tag], color=color, ls=":", lw=1)
    if base_rate:
        handles.append(Line2D([], [], color="grey", ls=":", lw=1, label="dotted: the tag's share\namong all tokens"))
    ax.set_xlabel("token position in the sample")
    ax.set_ylabel("frequency among top tokens")
    ax.set_ylim(bottom=0)
    head = f"{title}: {verdict}" if title and verdict else title
    ax.set_title("\n".join(x for x in (head, subtitle) if x), fontsize=8)
    ax.legend(handles=handles, fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def change_by_position_figure(changes: np.ndarray, selected: np.ndarray, bins: int, title: str = ""):
    """Mean |logit change| per position bin, over all tokens and over the selected (top) tokens (legend beside
    the axes)."""
    n = changes.shape[1]
    edges = np.linspace(0, n, bins + 1).round().astype(int)
    centers = (edges[:-1] + edges[1:]) / 2
    all_mean = [changes[:, a:b].mean() for a, b in zip(edges[:-1], edges[1:])]
    top_mean = [changes[:, a:b][selected[:, a:b]].mean() for a, b in zip(edges[:-1], edges[1:])]
    fig, ax = plt.subplots(figsize=(6.5, 3.2))
    ax.plot(centers, all_mean, marker="o", ms=3, label="all tokens")
    ax.plot(centers, top_mean, marker="o", ms=3, label="top tokens")
    ax.set_xlabel("token position in the sample")
    ax.set_ylabel("mean |S_H'(x_t) - S_H(x_t)|")
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
