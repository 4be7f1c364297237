"""Figures of the token-analysis notebook (drawing only; data comes from repro.analysis.tokens)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np


def pos_frequency_figure(tags: Sequence[str], freq: np.ndarray, edges: np.ndarray, show: Sequence[str],
                         base_rate: Mapping[str, float] | None = None, title: str = ""):
    """LR-Fig3: share of each POS tag among the impactful tokens per position bin (solid), with its
    share among all tokens (dotted) for reference."""
    centers = (np.asarray(edges[:-1]) + np.asarray(edges[1:])) / 2
    fig, ax = plt.subplots(figsize=(7.5, 3.8))
    for k, tag in enumerate(show):
        if tag not in tags:
            continue
        color = f"C{k % 10}"
        ax.plot(centers, freq[list(tags).index(tag)], marker="o", ms=3, color=color, label=tag)
        if base_rate and tag in base_rate:
            ax.axhline(base_rate[tag], color=color, ls=":", lw=1)
    ax.set_xlabel("token position in the sample")
    ax.set_ylabel("frequency among top tokens")
    ax.set_ylim(bottom=0)
    ax.set_title(title, fontsize=9)
    ax.legend(fontsize=7, ncol=min(len(show), 5), loc="upper right")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def change_by_position_figure(changes: np.ndarray, selected: np.ndarray, bins: int, title: str = ""):
    """Mean |logit change| per position bin, over all tokens and over the selected (top) tokens."""
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
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig
