"""Figures of the training notebook (drawing only; data comes from the pipeline's stages).

TB-ExtLoss draws each arm's logged loss terms in small multiples: one panel per paper and loss term, so that arms
whose objectives differ never share an axis. What each arm logs (:mod:`repro.methods`): the LongRecipe and ProLong
arms' ``loss`` is the cross-entropy on their own rows; a self-distillation arm logs its CLM term as ``clm`` (plain
CE, or LongCE-weighted CE for the LongCE arms) and its consistency term as ``consistency`` (the KL between the
perturbed and the standard view, before lambda), ``loss`` being their weighted sum; CDT's ``loss`` is the CE on the
denoised embeddings and ``detect_loss`` the CE on the clean input, the same quantity as its CE baseline's loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping, Sequence

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.lines import Line2D
from matplotlib.patches import Patch

from repro.methods.armspec import split_seed
from repro.methods.extension import ratio_of
from repro.figure_rules import MAX_SERIES

CE, LONGCE, KL = "ce", "longce", "kl"
"""The loss terms a TB-ExtLoss panel draws: cross-entropy, LongCE-weighted CE, the reverse-KL consistency term."""
TERM_LABEL = {CE: "cross-entropy (nats/token)", LONGCE: "LongCE-weighted CE", KL: "KL(perturbed || standard)"}
"""The y-label of each loss term."""


def _verdict_text(verdict: str) -> str:
    """The verdict as a title ends with it; a testbed figure has none (``n/a``)."""
    return "testbed figure, no paper claim to judge" if verdict in ("", "n/a") else f"verdict: {verdict}"


def _smooth(y: np.ndarray, k: int) -> np.ndarray:
    """Trailing mean over ``k`` steps (``y`` unchanged when ``k <= 1`` or ``y`` is shorter than ``k``)."""
    if k <= 1 or len(y) < k:
        return y
    return np.convolve(y, np.ones(k) / k, mode="valid")


def _phase(m: dict) -> tuple[str | None, int | None]:
    """(phase, level) of a logged base-curriculum step; the final steps after the last level are ``anneal``."""
    if m.get("method_phase") == "retrieval" and m.get("method_final_left", -1) >= 0:
        return "anneal", None
    return m.get("method_phase"), m.get("method_level")


def base_loss_figure(metrics: Sequence[dict], smooth: int = 10, verdict: str = ""):
    """TB-BaseLoss: loss over steps with the curriculum phases shaded (copy, retrieval levels, the final
    learning-rate anneal; named above the axes), plus the running training exact match on a second axis. One
    legend below the axes; the title names the final loss and exact match and ``verdict`` (the report's)."""
    steps = np.array([m["step"] for m in metrics])
    loss = np.array([m["loss"] for m in metrics])
    fig, ax = plt.subplots(figsize=(7.5, 4.0))
    k = min(smooth, max(len(loss) // 5, 1))
    ax.plot(steps[k - 1:], _smooth(loss, k), color="C0",
            label=f"training loss (trailing mean of {k} step{'s' * (k > 1)})")
    ax.set_xlabel("step")
    ax.set_ylabel("weighted loss (log scale)")
    ax.set_yscale("log")
    colours = {"copy": "C1", "anneal": "C4"}
    phases = [_phase(m) for m in metrics]
    start, n_label = 0, 0
    for i in range(1, len(phases) + 1):
        if i == len(phases) or phases[i] != phases[start]:
            ph, lvl = phases[start]
            ax.axvspan(steps[start], steps[i - 1], alpha=0.08 if (lvl or 0) % 2 else 0.16, color=colours.get(ph, "C2"),
                       lw=0)
            label = f"retrieval L{lvl}" if ph == "retrieval" else str(ph)
            # phase names sit above the data area, alternating between two heights so that short phases do not
            # overprint their neighbours
            ax.text(steps[start], 1.015 if n_label % 2 == 0 else 1.075, label, fontsize=7, va="bottom",
                    transform=ax.get_xaxis_transform(), clip_on=False)
            start, n_label = i, n_label + 1
    handles = ax.get_lines()[:1]
    em = [(m["step"], m["method_em"]) for m in metrics if m.get("method_phase") == "retrieval"]
    if em:
        ax2 = ax.twinx()
        handles += ax2.plot(*zip(*em), color="C3", lw=1, label="running train exact match (right axis)")
        ax2.set_ylim(0, 1.02)
        ax2.set_ylabel("train exact match")
    handles += [Patch(color=c, alpha=0.3, label=f"{name} phase") for name, c in
                (("copy", "C1"), ("retrieval", "C2"), ("anneal", "C4")) if any(p[0] == name for p in phases)]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=3, fontsize=7, frameon=False)
    final = f"final loss {loss[-1]:.3g}" + (f", train exact match {em[-1][1]:.2f}" if em else "")
    ax.set_title(f"TB-BaseLoss: the base model learns dense copy, then retrieval at growing lengths; {final} "
                 f"({_verdict_text(verdict)})", fontsize=8, pad=26, wrap=True)
    fig.tight_layout()
    return fig


@dataclass(frozen=True)
class LossPanel:
    """One panel of TB-ExtLoss: the arms it draws and the loss term it draws for them."""

    title: str
    """What the panel compares (paper and table)."""
    term: str
    """:data:`CE`, :data:`LONGCE` or :data:`KL`."""
    arms: tuple[str, ...]
    """Arm names without the seed suffix; the first is the panel's reference (drawn in black), ``focus`` thicker."""
    focus: str = ""
    """The paper's own method in this panel, drawn thicker."""


RP_ABLATION = "Self-distillation ablations (stopped early)"
"""Title stem of the panels of the early-stopped ablation arms (``selfdistill.ablation_steps``)."""
RATIO_PANEL = "LongRecipe Tab. 3-4: sentence choice, token ratio"
"""The panel the token-ratio arms ``longrecipe_r<pct>`` join."""
EXT_LOSS_PANELS: tuple[LossPanel, ...] = (
    LossPanel("LongRecipe Tab. 1", CE, ("flt", "pose", "rpes", "longrecipe"), "longrecipe"),
    LossPanel(RATIO_PANEL, CE, ("longrecipe", "longrecipe_wo_t", "longrecipe_random_t"), "longrecipe"),
    LossPanel("Self-distillation Tab. 1: CLM term", CE,
              ("rp_standard", "rp_skip", "rp_cyclic", "rp_pose", "rp_standard_matched"), "rp_skip"),
    LossPanel("Self-distillation Tab. 1: consistency term", KL, ("rp_skip", "rp_cyclic", "rp_skip_longce"),
              "rp_skip"),
    LossPanel("LongCE arms (self-distillation, CDT baselines)", LONGCE, ("rp_longce", "rp_skip_longce"),
              "rp_skip_longce"),
    LossPanel("CDT vs its CE baseline: CE on the clean input", CE, ("rp_standard", "cdt"), "cdt"),
    LossPanel(f"{RP_ABLATION}: objective", CE, ("rp_standard_early", "rp_skip_early", "rp_fwd_kl", "rp_clm"),
              "rp_skip_early"),
    LossPanel(f"{RP_ABLATION}: perturbation, CLM term", CE,
              ("rp_skip_early", "rp_fixed_skip", "rp_dropout", "rp_attn_noise", "rp_nope", "rp_dilation",
               "rp_chunk_perm"), "rp_skip_early"),
    LossPanel(f"{RP_ABLATION}: perturbation, consistency term", KL,
              ("rp_skip_early", "rp_fixed_skip", "rp_dropout", "rp_attn_noise", "rp_nope", "rp_dilation",
               "rp_chunk_perm"), "rp_skip_early"),
    LossPanel(f"{RP_ABLATION}: Y and lambda, CLM term", CE,
              ("rp_skip_early", "rp_y050", "rp_y200", "rp_lam020", "rp_lam050", "rp_lam200"), "rp_skip_early"),
    LossPanel(f"{RP_ABLATION}: Y and lambda, consistency term", KL,
              ("rp_skip_early", "rp_y050", "rp_y200", "rp_lam020", "rp_lam050", "rp_lam200"), "rp_skip_early"),
    LossPanel("ProLong: long-data share", CE,
              ("prolong", "pl_long0", "pl_long20", "pl_long40", "pl_long80", "pl_long100"), "prolong"),
    LossPanel("ProLong: masks, RoPE base, training length", CE,
              ("prolong", "pl_nomask", "pl_rope_orig", "pl_rope_ntk", "pl_rope_ntk4", "pl_train2x"), "prolong"),
)
"""TB-ExtLoss's panels (the arms of :func:`repro.arms.extension_arms` at the tiny profile; the LongRecipe
token-ratio arms ``longrecipe_r<pct>`` join the Tab. 3-4 panel). Every arm is drawn on its CE-type term (CE or
LongCE); the reverse-KL arms also on their consistency term. The forward-KL and CLM-consistency ablations
(``rp_fwd_kl``, ``rp_clm``) are drawn on their CLM term only: their consistency terms are other quantities."""


def ce_key(arm: str) -> str:
    """The metric that holds ``arm``'s cross-entropy term: ``clm`` for a self-distillation arm, ``detect_loss``
    (CE on the clean input) for CDT, ``loss`` for the others (their whole objective is a CE)."""
    stem = split_seed(arm)[0]
    if stem.startswith("rp_"):  # rp_pose's clm is its CE on the skip view, its only term
        return "clm"
    if stem == "cdt":
        return "detect_loss"
    return "loss"


TERM_KEY = {LONGCE: lambda arm: "clm", KL: lambda arm: "consistency", CE: ce_key}
"""Loss term -> (arm -> the logged metric that holds it)."""


def _fallback(stem: str) -> tuple[str, str]:
    """(panel title, term) of an arm no panel of :data:`EXT_LOSS_PANELS` names, by its paper."""
    if stem.startswith("rp_"):
        return ("Other self-distillation arms: LongCE", LONGCE) if "longce" in stem else \
            ("Other self-distillation arms: CLM term", CE)
    if stem.startswith(("pl_", "prolong")):
        return "Other ProLong arms", CE
    if stem.startswith("cd"):
        return "Other CDT arms: CE on the clean input", CE
    return "Other LongRecipe arms", CE


def _chunks(panel: LossPanel, counts: Mapping[str, int]) -> list[LossPanel]:
    """``panel`` cut so that each part holds at most :data:`MAX_SERIES` series (an arm with seed replicates is two:
    its main run and its replicates); each part keeps the reference arm first."""
    ref, rest = panel.arms[0], panel.arms[1:]
    out, cur = [], [ref]
    size = counts[ref]
    for a in rest:
        if size + counts[a] > MAX_SERIES:
            out.append(cur)
            cur, size = [ref], counts[ref]
        cur.append(a)
        size += counts[a]
    out.append(cur)
    suffix = [f" ({i + 1}/{len(out)})" if len(out) > 1 else "" for i in range(len(out))]
    return [LossPanel(panel.title + s, panel.term, tuple(c), panel.focus) for c, s in zip(out, suffix)]


def loss_panels(names: Sequence[str]) -> list[LossPanel]:
    """The panels of TB-ExtLoss for the arms ``names`` (seed replicates ``<arm>@seed<k>`` allowed): those of
    :data:`EXT_LOSS_PANELS` restricted to the arms present (a panel whose arms all show in an earlier panel of
    the same term is left out), the ratio arms added to LongRecipe's Tab. 3-4 panel, and any arm no panel names
    in a panel of its paper; each at most :data:`MAX_SERIES` series (cut into parts when more)."""
    parsed = [split_seed(n) for n in names]
    stems = list(dict.fromkeys(s for s, _ in parsed))
    counts = {s: 1 + any(k for t, k in parsed if t == s) for s in stems}  # replicates: one more series
    ratio = sorted((s for s in stems if ratio_of(s) is not None), key=ratio_of)
    panels = [LossPanel(p.title, p.term, (*p.arms, *ratio), p.focus) if p.title == RATIO_PANEL else p
              for p in EXT_LOSS_PANELS]
    placed = {a for p in panels if p.term in (CE, LONGCE) for a in p.arms}
    extra: dict[tuple[str, str], list[str]] = {}
    for s in stems:
        if s not in placed:
            extra.setdefault(_fallback(s), []).append(s)
    panels += [LossPanel(title, term, tuple(arms)) for (title, term), arms in extra.items()]
    out: list[LossPanel] = []
    shown: dict[str, set[str]] = {}
    for p in panels:
        arms = tuple(a for a in p.arms if a in counts)
        if not arms or set(arms) <= shown.get(p.term, set()):
            continue
        shown.setdefault(p.term, set()).update(arms)
        out += _chunks(LossPanel(p.title, p.term, arms, p.focus if p.focus in arms else ""), counts)
    return out


def _runs_of(runs: Mapping[str, Sequence[dict]], stem: str) -> list[tuple[int, Sequence[dict]]]:
    """``(replicate, metrics)`` of every run of arm ``stem``, the plain name (replicate 0) first."""
    return sorted((split_seed(n)[1], ms) for n, ms in runs.items() if split_seed(n)[0] == stem)


def _curve(metrics: Sequence[dict], key: str, smooth: int) -> tuple[np.ndarray, np.ndarray]:
    """Steps and the trailing mean of ``key`` over them (steps that did not log ``key`` left out)."""
    pts = [(m["step"], m[key]) for m in metrics if m.get(key) is not None]
    if not pts:
        return np.array([]), np.array([])
    x, y = (np.asarray(v, dtype=float) for v in zip(*pts))
    k = min(smooth, max(len(y) // 5, 1))
    return x[k - 1:] if len(y) >= k else x, _smooth(y, k)


def extension_loss_figure(runs: Mapping[str, Sequence[dict]], smooth: int = 10, verdict: str = "",
                          ncols: int = 2):
    """TB-ExtLoss: each extension arm's logged loss terms over steps, in small multiples (:func:`loss_panels`: one
    panel per paper and loss term, at most :data:`MAX_SERIES` series each). The plain run of an arm is drawn
    thick, its seed replicates ``<arm>@seed<k>`` thin in the same colour (one legend entry per arm); the panel's
    reference arm is black and the paper's method thicker. Legends sit right of each panel. Each curve is the
    trailing mean of ``smooth`` steps (fewer for short runs)."""
    panels = loss_panels(list(runs))
    nrows = max(1, -(-len(panels) // ncols))
    fig, axes = plt.subplots(nrows, ncols, figsize=(4.7 * ncols, 2.55 * nrows + 0.9), squeeze=False,
                             layout="constrained")
    missing: list[str] = []
    for ax, panel in zip(axes.flat, panels):
        handles = []
        for i, stem in enumerate(panel.arms):
            colour = "black" if i == 0 else f"C{(i - 1) % 10}"
            key = TERM_KEY[panel.term](stem)
            reps = _runs_of(runs, stem)
            x, y = _curve(reps[0][1], key, smooth)
            if not len(y):
                missing.append(f"{stem} ({key})")
                continue
            lw = 1.8 if stem == panel.focus else 1.0
            ax.plot(x, y, color=colour, lw=lw)
            label = stem
            if len(reps) > 1:
                # all replicates of an arm form one thin line broken by NaNs: one series, one colour per arm
                xs, ys = [], []
                for _, ms in reps[1:]:
                    rx, ry = _curve(ms, key, smooth)
                    xs += [*rx, np.nan]
                    ys += [*ry, np.nan]
                ax.plot(xs, ys, color=colour, lw=0.6, alpha=0.7)
                label += f" (+{len(reps) - 1} seed{'s' * (len(reps) > 2)}, thin)"
            handles.append(Line2D([], [], color=colour, lw=lw, label=label))
        ax.set_title(panel.title, fontsize=8)
        ax.set_xlabel("step", fontsize=7)
        ax.set_ylabel(TERM_LABEL[panel.term], fontsize=7)
        ax.tick_params(labelsize=7)
        ax.grid(alpha=0.3)
        ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.02, 1.0), fontsize=7, frameon=False,
                  handlelength=1.5)
    for ax in list(axes.flat)[len(panels):]:
        ax.axis("off")
    arms = {split_seed(n)[0] for n in runs}
    seeds = sum(1 for n in runs if split_seed(n)[1])
    note = f"; not logged: {', '.join(missing)}" if missing else ""
    fig.suptitle(f"TB-ExtLoss: training loss of all {len(arms)} extension arms (+{seeds} seed replicates), one panel "
                 f"per paper and loss term\n({_verdict_text(verdict)}) each arm's loss on its own rows, trailing "
                 f"mean of {smooth} steps:\nit shows that every arm trained, not which arm is better{note}",
                 fontsize=9)
    return fig
