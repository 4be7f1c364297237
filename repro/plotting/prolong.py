"""Figures of ProLong's ablations (drawing only; the points come from :func:`repro.reports.prolong.share_points`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt

from repro.plotting.axes import SE_NOTE, noise_aware_ylim


def _known(points: Sequence[Mapping], key: str) -> list[Mapping]:
    return [x for x in points if x.get(key) is not None]


def _ses(points: Sequence[Mapping], key: str) -> list[float]:
    """The points' ``<key>_se`` (0 where a point has none: no bar drawn)."""
    return [x.get(f"{key}_se") or 0.0 for x in points]


def share_curves(points: Sequence[Mapping], title: str = ""):
    """PL-Fig3: downstream, recall and short accuracy (left) and long-document perplexity (right) against the share
    of long data; error bars are each point's ±1 SE (``<key>_se``: prompts or documents, and training seeds where
    measured); the y-axes hold every bar (:func:`repro.plotting.axes.noise_aware_ylim`)."""
    if not points:
        raise ValueError("no points to draw; allowed: at least one long-share arm")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.4))
    values, ses = [], []
    for key, label, style in (("long", "downstream (doable tasks, target)", "o-"), ("recall", "recall", "s--"),
                              ("short", "short (NIAH, base window)", "^:")):
        pts = _known(points, key)
        if pts:
            ax.errorbar([x["long_share"] for x in pts], [x[key] for x in pts], yerr=_ses(pts, key), fmt=style,
                        capsize=3, label=label)
            values, ses = values + [x[key] for x in pts], ses + _ses(pts, key)
    ax.set_xlabel("long data (% of non-task rows)")
    ax.set_ylabel(f"accuracy (%; {SE_NOTE})")
    noise_aware_ylim(ax, values, ses, bounds=(0, 100))
    ax.legend(fontsize=7)
    pts = _known(points, "ppl")
    if pts:
        bx.errorbar([x["long_share"] for x in pts], [x["ppl"] for x in pts], yerr=_ses(pts, "ppl"), fmt="o-",
                    color="C3", capsize=3)
        noise_aware_ylim(bx, [x["ppl"] for x in pts], _ses(pts, "ppl"), bounds=(1, None))
    bx.set_xlabel("long data (% of non-task rows)")
    bx.set_ylabel(f"long-doc perplexity ({SE_NOTE})")
    for a in (ax, bx):
        a.axvline(60, color="gray", lw=0.8, ls=":")
        a.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def ppl_vs_downstream(points: Sequence[Mapping], title: str = ""):
    """PL-Fig1: long-document perplexity (x) against the downstream average (y), one point per long share, with
    ±1 SE bars on both (``ppl_se``, ``long_se``). Each share is a marker of its own colour named in the legend (no
    text beside the points: close points would overlap their labels)."""
    pts = [x for x in points if x.get("ppl") is not None and x.get("long") is not None]
    if not pts:
        raise ValueError("no point has both a perplexity and a downstream score")
    pts = sorted(pts, key=lambda x: x["long_share"])
    fig, ax = plt.subplots(figsize=(5.4, 3.4))
    ax.errorbar([x["ppl"] for x in pts], [x["long"] for x in pts], xerr=_ses(pts, "ppl"), yerr=_ses(pts, "long"),
                fmt="-", color="0.6", lw=0.8, capsize=3, zorder=1)
    colours = plt.get_cmap("viridis")
    for i, x in enumerate(pts):
        ax.scatter([x["ppl"]], [x["long"]], s=36, zorder=2, color=colours(i / max(len(pts) - 1, 1)),
                   label=f"{x['long_share']}% long", edgecolors="k", linewidths=0.5)
    ax.legend(fontsize=7, title="long data", title_fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.set_xlabel(f"long-document perplexity (lower is better; {SE_NOTE})", fontsize=8)
    ax.set_ylabel("downstream accuracy (%)")
    noise_aware_ylim(ax, [x["long"] for x in pts], _ses(pts, "long"), bounds=(0, 100))
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
