"""Figures of the IG-scores notebook (CDT §3, §6; drawing only: the numbers come from
:mod:`repro.reports.cdt_analysis`)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np

from repro.plotting.axes import SE_NOTE, noise_aware_ylim

TYPES = ("supporting", "interference", "irrelevant", "low_frequency")


def _bars(ax, groups: Mapping[str, Mapping[str, tuple[float, float]]], title: str, ylabel: str = "") -> None:
    """Grouped bars: one group per type, one bar per series, error bars = SE."""
    names = list(groups)
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(TYPES))
    for k, n in enumerate(names):
        m = [groups[n][t][0] for t in TYPES]
        se = [groups[n][t][1] for t in TYPES]
        ax.bar(x + (k - (len(names) - 1) / 2) * width, m, width, yerr=se, capsize=2, label=n, color=f"C{k}")
    ax.set_xticks(x, [t.replace("_", "-") for t in TYPES], fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.set_ylabel(ylabel, fontsize=8)
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def fr_vs_ig_figure(data: Mapping[str, Mapping[str, Mapping[str, tuple[float, float]]]], title: str = "",
                    counts: Mapping[str, int] | None = None):
    """CD-Fig3: one panel per answer group (right, wrong); bars per type for each score's share (±1 SE over the
    group's samples); ``counts`` (group -> samples) puts ``n`` in each panel's title."""
    fig, axes = plt.subplots(1, len(data), figsize=(5.2 * len(data), 3.2), squeeze=False)
    for ax, (g, scores) in zip(axes[0], data.items()):
        n = f" (n = {counts[g]})" if counts and g in counts else ""
        _bars(ax, scores, f"{g} answers{n}", f"share (normalized over types; {SE_NOTE})")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def denoising_figure(data: Mapping[str, Mapping[str, tuple[float, float]]], title: str = ""):
    """CD-Fig4: attention per token before and after manual denoising, per type (log scale)."""
    fig, ax = plt.subplots(figsize=(5.5, 3.2))
    _bars(ax, {"before": {t: data[t]["before"] for t in TYPES}, "after": {t: data[t]["after"] for t in TYPES}},
          title, "attention mass per token")
    ax.set_yscale("log")
    fig.tight_layout()
    return fig


def ig_vs_grad_figure(points: Mapping[str, np.ndarray], title: str = ""):
    """CD-Fig5: IG against the embedding-gradient L2 norm, one colour per type (log-log)."""
    fig, ax = plt.subplots(figsize=(4.8, 3.8))
    for k, t in enumerate(TYPES):
        m = points["types"] == t
        if m.any():
            ax.scatter(points["grad"][m], points["ig"][m], s=4, alpha=0.4, color=f"C{k}", label=t)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("||dL/dE||_2 per token", fontsize=8)
    ax.set_ylabel("IG per token (mean over heads, layers)", fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, markerscale=3)
    fig.tight_layout()
    return fig


def detection_figure(data: Mapping[str, Mapping[str, tuple[float, float]]], title: str = ""):
    """CD-Fig7: share of each type among each detector's top-k tokens."""
    fig, ax = plt.subplots(figsize=(5.8, 3.2))
    _bars(ax, data, title, "share of detected tokens")
    fig.tight_layout()
    return fig


SWEEP_CURVES = (("before", "before"), ("after_denoising", "after denoising"),
                ("after_emphasizing", "after emphasizing"))
"""CD-Fig8's curves: record key (its SE under ``<key>_se``) and label."""


