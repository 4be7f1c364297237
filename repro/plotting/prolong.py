"""Figures of ProLong's ablations (drawing only; the points come from :func:`repro.reports.prolong.share_points`).

The error bars are the ``<key>_pse`` of each point: the paired standard error of the arm's gap to the recipe's 60%
long share, the SE the verdicts test and the tables' ``SE vs 60% (paired)`` columns print. The recipe is the
reference: it has no bar, and a dotted line at its value lets each other share be read against it."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt

from repro.plotting.axes import noise_aware_ylim

RECIPE_SHARE = 60
"""The recipe's long-data share (percent): the reference every paired SE is taken against."""
PSE_NOTE = "bars ±1 SE of the gap to 60% (paired)"
"""The axis-label note of the paired error bars."""
MIN_SPAN = 4.0
"""The least y range (percentage points) of an accuracy panel of :func:`share_curves`."""
MARKERS = ("o", "s", "^", "D", "v", "P", "X", "h")
"""One marker shape per long share in :func:`ppl_vs_downstream` (drawn hollow, so coinciding shares stay visible)."""


def _known(points: Sequence[Mapping], key: str) -> list[Mapping]:
    return [x for x in points if x.get(key) is not None]


def _pses(points: Sequence[Mapping], key: str) -> list[float]:
    """The points' ``<key>_pse`` (0 where a point has none, the recipe included: no bar drawn)."""
    return [x.get(f"{key}_pse") or 0.0 for x in points]


def _reference(points: Sequence[Mapping]) -> Mapping | None:
    return next((x for x in points if x["long_share"] == RECIPE_SHARE), None)


PANELS = (("long", "downstream (%)", "downstream: doable tasks at the target", "C0"),
          ("recall", "recall (%)", "recall (JSON KV, multi-key)", "C1"),
          ("short", "short NIAH (%)", "short: NIAH at the base window", "0.45"),
          ("ppl", "long-doc perplexity", "long-document perplexity", "C3"))
"""PL-Fig3's panels: point key, y label, panel title, colour (the short-context stand-in muted)."""


def share_curves(points: Sequence[Mapping], title: str = ""):
    """PL-Fig3: one panel per measure against the share of long data: downstream (the verdict's), recall, short
    NIAH and long-document perplexity, each with ±1 SE bars of the gap to the 60% recipe (``<key>_pse``) and a
    dotted line at the recipe's value. Recall when it is zero at every share, and a measure never measured, get no
    panel; a note under the figure says so."""
    if not points:
        raise ValueError("no points to draw; allowed: at least one long-share arm")
    shown, dropped = [], []
    for key, ylabel, name, colour in PANELS:
        pts = _known(points, key)
        if pts and (key != "recall" or any(x[key] != 0 for x in pts)):  # recall: the part that can be all zero
            shown.append((key, ylabel, name, colour, pts))
        else:
            dropped.append(f"{name}: {'0 at every share' if pts else 'not measured'} (not drawn)")
    fig, axes = plt.subplots(1, len(shown), figsize=(3.1 * len(shown) + 0.6, 3.6), squeeze=False,
                             layout="constrained")
    ref = _reference(points)
    for ax, (key, ylabel, name, colour, pts) in zip(axes[0], shown):
        ys, es = [x[key] for x in pts], _pses(pts, key)
        ax.errorbar([x["long_share"] for x in pts], ys, yerr=es, fmt="o-", color=colour, capsize=3, label=name)
        if ref is not None and ref.get(key) is not None:
            ax.axhline(ref[key], color="k", lw=0.8, ls=":")
            ax.plot([RECIPE_SHARE], [ref[key]], marker="*", ms=12, color=colour, mec="k", ls="none")
        if key != "ppl":  # percent: at least MIN_SPAN points of axis, so a flat line is not blown up
            lo = max(0.0, min(y - e for y, e in zip(ys, es)))
            ax.set_ylim(lo - 0.2, max(lo + MIN_SPAN, max(y + e for y, e in zip(ys, es))) + 0.2)
        noise_aware_ylim(ax, ys, es, bounds=(0, 100) if key != "ppl" else (1, None))
        ax.set_xticks([x["long_share"] for x in pts])
        ax.set_xlabel("long data (% of non-task rows)", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.set_title(name, fontsize=8)
        ax.grid(alpha=0.3)
    fig.supxlabel("\n".join([f"star and dotted line: the 60% recipe; {PSE_NOTE}, the SE the verdict tests", *dropped]),
                  fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    return fig


def ppl_vs_downstream(points: Sequence[Mapping], title: str = ""):
    """PL-Fig1: long-document perplexity (x, lower is better) against the downstream average (y), one hollow
    marker of its own shape and colour per long share (named in the legend beside the axes; coinciding shares
    stay visible as nested shapes), joined in share order, with ±1 SE bars on both of the gap to the 60% recipe
    (``ppl_pse``, ``long_pse``) and dotted lines through the recipe's point."""
    pts = [x for x in points if x.get("ppl") is not None and x.get("long") is not None]
    if not pts:
        raise ValueError("no point has both a perplexity and a downstream score")
    pts = sorted(pts, key=lambda x: x["long_share"])
    fig, ax = plt.subplots(figsize=(6.2, 4.0), layout="constrained")
    ax.errorbar([x["ppl"] for x in pts], [x["long"] for x in pts], xerr=_pses(pts, "ppl"), yerr=_pses(pts, "long"),
                fmt="-", color="0.6", lw=0.8, capsize=3, zorder=1, label="_bars")
    for i, x in enumerate(pts):
        ax.scatter([x["ppl"]], [x["long"]], s=110 - 10 * i, zorder=2, marker=MARKERS[i % len(MARKERS)],
                   facecolors="none", edgecolors=f"C{i % 10}", linewidths=1.8,
                   label=f"{x['long_share']}% long" + (" (recipe)" if x["long_share"] == RECIPE_SHARE else ""))
    ref = _reference(pts)
    if ref is not None:
        ax.axhline(ref["long"], color="k", lw=0.7, ls=":")
        ax.axvline(ref["ppl"], color="k", lw=0.7, ls=":")
    ax.legend(fontsize=8, title="long data", title_fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0))
    ax.set_xlabel(f"long-document perplexity (lower is better)\n{PSE_NOTE} on both axes; dotted: the recipe",
                  fontsize=8)
    ax.set_ylabel("downstream accuracy (%)", fontsize=9)
    noise_aware_ylim(ax, [x["long"] for x in pts], _pses(pts, "long"), bounds=(0, 100))
    ax.invert_xaxis()
    ax.grid(alpha=0.3)
    ax.set_title(title, fontsize=9)
    return fig
