"""Figures of the training notebook (drawing only; data comes from the pipeline's stages)."""

from __future__ import annotations

from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np


def _smooth(y: np.ndarray, k: int) -> np.ndarray:
    if k <= 1 or len(y) < k:
        return y
    return np.convolve(y, np.ones(k) / k, mode="valid")


def _phase(m: dict) -> tuple[str | None, int | None]:
    """(phase, level) of a logged base-curriculum step; the final steps after the last level are ``anneal``."""
    if m.get("method_phase") == "retrieval" and m.get("method_final_left", -1) >= 0:
        return "anneal", None
    return m.get("method_phase"), m.get("method_level")


def base_loss_figure(metrics: Sequence[dict], smooth: int = 10):
    """Loss over steps with the curriculum phases shaded (copy, retrieval levels, the final
    learning-rate anneal), plus the running training exact match."""
    steps = np.array([m["step"] for m in metrics])
    loss = np.array([m["loss"] for m in metrics])
    fig, ax = plt.subplots(figsize=(7, 3.6))
    k = min(smooth, max(len(loss) // 5, 1))
    ax.plot(steps[k - 1:], _smooth(loss, k), color="C0", label=f"training loss (mean of {k})")
    ax.set_xlabel("step")
    ax.set_ylabel("weighted loss")
    ax.set_yscale("log")
    phases = [_phase(m) for m in metrics]
    start, n_label = 0, 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            ph, lvl = phases[start]
            color = {"copy": "C1", "anneal": "C4"}.get(ph, "C2")
            ax.axvspan(steps[start], steps[i - 1], alpha=0.08 if (lvl or 0) % 2 else 0.16, color=color)
            label = f"retrieval L{lvl}" if ph == "retrieval" else ph
            # labels alternate between two heights so that short phases do not overprint
            y = 0.99 if n_label % 2 == 0 else 0.93
            ax.text(steps[start], y, label, fontsize=7, va="top", transform=ax.get_xaxis_transform())
            start, n_label = i, n_label + 1
    em = [(m["step"], m["method_em"]) for m in metrics if m.get("method_phase") == "retrieval"]
    if em:
        ax2 = ax.twinx()
        ax2.plot(*zip(*em), color="C3", lw=1, label="running train exact match")
        ax2.set_ylim(0, 1.02)
        ax2.set_ylabel("train exact match")
        ax2.legend(loc="center right", fontsize=8)
    ax.legend(loc="lower left", fontsize=8)
    ax.set_title("Base model curriculum: dense copy, retrieval at growing lengths, anneal")
    fig.tight_layout()
    return fig


def extension_loss_figure(runs: Mapping[str, Sequence[dict]], smooth: int = 10):
    """Training loss of each extension arm over steps."""
    fig, ax = plt.subplots(figsize=(6, 3.4))
    for i, (name, metrics) in enumerate(runs.items()):
        loss = np.array([m["loss"] for m in metrics])
        k = min(smooth, max(len(loss) // 5, 1))
        ax.plot(np.arange(len(loss))[k - 1:], _smooth(loss, k), color=f"C{i}", label=name)
    ax.set_xlabel("step")
    ax.set_ylabel("weighted loss")
    ax.set_title("Context extension: training loss")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
