"""Figures of the IG-scores notebook (CDT §3, §6) and CDT's chunked attention map (App. F; drawn in the
attention-distance notebook). Drawing only: the numbers come from :mod:`repro.reports.cdt_analysis` and
:mod:`repro.reports.cdt_effects`; each title (the claim and its verdict) is passed in by the notebook.

Every figure keeps :func:`repro.figure_rules.figure_problems`: legends sit beside or below the axes, error bars are
the SEs of the reports' tables, heat maps carry a colour bar, bars stand on linear axes, and the arms that decide a
claim are drawn in colour while context arms are muted."""

from __future__ import annotations

import math
import textwrap
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.colors import CenteredNorm, LogNorm
from matplotlib.patches import Rectangle

from repro.plotting.axes import SE_NOTE, noise_aware_ylim
from repro.reports.cdt_effects import arm_shares  # the report's own averaging: the bars are its table's SEs
from repro.reports.seeds import seed_groups
from repro.stats import mean_se

TYPES = ("supporting", "interference", "irrelevant", "low_frequency")
CRITICAL = ("supporting", "interference")
TYPE_COLORS = {"supporting": "#d62728", "interference": "#ff7f0e", "irrelevant": "#7f7f7f", "low_frequency": "#bcbd22"}
"""One colour per token type: the critical types warm, the noise types grey / olive."""
MUTED = ("#c7c7c7", "#9e9e9e", "#dadada", "#b0b0b0")
"""Greys for context series (drawn beside the deciding ones, never deciding)."""
FONT = 8
SMALL = 7


def suptitle(fig, title: str, fontsize: float = 9) -> None:
    """``fig``'s title, each line wrapped to the figure's width (a long claim and verdict stay on the page)."""
    width = max(20, int(fig.get_figwidth() * 72 / (0.55 * fontsize)))  # ~0.55 em per character
    lines = [w for line in title.split("\n") for w in (textwrap.wrap(line, width) or [""])]
    fig.suptitle("\n".join(lines), fontsize=fontsize)


def _legend_right(ax, **kw) -> None:
    """``ax``'s legend beside it, outside its data area (top-left corner just right of the axes)."""
    ax.legend(fontsize=SMALL, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0, **kw)


def _type_label(t: str) -> str:
    return t.replace("_", "-")


def _bars(ax, groups: Mapping[str, Mapping[str, tuple[float, float]]], colors: Mapping[str, str],
          hatches: Mapping[str, str] | None = None) -> None:
    """Grouped bars on a linear axis (from 0: bars stick to it): one group per type, one bar per series
    (``groups``: series -> type -> (mean, SE)), error bars = the SE."""
    names = list(groups)
    width = 0.8 / max(len(names), 1)
    x = np.arange(len(TYPES))
    for k, n in enumerate(names):
        m = [groups[n][t][0] for t in TYPES]
        se = [groups[n][t][1] for t in TYPES]
        ax.bar(x + (k - (len(names) - 1) / 2) * width, m, width, yerr=se, capsize=2, label=n, color=colors[n],
               hatch=(hatches or {}).get(n), edgecolor="white" if not hatches or n not in hatches else "0.45",
               linewidth=0.5, error_kw={"elinewidth": 0.8})
    ax.set_xticks(x, [_type_label(t) for t in TYPES], fontsize=FONT)
    ax.tick_params(which="both", labelsize=SMALL)
    ax.grid(axis="y", alpha=0.3)


FIG3_DECIDING = ("FR (all heads)", "IG (Eq. 1)")
"""CD-Fig3's headline compares these two scores (FR averaged over all heads, as the paper; IG of Eq. 1)."""


def fr_vs_ig_figure(data: Mapping[str, Mapping[str, Mapping[str, tuple[float, float]]]], title: str = "",
                    counts: Mapping[str, int] | None = None):
    """CD-Fig3: one panel per answer group (right, wrong); bars per type for each score's share (±1 SE over the
    group's samples). The headline's scores (:data:`FIG3_DECIDING`) in colour, the context scores (top-head FR,
    the authors' L1 proxy) muted and hatched; one legend below the panels. ``counts`` (group -> samples) puts
    ``n`` in each panel's title."""
    fig, axes = plt.subplots(1, len(data), figsize=(4.4 * len(data), 3.4), squeeze=False, layout="constrained",
                             sharey=True)
    strong = iter(("#1f77b4", "#d62728"))
    muted = iter(MUTED)
    names = list(dict.fromkeys(n for scores in data.values() for n in scores))
    colors = {n: next(strong) if n in FIG3_DECIDING else next(muted) for n in names}
    hatches = {n: "//" for n in names if n not in FIG3_DECIDING}
    for ax, (g, scores) in zip(axes[0], data.items()):
        n = f" (n = {counts[g]})" if counts and g in counts else ""
        _bars(ax, scores, colors, hatches)
        ax.set_title(f"{g} answers{n}", fontsize=FONT)
    axes[0, 0].set_ylabel(f"share (normalized over types; {SE_NOTE})", fontsize=FONT)
    handles, labels = axes[0, 0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=SMALL, frameon=False)
    suptitle(fig, title)
    return fig


