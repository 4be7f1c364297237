"""Figure of the attention-distance notebook (drawing only; the records come from the pipeline's stages.attention,
the verdict in the title from :func:`repro.reports.attention.rp_fig2`)."""

from __future__ import annotations

import math
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from repro.plotting.axes import SE_NOTE, noise_aware_ylim
from repro.plotting.ig_scores import suptitle
from repro.reports.attention import key_share_beyond
from repro.stats import paired_se

DECIDING_COLORS = ("#111111", "#d62728", "#1f77b4", "#2ca02c", "#9467bd")
"""The deciding arms' colours, in the order given (the baseline first, then the self-distillation arms)."""
MUTED_COLORS = ("#bdbdbd", "#e3b58f", "#a6c8e0", "#c9b3d6", "#b5d9a8")
"""Light tints for the context arms (base, FLT, PoSE, a user's model)."""
FONT = 8
SMALL = 7


def text_se(values: Sequence[float | None]) -> float | None:
    """SE over texts of a per-text share, as RP-Fig2's table computes it (population variance; None below two)."""
    v = [x for x in values if x is not None]
    return paired_se(v, [0.0] * len(v)) if len(v) >= 2 else None


def _styles(names: Sequence[str], emphasis: Sequence[str] | None) -> dict[str, dict]:
    """Per model: colour, line width and z-order; the ``emphasis`` arms strong and on top, the others muted."""
    strong = [n for n in (emphasis if emphasis is not None else names) if n in names] or list(names)
    out = {n: {"color": DECIDING_COLORS[k % len(DECIDING_COLORS)], "lw": 1.4, "zorder": 3}
           for k, n in enumerate(strong)}
    rest = [n for n in names if n not in out]
    out.update({n: {"color": MUTED_COLORS[k % len(MUTED_COLORS)], "lw": 0.9, "zorder": 2} for k, n in enumerate(rest)})
    return out


def distance_figure(records: Mapping[str, Mapping], title: str = "", note: str = "", cols: int = 3,
                    emphasis: Sequence[str] | None = None):
    """RP-Fig2: one panel per layer with one step line per model (entries above the threshold per distance bin,
    log counts; the dotted line at ``far x T``), then two summary panels per layer: the share of those entries
    beyond ``far x T`` (± SE over texts, the table's SE; the dashed line: the share of key positions there, what
    attention blind to distance would give) and the share of their attention mass beyond it. ``emphasis``: the
    arms the verdict compares (baseline first), drawn strong and on top; the others muted (all strong when none of
    them is there, e.g. the pretrained base alone).
    One legend below the panels."""
    if not records:
        raise ValueError("no records to draw; allowed: at least one model's record")
    layers = sorted({x["layer"] for r in records.values() for x in r["layers"]})
    n = len(layers) + 2
    cols = max(1, min(cols, n))
    nrows = math.ceil(n / cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.3 * cols, 2.6 * nrows + 0.5), squeeze=False,
                             layout="constrained")
    flat = axes.ravel()
    first = next(iter(records.values()))
    far_x = first["far"] * first["length"]
    style = _styles(list(records), emphasis)
    order = sorted(records, key=lambda name: style[name]["zorder"])  # context arms first: underneath
    share_ax, mass_ax = flat[len(layers)], flat[len(layers) + 1]
    values, ses = [], []
    for name in order:
        s, rec = style[name], records[name]
        by_layer = {x["layer"]: x for x in rec["layers"]}
        for ax, layer in zip(flat, layers):
            if layer in by_layer:
                lay = by_layer[layer]
                counts = np.asarray(lay["counts"], dtype=float)
                ax.stairs(np.where(counts > 0, counts, np.nan), np.asarray(lay["edges"]), label=name, **s)
        xs = [x["layer"] for x in rec["layers"]]
        y = [x["far_share"] for x in rec["layers"]]
        e = [text_se(x["per_sample"]["far_share"]) or 0.0 for x in rec["layers"]]
        share_ax.errorbar(xs, y, yerr=e, marker="o", ms=3, capsize=2, label=name, **s)
        mass_ax.plot(xs, [x["far_mass_share"] for x in rec["layers"]], marker="o", ms=3, label=name, **s)
        values, ses = values + y, ses + e
    for ax, layer in zip(flat, layers):
        ax.set_yscale("log")
        ax.set_title(f"layer {layer} (dotted: {first['far']:g} T)", fontsize=FONT)
        ax.set_xlabel("query - key distance (tokens)", fontsize=FONT)
        ax.set_ylabel(f"weights > {first['threshold']:g} (count)", fontsize=FONT)
        ax.axvline(far_x, color="0.5", lw=0.8, ls=":")
        ax.tick_params(which="both", labelsize=SMALL)
        ax.grid(alpha=0.3)
    blind = key_share_beyond(first["length"], first["queries"], first["far"])
    share_ax.axhline(blind, color="0.4", lw=0.8, ls="--")
    noise_aware_ylim(share_ax, values + [blind], ses + [0.0], bounds=(0, 1), pad=0.1)
    share_ax.set_title(f"entries beyond {first['far']:g} T (dashed: key positions)", fontsize=FONT)
    share_ax.set_ylabel(f"share of entries ({SE_NOTE} over texts)", fontsize=FONT)
    mass_ax.set_title(f"attention mass beyond {first['far']:g} T", fontsize=FONT)
    mass_ax.set_ylabel("share of their attention mass", fontsize=FONT)
    mass_ax.set_ylim(0, 1)
    for ax in (share_ax, mass_ax):
        ax.set_xlabel("layer", fontsize=FONT)
        ax.set_xticks(layers)
        ax.tick_params(which="both", labelsize=SMALL)
        ax.grid(alpha=0.3)
    for ax in flat[n:]:
        ax.axis("off")
    handles, labels = share_ax.get_legend_handles_labels()
    strong = [m for m in (emphasis if emphasis is not None else records) if m in records] or list(records)
    rank = {name: k for k, name in enumerate([*strong, *(m for m in records if m not in strong)])}
    pairs = sorted(zip(handles, labels), key=lambda hl: rank[hl[1]])  # the deciding arms first
    fig.legend([h for h, _ in pairs], [lab for _, lab in pairs], loc="outside lower center",
               ncol=min(len(pairs), 7), fontsize=SMALL, frameon=False)
    suptitle(fig, title + (f"\n{note}" if note else ""))
    return fig
