"""RoPE-perturbed self-distillation's comparison: every ``rp_*`` arm of :data:`repro.methods.arms.RP_ARMS`.

All arms continue the same base on FLT's full-length rows at the target with ``selfdistill.rope_theta`` (ABF)
and ``selfdistill.bf16``; they differ only in the objective (:mod:`repro.methods.selfdistill`). Arms on the
``early`` schedule run the main cosine schedule and stop at ``selfdistill.ablation_steps`` (the paper's ablations
are read at step 200 of 1000); ``matched`` arms run ``selfdistill.matched_steps_ratio`` x the steps (RP-Fig4).
Arms with ``curve=True`` keep a checkpoint every ``selfdistill.curve_every`` steps. The dropout control trains
with ``attention_dropout`` and is evaluated without it.
"""

from __future__ import annotations

from typing import Any

from repro.profiles import Profile
from repro.recipes.registry import Inputs, Recipe


def owns(arm: str) -> bool:
    from repro.methods.arms import RP_ARMS

    return arm in RP_ARMS


def _arm(name: str):
    from repro.methods.arms import rp_arm

    arm = rp_arm(name)
    if arm is None:
        raise ValueError(f"{name!r} is not a self-distillation arm; allowed: rp_* names of repro.methods.arms.RP_ARMS")
    return arm


def rp_schedule(p: Profile, name: str) -> tuple[int, int | None]:
    """``(max_steps, stop_at)`` of a self-distillation arm: the cosine horizon and where it stops (None: at it)."""
    arm = _arm(name)
    steps = p.extend.steps
    if arm.schedule == "early":
        return steps, p.selfdistill.ablation_steps
    if arm.schedule == "matched":
        return max(steps, int(round(steps * p.selfdistill.matched_steps_ratio))), None
    return steps, None


def rp_steps(p: Profile, name: str) -> int:
    """Optimizer steps the arm actually trains."""
    max_steps, stop_at = rp_schedule(p, name)
    return stop_at or max_steps


def longce_config(p: Profile):
    """The profile's LongCE settings (:class:`repro.methods.longce.LongCEConfig`)."""
    from repro.methods.longce import LongCEConfig

    sd = p.selfdistill
    return LongCEConfig(window=sd.longce_window, stride=sd.longce_stride)


def selfdistill_method(p: Profile, name: str, tokenizer, corpus_rows, seed: int | None = None):
    """The :class:`repro.methods.selfdistill.SelfDistillation` of a named arm with the profile's settings."""
    from repro.methods.selfdistill import SelfDistillation
    from repro.recipes.extension import extension_method

    arm = _arm(name)
    inner = extension_method(p, "flt", tokenizer, corpus_rows, seed=seed)
    _, stop_at = rp_schedule(p, name)
    return SelfDistillation(name, arm.spec, inner, seed=p.extend.seed if seed is None else seed,
                            pad_id=tokenizer.pad_token_id, bf16=p.selfdistill.bf16,
                            longce=longce_config(p) if arm.spec.longce else None, stop_at=stop_at)


def _method(p: Profile, arm: str, tokenizer, inputs: Inputs, seed: int | None):
    return selfdistill_method(p, arm, tokenizer, inputs.corpus_rows, seed=seed)


def model_settings(p: Profile, arm: str) -> dict[str, Any]:
    """``selfdistill.rope_theta``, positions up to the view's largest index, the dropout control's dropout."""
    from repro.models import rope_parameters

    spec = _arm(arm).spec
    out: dict[str, Any] = {"rope": rope_parameters("default", p.selfdistill.rope_theta),
                           "max_positions": spec.max_index(p.extend.target_window) + 1}
    if spec.perturbation == "dropout":
        out["overrides"] = {"attention_dropout": spec.dropout}
    return out


def train_config(p: Profile, arm: str, **overrides: Any):
    """Cosine over the arm's horizon (:func:`rp_schedule`), ``selfdistill.bf16``."""
    from repro.train import TrainConfig

    overrides = {"bf16": p.selfdistill.bf16, **overrides}
    return TrainConfig.from_section(p.extend, overrides.pop("max_steps", rp_schedule(p, arm)[0]),
                                    **{"schedule": "cosine", **overrides})


def curve_every(p: Profile, name: str) -> int:
    """``selfdistill.curve_every`` for the arms with a training curve (RP-Fig4), else 0."""
    return p.selfdistill.curve_every if _arm(name).curve else 0


def final_config(p: Profile, arm: str) -> dict[str, Any]:
    """The dropout control is evaluated without its dropout (it was the control's training device)."""
    return {"attention_dropout": 0.0} if _arm(arm).spec.perturbation == "dropout" else {}


RECIPE = Recipe("selfdistill", owns, _method, cli={"selfdistill": "rp_skip", "longce": "rp_longce"},
                model_settings=model_settings, train_config=train_config, steps=rp_steps, curve_every=curve_every,
                final_config=final_config)
"""The ``rp_*`` arms (``selfdistill``: the skip view; ``longce``: the comparison's LongCE arm)."""