def denoising_figure(data: Mapping[str, Mapping[str, tuple[float, float]]], title: str = "", step_note: str = ""):
    """CD-Fig4: left, each type's attention after / before the manual denoising (mean ± SE over samples of the
    per-sample ratio) on a linear axis around the reference 1 (unchanged), critical types in colour; right, the
    paired values (attention mass per token before and after, ± SE) as bars on a linear axis from 0.
    ``step_note`` (what the denoising step is) goes under the title."""
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(8.6, 3.4), layout="constrained",
                                 gridspec_kw={"width_ratios": [1, 1.25]})
    x = np.arange(len(TYPES))
    vals, ses = [1.0], [0.0]
    for k, t in enumerate(TYPES):
        m, se = data[t]["ratio"]
        ax.errorbar([k], [m], yerr=[se], fmt="o", ms=5, capsize=3, color=TYPE_COLORS[t], label=_type_label(t))
        vals, ses = vals + [m], ses + [se]
    ax.axhline(1.0, color="0.3", lw=0.8, ls="--")
    ax.text(-0.4, 1.0, "1 = unchanged", fontsize=SMALL, color="0.3", ha="left", va="bottom")
    noise_aware_ylim(ax, vals, ses, pad=0.15)
    ax.ticklabel_format(axis="y", useOffset=False)
    ax.set_xticks(x, [_type_label(t) for t in TYPES], fontsize=SMALL)
    ax.set_xlim(-0.5, len(TYPES) - 0.5)
    ax.tick_params(which="both", labelsize=SMALL)
    ax.set_ylabel(f"attention after / before (linear; {SE_NOTE})", fontsize=FONT)
    ax.set_title("ratio per token (paper: x10 on critical tokens)", fontsize=FONT)
    ax.grid(axis="y", alpha=0.3)
    _bars(bx, {"before": {t: data[t]["before"] for t in TYPES}, "after": {t: data[t]["after"] for t in TYPES}},
          {"before": "#9e9e9e", "after": "#1f77b4"})
    bx.set_ylabel(f"attention mass per token ({SE_NOTE})", fontsize=FONT)
    bx.set_title("paired values", fontsize=FONT)
    _legend_right(bx)
    suptitle(fig, title + (f"\n{step_note}" if step_note else ""))
    return fig


def ig_vs_grad_figure(points: Mapping[str, np.ndarray], title: str = ""):
    """CD-Fig5: IG against the embedding-gradient L2 norm per context token, one colour per type (log-log); the
    noise types drawn first and small, the critical types on top (they are the fewer points)."""
    fig, ax = plt.subplots(figsize=(5.6, 3.8), layout="constrained")
    for t in ("irrelevant", "low_frequency", "interference", "supporting"):
        m = points["types"] == t
        if m.any():
            crit = t in CRITICAL
            ax.scatter(points["grad"][m], points["ig"][m], s=5 if crit else 3, alpha=0.6 if crit else 0.3,
                       color=TYPE_COLORS[t], label=f"{_type_label(t)} ({int(m.sum())})", linewidths=0)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.tick_params(which="both", labelsize=SMALL)
    ax.set_xlabel("||dL/dE||_2 per token", fontsize=FONT)
    ax.set_ylabel("IG per token (mean over heads, layers)", fontsize=FONT)
    ax.grid(alpha=0.3)
    _legend_right(ax, markerscale=3, title="type (tokens)", title_fontsize=SMALL)
    suptitle(fig, title)
    return fig


DETECTOR_LABELS = {"gradient": "embedding gradient (CDT)", "attention": "attention", "longppl": "LongPPL gap"}
DETECTOR_COLORS = {"gradient": "#d62728", "attention": "#1f77b4", "longppl": "#9e9e9e"}