def sweep_figure(rows: Sequence[Mapping], title: str = ""):
    """CD-Fig8: attention per critical token vs the denoising lr (beta = 1): before, after denoising, after the
    emphasizing step, each mean with ±1 SE bars over samples where the rows carry ``<key>_se`` (older records do
    not: no bars, and the axis label says so); the y-axis holds every bar."""
    fig, ax = plt.subplots(figsize=(5.0, 3.2))
    lrs = [r["lr"] for r in rows]
    has_se = bool(rows) and all(r.get(f"{key}_se") is not None for r in rows for key, _ in SWEEP_CURVES)
    values, ses = [], []
    for k, (key, label) in enumerate(SWEEP_CURVES):
        y, e = [r[key] for r in rows], [r.get(f"{key}_se") or 0.0 for r in rows]
        ax.errorbar(lrs, y, yerr=e, marker="o", ms=3, capsize=2, color=f"C{k}", label=label)
        values, ses = values + y, ses + e
    noise_aware_ylim(ax, values, ses, bounds=(0, None))
    ax.set_xscale("log")
    ax.set_xlabel("lr of the denoising step (beta = 1)", fontsize=8)
    ax.set_ylabel("attention per critical token" + (f"\n({SE_NOTE} over samples, unpaired)" if has_se else
                                                    "\n(no SE in these records)"), fontsize=8)
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    return fig


def em_curve_figure(data: Mapping[str, Mapping[int, Mapping]], title: str = ""):
    """CD-Fig10: accuracy (left) and the IG share of critical tokens (right) along the task fine-tunes."""
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.0))
    for k, (obj, by_step) in enumerate(data.items()):
        steps = sorted(by_step)
        acc = [by_step[s]["accuracy"] for s in steps]
        se = [by_step[s]["accuracy_se"] for s in steps]
        axes[0].errorbar(steps, acc, yerr=se, marker="o", ms=3, capsize=2, color=f"C{k}", label=obj.upper())
        axes[1].errorbar(steps, [by_step[s]["ig_critical"][0] for s in steps],
                         yerr=[by_step[s]["ig_critical"][1] for s in steps], marker="o", ms=3, capsize=2,
                         color=f"C{k}", label=obj.upper())
    axes[0].set_ylabel("accuracy", fontsize=8)
    axes[1].set_ylabel("IG share of critical tokens", fontsize=8)
    for ax in axes:
        ax.set_xlabel("training step", fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def memory_figure(rows: Sequence[Mapping], title: str = ""):
    """CD-Mem: peak memory (left) and seconds (right) against length, naive vs ours (log-log)."""
    fig, axes = plt.subplots(1, 2, figsize=(8.4, 3.0))
    for k, method in enumerate(sorted({r["method"] for r in rows})):
        ok = [r for r in rows if r["method"] == method and r["status"] == "ok"]
        xs = [r["length"] for r in ok]
        axes[0].plot(xs, [r["peak_mib"] for r in ok], marker="o", ms=3, color=f"C{k}", label=method)
        axes[1].plot(xs, [r["seconds"] for r in ok], marker="o", ms=3, color=f"C{k}", label=method)
    for ax, lab in zip(axes, ("peak memory (MiB)", "seconds")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens", fontsize=8)
        ax.set_ylabel(lab, fontsize=8)
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig


def chunk_map_figure(maps: Mapping[str, Mapping], title: str = ""):
    """CD-Fig14: one row per checkpoint, one panel per layer: the chunk-to-chunk attention map (log colour).
    Training-seed replicates (``cdt@seed1``, ...) are left out: one row per arm, its first seed."""
    from repro.methods.arms import split_seed  # repro.methods loads torch and transformers; plotting stays light

    names = [n for n in maps if split_seed(n)[1] == 0]
    layers = len(maps[names[0]]["map"])
    fig, axes = plt.subplots(len(names), layers, figsize=(2.8 * layers, 2.6 * len(names)), squeeze=False)
    for r, n in enumerate(names):
        for layer in range(layers):
            m = np.asarray(maps[n]["map"][layer], dtype=float)
            ax = axes[r, layer]
            ax.imshow(np.log10(np.where(m > 0, m, np.nan)), cmap="Reds", vmin=-3, vmax=0)
            ax.set_title(f"{n}, layer {layer}", fontsize=8)
            ax.set_xticks([])
            ax.set_yticks([])
    axes[-1, 0].set_xlabel("key chunk", fontsize=8)
    axes[-1, 0].set_ylabel("query chunk", fontsize=8)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    return fig
