"""Figure of the attention-distance notebook (drawing only; the records come from the pipeline's stages.attention)."""

from __future__ import annotations

import math
from typing import Mapping

import matplotlib.pyplot as plt
import numpy as np


def distance_figure(records: Mapping[str, Mapping], title: str = "", note: str = "", cols: int = 4):
    """RP-Fig2: one panel per layer with one step line per model (entries above the threshold per distance bin,
    log counts), and a last panel with the per-layer share of those entries beyond ``far x T`` (solid) and of
    their attention mass (dashed)."""
    if not records:
        raise ValueError("no records to draw; allowed: at least one model's record")
    layers = sorted({x["layer"] for r in records.values() for x in r["layers"]})
    n = len(layers) + 1
    cols = max(1, min(cols, n))
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.3 * cols, 2.7 * nrows), squeeze=False)
    flat = axes.ravel()
    first = next(iter(records.values()))
    for k, name in enumerate(records):
        color = f"C{k % 10}"
        rec = records[name]
        by_layer = {x["layer"]: x for x in rec["layers"]}
        for ax, layer in zip(flat, layers):
            if layer in by_layer:
                lay = by_layer[layer]
                counts = np.asarray(lay["counts"], dtype=float)
                ax.stairs(np.where(counts > 0, counts, np.nan), np.asarray(lay["edges"]), color=color, label=name)
        xs = [x["layer"] for x in rec["layers"]]
        flat[len(layers)].plot(xs, [x["far_share"] for x in rec["layers"]], marker="o", ms=3, color=color, label=name)
        flat[len(layers)].plot(xs, [x["far_mass_share"] for x in rec["layers"]], ls="--", color=color)
    for ax, layer in zip(flat, layers):
        ax.set_yscale("log")
        ax.set_title(f"layer {layer}", fontsize=9)
        ax.set_xlabel("query - key distance (tokens)", fontsize=8)
        ax.axvline(first["far"] * first["length"], color="0.6", lw=0.8, ls=":")
        ax.grid(alpha=0.3)
    flat[0].set_ylabel(f"weights > {first['threshold']:g} (count)", fontsize=8)
    flat[0].legend(fontsize=7)
    s = flat[len(layers)]
    s.set_title(f"share beyond {first['far']:g} T (dashed: by mass)", fontsize=9)
    s.set_xlabel("layer", fontsize=8)
    s.set_xticks(layers)
    s.set_ylim(0, 1)
    s.grid(alpha=0.3)
    for ax in flat[n:]:
        ax.axis("off")
    fig.suptitle(title + (f"\n{note}" if note else ""), fontsize=9)
    fig.tight_layout()
    return fig