def detection_figure(data: Mapping[str, Mapping[str, tuple[float, float]]], title: str = ""):
    """CD-Fig7: share of each type among each detector's top-k context tokens (± SE over samples); CDT's detector
    (the embedding gradient) and the attention it is contrasted with in colour, LongPPL's gap grey."""
    fig, ax = plt.subplots(figsize=(6.8, 3.2), layout="constrained")
    order = [d for d in ("gradient", "attention", "longppl") if d in data] + \
        [d for d in data if d not in DETECTOR_LABELS]
    groups = {DETECTOR_LABELS.get(d, d): data[d] for d in order}
    colors = {DETECTOR_LABELS.get(d, d): DETECTOR_COLORS.get(d, MUTED[k % len(MUTED)]) for k, d in enumerate(order)}
    _bars(ax, groups, colors)
    ax.set_ylabel(f"share of the detected tokens ({SE_NOTE})", fontsize=FONT)
    _legend_right(ax, title="top-k by", title_fontsize=SMALL)
    suptitle(fig, title)
    return fig


SWEEP_CURVES = (("before", "before"), ("after_denoising", "after denoising"),
                ("after_emphasizing", "after emphasizing"))
"""CD-Fig8's curves of attention: record key (its SE under ``<key>_se``) and label."""
SWEEP_GAINS = (("gain", "after denoising (vs before)"), ("emphasis_gain", "after emphasizing (vs after denoising)"))
"""CD-Fig8's gains, the headline's numbers: record key (its paired SE under ``<key>_se``) and label."""
SWEEP_COLORS = ("#7f7f7f", "#1f77b4", "#d62728")


def sweep_figure(rows: Sequence[Mapping], title: str = ""):
    """CD-Fig8, two panels against the denoising lr (beta = 1, log x): left, the headline's gains, each sample's
    relative change of the attention per critical token after the denoising step (against before) and after the
    emphasizing step (against after denoising), mean ± the paired SE over samples (the table's SE), around the
    reference 0 on a linear axis; right, the attention per critical token itself, before / after denoising / after
    emphasizing, each mean with ±1 SE bars over samples where the rows carry ``<key>_se`` (unpaired; older records
    do not: no bars, and the axis label says so). Each y-axis holds every bar."""
    rows = sorted(rows, key=lambda r: r["lr"])
    fig, (gx, ax) = plt.subplots(1, 2, figsize=(9.0, 3.4), layout="constrained")
    lrs = [r["lr"] for r in rows]
    values, ses = [0.0], [0.0]
    for (key, label), color in zip(SWEEP_GAINS, SWEEP_COLORS[1:]):
        if not rows or any(r.get(key) is None for r in rows):
            continue  # older records have no emphasizing gain
        y = [100 * r[key] for r in rows]
        e = [100 * (r.get(f"{key}_se") or 0.0) for r in rows]
        gx.errorbar(lrs, y, yerr=e, marker="o", ms=3, capsize=2, color=color, label=label)
        values, ses = values + y, ses + e
    gx.axhline(0.0, color="0.3", lw=0.8, ls="--")
    noise_aware_ylim(gx, values, ses)
    gx.ticklabel_format(axis="y", useOffset=False)
    gx.set_ylabel(f"change of attention per critical token (%)\n(mean over samples, {SE_NOTE}, paired)",
                  fontsize=FONT)
    gx.set_title("gains (the verdict's numbers)", fontsize=FONT)
    gx.legend(fontsize=SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=1, frameon=False)
    has_se = bool(rows) and all(r.get(f"{key}_se") is not None for r in rows for key, _ in SWEEP_CURVES)
    values, ses = [], []
    for (key, label), color in zip(SWEEP_CURVES, SWEEP_COLORS):
        y, e = [r[key] for r in rows], [r.get(f"{key}_se") or 0.0 for r in rows]
        ax.errorbar(lrs, y, yerr=e, marker="o", ms=3, capsize=2, color=color, label=label)
        values, ses = values + y, ses + e
    noise_aware_ylim(ax, values, ses, bounds=(0, None))
    ax.set_ylabel("attention per critical token" + (f"\n({SE_NOTE} over samples, unpaired)" if has_se else
                                                    "\n(no SE in these records)"), fontsize=FONT)
    ax.set_title("attention per critical token", fontsize=FONT)
    ax.legend(fontsize=SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=3, frameon=False)
    for a in (gx, ax):
        a.set_xscale("log")
        a.set_xlabel("lr of the denoising step (beta = 1)", fontsize=FONT)
        a.tick_params(which="both", labelsize=SMALL)
        a.grid(alpha=0.3)
    suptitle(fig, title)
    return fig


