"""A pretrained model analysed and evaluated as it is, nothing trained (:class:`RealModelConfig`, the ``real``
section; the ``smol`` profile turns it on)."""

from __future__ import annotations

import math
from dataclasses import dataclass

SCALING_KINDS: tuple[str, ...] = ("none", "linear", "dynamic", "yarn")
"""The kinds of :attr:`RealModelConfig.scalings`, spelled as ``evaluate --rope-scaling`` spells them."""
CHAT_TEMPLATE_MODES: tuple[str, ...] = ("auto", "on", "off")
"""The values of :attr:`RealModelConfig.chat_template` (``evaluate --chat-template``'s)."""


@dataclass(frozen=True)
class RealModelConfig:
    """The pretrained base (``model.pretrained``) used as it is: what ``reproduce`` runs on it and how it is
    evaluated beyond its window."""

    enabled: bool = False
    """Nothing is trained: ``reproduce`` runs only the notebooks marked ``as_is`` (evaluation, ig_scores,
    attention_distance; :data:`repro.pipeline.NOTEBOOKS`), each on the pretrained base alone and skipping what needs
    trained arms. Needs ``model.pretrained``. False (every other profile): the full pipeline."""
    scaled_lengths: tuple[int, ...] = ()
    """Lengths past the model's window evaluated once per ``scalings`` entry (RP-Tab4/5's extrapolation setting
    without training); empty: none."""
    scalings: tuple[str, ...] = ("none", "linear:2", "dynamic:2", "yarn:2")
    """Training-free RoPE scalings at ``scaled_lengths``, as ``evaluate --rope-scaling`` takes them (``none``,
    ``linear:F``, ``dynamic:F``, ``yarn:F``; F > 1), each on top of the model's own ``rope_theta``."""
    scaled_samples: int = 2
    """Prompts per (scaling, length), depths taken in turn from ``eval.depths``; the same prompts for every
    scaling (paired)."""
    chat_template: str = "auto"
    """Prompts through the tokenizer's chat template: ``auto`` (on when it has one, as ``evaluate``'s default),
    ``on`` or ``off``."""
    denoising: bool = True
    """CD-Fig4 and CD-Fig8 (manual denoising and the denoising lr sweep, one optimizer step on the model) in the IG
    analysis; False leaves them out (on a 135M model on 2 cores the sweep alone took 21 s a prompt for two step sizes
    at 512 tokens: about a minute for ``cdt.lr_sweep``'s six)."""


def parse_scaling(text: str, label: str = "", allowed: str = "none, linear:F, dynamic:F or yarn:F with F > 1"
                  ) -> tuple[str, float | None]:
    """``none`` -> ``("none", None)``, ``kind:F`` -> ``(kind, F)``; otherwise a ValueError ``"<label>; allowed:
    <allowed>"`` (``label`` default: ``real.scalings entry '<text>'``). ``evaluate --rope-scaling`` parses with it
    too (:func:`repro.cli.rope_scaling.parse_rope_scaling`)."""
    kind, colon, value = str(text).partition(":")
    if kind == "none" and not colon:
        return "none", None
    bad = ValueError(f"{label or f'real.scalings entry {text!r}'}; allowed: {allowed}")
    if kind not in SCALING_KINDS[1:] or not colon:
        raise bad
    try:
        factor = float(value)
    except ValueError:
        raise bad from None
    if not (math.isfinite(factor) and factor > 1):
        raise bad
    return kind, factor


def validate_real(r: RealModelConfig, pretrained: str | None) -> None:
    """Every ``real`` field in range; ``enabled`` only with a pretrained model."""
    if r.enabled and not pretrained:
        raise ValueError("real.enabled=True needs model.pretrained (a model name or folder); allowed: enabled=False "
                         "for a model trained here")
    for s in r.scalings:
        parse_scaling(s)
    if len(set(r.scalings)) != len(r.scalings):
        raise ValueError(f"real.scalings={r.scalings}; allowed: distinct entries")
    if any(n < 1 for n in r.scaled_lengths) or r.scaled_samples < 1:
        raise ValueError(f"real.scaled_lengths={r.scaled_lengths}, real.scaled_samples={r.scaled_samples}; "
                         "allowed: lengths >= 1 and samples >= 1")
    if r.chat_template not in CHAT_TEMPLATE_MODES:
        raise ValueError(f"real.chat_template={r.chat_template!r}; allowed: {', '.join(CHAT_TEMPLATE_MODES)}")
