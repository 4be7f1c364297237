"""Figures of ProLong's ablations (drawing only; the points come from :func:`repro.reports.prolong.share_points`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def _known(points: Sequence[Mapping], key: str) -> list[Mapping]:
    return [x for x in points if x.get(key) is not None]


def share_curves(points: Sequence[Mapping], title: str = ""):
    """PL-Fig3: downstream, recall and short accuracy (left) and long-document perplexity (right) against the share
    of long data; error bars are the training-seed std where an arm has replicates."""
    if not points:
        raise ValueError("no points to draw; allowed: at least one long-share arm")
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(9, 3.4))
    for key, label, style in (("long", "downstream (doable tasks, target)", "o-"), ("recall", "recall", "s--"),
                              ("short", "short (NIAH, base window)", "^:")):
        pts = _known(points, key)
        if pts:
            ax.errorbar([x["long_share"] for x in pts], [x[key] for x in pts],
                        yerr=[x.get(f"{key}_std") or 0.0 for x in pts], fmt=style, capsize=3, label=label)
    ax.set_xlabel("long data (% of non-task rows)")
    ax.set_ylabel("accuracy (%)")
    ax.legend(fontsize=7)
    pts = _known(points, "ppl")
    if pts:
        bx.errorbar([x["long_share"] for x in pts], [x["ppl"] for x in pts],
                    yerr=[x.get("ppl_std") or 0.0 for x in pts], fmt="o-", color="C3", capsize=3)
    bx.set_xlabel("long data (% of non-task rows)")
    bx.set_ylabel("long-document perplexity")
    for a in (ax, bx):
        a.axvline(60, color="gray", lw=0.8, ls=":")
        a.grid(alpha=0.3)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def ppl_vs_downstream(points: Sequence[Mapping], title: str = ""):
    """PL-Fig1: long-document perplexity (x) against the downstream average (y), one point per long share."""
    pts = [x for x in points if x.get("ppl") is not None and x.get("long") is not None]
    if not pts:
        raise ValueError("no point has both a perplexity and a downstream score")
    fig, ax = plt.subplots(figsize=(4.6, 3.4))
    ax.plot([x["ppl"] for x in pts], [x["long"] for x in pts], "o-", color="C0")
    for x in pts:
        ax.annotate(f"{x['long_share']}%", (x["ppl"], x["long"]), textcoords="offset points", xytext=(4, 4),
                    fontsize=8)
    ax.set_xlabel("long-document perplexity (lower is better)")
    ax.set_ylabel("downstream accuracy (%)")
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    return fig