EM_PANELS = (("accuracy", "accuracy", "accuracy_se"), ("IG share of critical tokens", "ig_critical", None),
             ("attention share of critical tokens", "attention_critical", None))
"""CD-Fig10's panels (the headline's three metrics): label, record key, SE key (None: the record holds (mean, SE))."""
EM_COLORS = {"ce": "#7f7f7f", "cdt": "#d62728"}


def em_curve_figure(data: Mapping[str, Mapping[int, Mapping]], title: str = ""):
    """CD-Fig10: accuracy, the IG share and the attention share of critical tokens along the task fine-tunes, CE
    (grey) against CDT (red), each mean ± SE over the analysis prompts (accuracy: binomial SE); one legend below."""
    fig, axes = plt.subplots(1, len(EM_PANELS), figsize=(10.0, 3.2), layout="constrained")
    for k, (obj, by_step) in enumerate(data.items()):
        steps = sorted(by_step)
        color = EM_COLORS.get(obj, f"C{k}")
        for ax, (_, key, se_key) in zip(axes, EM_PANELS):
            pairs = [(by_step[s][key], by_step[s][se_key]) if se_key else tuple(by_step[s][key]) for s in steps]
            ax.errorbar(steps, [m for m, _ in pairs], yerr=[s for _, s in pairs], marker="o", ms=3, capsize=2,
                        color=color, label=obj.upper())
    for ax, (label, _, _) in zip(axes, EM_PANELS):
        ax.set_title(label, fontsize=FONT)
        ax.set_ylabel(f"{label} ({SE_NOTE})", fontsize=FONT)
        ax.set_xlabel("training step", fontsize=FONT)
        ax.tick_params(which="both", labelsize=SMALL)
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=SMALL, frameon=False)
    suptitle(fig, title)
    return fig


MEM_COLORS = {"naive": "#7f7f7f", "ours": "#d62728"}


def memory_figure(rows: Sequence[Mapping], title: str = "", cap_mib: float | None = None):
    """CD-Mem: peak memory (left) and seconds (right) against length, naive vs ours (log-log lines); the memory cap
    ``cap_mib`` as a reference line, and each length where a method failed (``status``: out of memory, timed out)
    marked with an x on the cap (left) and at the top of the time axis (right); one legend beside the panels."""
    fig, axes = plt.subplots(1, 2, figsize=(9.4, 3.2), layout="constrained")
    methods = sorted({r["method"] for r in rows}, key=lambda m: (m != "naive", m))
    for k, method in enumerate(methods):
        color = MEM_COLORS.get(method, f"C{k}")
        ok = sorted((r for r in rows if r["method"] == method and r["status"] == "ok"), key=lambda r: r["length"])
        xs = [r["length"] for r in ok]
        axes[0].plot(xs, [r["peak_mib"] for r in ok], marker="o", ms=3, color=color, label=method)
        axes[1].plot(xs, [r["seconds"] for r in ok], marker="o", ms=3, color=color, label=method)
        failed = [r for r in rows if r["method"] == method and r["status"] not in ("ok", "not attempted")]
        for status in sorted({r["status"].split(" (")[0] for r in failed}):
            fx = [r["length"] for r in failed if r["status"].split(" (")[0] == status]
            y = cap_mib if cap_mib else max((r["peak_mib"] for r in rows if r.get("peak_mib")), default=1.0)
            axes[0].scatter(fx, [y] * len(fx), marker="X", s=50, color=color, zorder=3,
                            label=f"{method}: {status}")
            axes[1].scatter(fx, [1.0] * len(fx), marker="X", s=50, color=color, zorder=3, clip_on=False,
                            transform=axes[1].get_xaxis_transform())
    if cap_mib:
        axes[0].axhline(cap_mib, color="0.2", lw=1.0, ls="--", label=f"memory cap ({cap_mib / 1024:g} GiB)")
    for ax, lab in zip(axes, ("peak memory (MiB)", "seconds")):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens", fontsize=FONT)
        ax.set_ylabel(lab, fontsize=FONT)
        ax.tick_params(which="both", labelsize=SMALL)
        ax.grid(alpha=0.3)
    axes[0].set_title("peak memory per scoring", fontsize=FONT)
    axes[1].set_title("time per scoring (x at the top: failed)", fontsize=FONT)
    _legend_right(axes[1], handles=axes[0].get_legend_handles_labels()[0],
                  labels=axes[0].get_legend_handles_labels()[1])
    suptitle(fig, title)
    return fig


MIN_SHARE_SPAN = 0.02
"""CD-Fig14's per-layer share axis spans at least this much (shares in [0, 1])."""


def _arm_mean_map(maps: Mapping[str, Mapping], replicates: Sequence[str]) -> np.ndarray:
    """(layers, chunks, chunks) map of one arm: the mean over its training-seed replicates' maps."""
    return np.mean([np.asarray(maps[n]["map"], dtype=float) for n in replicates], axis=0)


def chunk_map_figure(maps: Mapping[str, Mapping], title: str = "", before: str = "rp_standard", after: str = "cdt",
                     key_share: Sequence[float] | None = None, layer: int | None = None,
                     labels: Mapping[str, str] | None = None):
    """CD-Fig14 (CDT App. F), before CDT (``before``) against after CDT (``after``); an arm's training-seed
    replicates (``cdt@seed1``, ...) are averaged, as the report averages them. Top row, at ``layer`` (default the
    last; the paper shows the one it found clearest): the chunked attention map before and after (log colour, one
    colour bar), and after - before (diverging colour, its own colour bar); the question row (the last query chunk)
    is outlined and the key chunks (``key_share``: per chunk, the share of the prompts in which it holds a
    supporting or interference fact) are marked with triangles above the maps (size: that share). Bottom: the
    question row before and after at that layer (key chunks shaded by their share), and per layer the share of
    the question row's attention on key chunks, mean ± SE over prompts (the report's table). ``labels``: arm ->
    how the panels name it (default "before CDT" / "after CDT")."""

    groups = seed_groups(maps)
    arms = [a for a in (before, after) if a in groups]
    if not arms:
        raise ValueError(f"maps of {', '.join(maps)}; allowed: at least one of {before!r}, {after!r}")
    names = {before: "before CDT", after: "after CDT", **(labels or {})}
    colors = {before: "#7f7f7f", after: "#d62728"}
    mean_map = {a: _arm_mean_map(maps, groups[a]) for a in arms}
    n_layers, chunks = mean_map[arms[0]].shape[0], mean_map[arms[0]].shape[-1]
    layer = n_layers - 1 if layer is None else layer
    key = None if key_share is None else np.asarray(key_share, dtype=float)
    if key is not None and key.shape != (chunks,):
        raise ValueError(f"key_share of shape {key.shape}; allowed: one share per chunk ({chunks})")

    fig = plt.figure(figsize=(11.0, 7.2), layout="constrained")
    grid = fig.add_gridspec(2, 3, height_ratios=[1.25, 1])
    norm = LogNorm(vmin=1e-3, vmax=1.0)
    images = []
    for k, a in enumerate(arms):
        ax = fig.add_subplot(grid[0, k])
        m = mean_map[a][layer]
        images.append(ax.imshow(np.where(m > 0, m, np.nan), cmap="Reds", norm=norm, interpolation="nearest"))
        _mark_map(ax, chunks, key)
        ax.set_title(f"{names[a]} ({a}{_seeds(groups[a])}), layer {layer}", fontsize=FONT, pad=10)
        ax.set_xlabel("key chunk", fontsize=FONT)
        ax.set_ylabel("query chunk", fontsize=FONT)
    bar = fig.colorbar(images[-1], ax=fig.axes[:len(arms)], shrink=0.85, pad=0.01)
    bar.set_label("attention (log colour)", fontsize=FONT)
    bar.ax.tick_params(which="both", labelsize=SMALL)
    for image in images[:-1]:
        image.colorbar = bar  # the maps share one norm: the one colour bar reads each of them
    if len(arms) == 2:
        ax = fig.add_subplot(grid[0, 2])
        d = mean_map[after][layer] - mean_map[before][layer]
        lower = np.tril(np.ones_like(d, dtype=bool))
        diff = ax.imshow(np.where(lower, d, np.nan), cmap="RdBu_r", norm=CenteredNorm(0.0), interpolation="nearest")
        _mark_map(ax, chunks, key)
        ax.set_title(f"after - before, layer {layer}", fontsize=FONT, pad=10)
        ax.set_xlabel("key chunk", fontsize=FONT)
        bar = fig.colorbar(diff, ax=ax, shrink=0.85, pad=0.01)
        bar.set_label("attention after - before", fontsize=FONT)
        bar.ax.tick_params(which="both", labelsize=SMALL)
        bar.ax.yaxis.get_offset_text().set_fontsize(SMALL)

    row = fig.add_subplot(grid[1, :2])
    if key is not None:
        for c in np.flatnonzero(key > 0):
            row.axvspan(c - 0.5, c + 0.5, color="#ff7f0e", alpha=0.35 * key[c], lw=0)
    for a in arms:
        row.plot(np.arange(chunks), mean_map[a][layer][-1], marker="o", ms=3, color=colors[a], label=names[a])
    row.set_yscale("log")
    row.set_xlim(-0.5, chunks - 0.5)
    row.set_xlabel("key chunk (shaded: holds a supporting or interference fact; darker: in more prompts)",
                   fontsize=FONT)
    row.set_ylabel("question row's attention", fontsize=FONT)
    row.set_title(f"the question row (last query chunk), layer {layer}", fontsize=FONT)
    row.grid(alpha=0.3)
    row.tick_params(which="both", labelsize=SMALL)
    row.legend(fontsize=SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)

    share = fig.add_subplot(grid[1, 2])
    values, ses = [], []
    for k, a in enumerate(arms):
        x = arm_shares(maps, groups[a])
        ms = [mean_se(list(x[:, i])) for i in range(x.shape[1])]
        layers = np.arange(x.shape[1]) + (k - (len(arms) - 1) / 2) * 0.12
        share.errorbar(layers, [m for m, _ in ms], yerr=[s for _, s in ms], fmt="o", ms=4, capsize=3,
                       color=colors[a], label=names[a])
        values, ses = values + [m for m, _ in ms], ses + [s for _, s in ms]
    noise_aware_ylim(share, values, ses, bounds=(0, 1), pad=0.15)
    lo, hi = share.get_ylim()
    if hi - lo < MIN_SHARE_SPAN:  # one prompt (no SE) or equal arms: keep a readable span of shares
        mid = (lo + hi) / 2
        share.set_ylim(max(0.0, mid - MIN_SHARE_SPAN / 2), min(1.0, mid + MIN_SHARE_SPAN / 2))
    share.ticklabel_format(axis="y", useOffset=False)
    share.set_xlim(-0.5, n_layers - 0.5)
    share.set_xticks(range(n_layers))
    share.set_xlabel("layer", fontsize=FONT)
    share.set_ylabel(f"question row's share on key chunks\n(mean over prompts, {SE_NOTE})", fontsize=FONT)
    share.set_title("per layer (the verdict: mean over layers)", fontsize=FONT)
    share.grid(alpha=0.3)
    share.tick_params(which="both", labelsize=SMALL)
    share.legend(fontsize=SMALL, loc="upper center", bbox_to_anchor=(0.5, -0.25), ncol=2, frameon=False)
    suptitle(fig, title)
    return fig


def _seeds(replicates: Sequence[str]) -> str:
    return f", mean of {len(replicates)} seeds" if len(replicates) > 1 else ""


def _mark_map(ax, chunks: int, key: np.ndarray | None) -> None:
    """Outline the question row (the last query chunk) of a chunk map and mark the key chunks above it."""
    ax.add_patch(Rectangle((-0.5, chunks - 1.5), chunks, 1.0, fill=False, ec="#1f77b4", lw=0.9, clip_on=False))
    if key is not None and (key > 0).any():
        cols = np.flatnonzero(key > 0)
        ax.scatter(cols, [-1.3] * len(cols), marker="v", s=40 * key[cols], color="#ff7f0e", clip_on=False,
                   linewidths=0)
    ax.set_xlim(-0.5, chunks - 0.5)
    ax.set_ylim(chunks - 0.5, -0.5)
    step = max(1, math.ceil(chunks / 6))
    ax.set_xticks(range(0, chunks, step))
    rows = [r for r in range(0, chunks - 1, step) if r < chunks - step / 2]
    ax.set_yticks([*rows, chunks - 1], [*map(str, rows), "question"])
    ax.get_yticklabels()[-1].set_color("#1f77b4")
    ax.tick_params(which="both", labelsize=SMALL)
