"""Context Denoising Training: the CD arms of :data:`repro.methods.arms.CD_ARMS` and the analysis task model.

A CD arm trains exactly as the self-distillation comparison's ``rp_standard`` (same base, FLT's rows,
``selfdistill.rope_theta``, ``selfdistill.bf16``, ``extend``'s schedule) with the CDT objective (``cdt.beta``,
``cdt.threshold``; :mod:`repro.methods.cdt`). The plain arm keeps a checkpoint every ``cdt.curve_every`` steps
(CD-Fig10 at the target). The analysis model is the base fine-tuned on ``cdt.task`` rows at its own window
(:func:`task_extension`, :func:`task_train_config`), with CE or with CDT.
"""

from __future__ import annotations

from typing import Any

from repro.profiles import Profile
from repro.recipes.registry import Inputs, Recipe

TASK_OBJECTIVES = ("ce", "cdt")
"""Objectives of the task fine-tune."""


def owns(arm: str) -> bool:
    from repro.methods.arms import CD_ARMS

    return arm in CD_ARMS


def cdt_spec(p: Profile):
    """The profile's :class:`repro.methods.cdt.CDTSpec`."""
    from repro.methods.cdt import CDTSpec

    return CDTSpec(beta=p.cdt.beta, threshold=p.cdt.threshold)


def cdt_method(p: Profile, name: str, tokenizer, corpus_rows, seed: int | None = None, inner=None):
    """The :class:`repro.methods.cdt.ContextDenoising` of a CD arm on FLT's rows (or ``inner``'s)."""
    from repro.methods.cdt import ContextDenoising
    from repro.recipes.extension import extension_method

    inner = inner or extension_method(p, "flt", tokenizer, corpus_rows, seed=seed)
    return ContextDenoising(name, cdt_spec(p), inner, pad_id=tokenizer.pad_token_id, bf16=p.selfdistill.bf16)


def _method(p: Profile, arm: str, tokenizer, inputs: Inputs, seed: int | None):
    return cdt_method(p, arm, tokenizer, inputs.corpus_rows, seed=seed)


def model_settings(p: Profile, arm: str) -> dict[str, Any]:
    """``selfdistill.rope_theta`` (as ``rp_standard``)."""
    from repro.models import rope_parameters

    return {"rope": rope_parameters("default", p.selfdistill.rope_theta)}


def train_config(p: Profile, arm: str, **overrides: Any):
    """``extend``'s cosine schedule with ``selfdistill.bf16`` (as ``rp_standard``)."""
    from repro.train import TrainConfig

    overrides = {"bf16": p.selfdistill.bf16, **overrides}
    return TrainConfig.from_section(p.extend, overrides.pop("max_steps", p.extend.steps),
                                    **{"schedule": "cosine", **overrides})


def curve_every(p: Profile, name: str) -> int:
    """``cdt.curve_every`` for the plain arm (not its replicates): CD-Fig10 at the target."""
    from repro.methods.arms import split_seed

    return p.cdt.curve_every if split_seed(name)[1] == 0 else 0


def key_fields(p: Profile) -> dict:
    """The ``cdt`` fields a CD arm's weights depend on."""
    return {"beta": p.cdt.beta, "threshold": p.cdt.threshold}


def task_extension(p: Profile, tokenizer, corpus_rows):
    """The task fine-tune's rows: ``cdt.task`` retrieval examples at the base window (FLT's positions)."""
    from repro.methods import EXTENSION_METHODS, get_method

    e = p.extend
    return get_method("extension", name=f"task-{p.cdt.task}", spec=EXTENSION_METHODS["flt"], target=p.base.window,
                      batch_size=e.batch_size, retrieval_fraction=1.0, tokenizer=tokenizer, corpus=corpus_rows,
                      seed=e.seed, context_weight=e.context_weight, train_tasks=(p.cdt.task,))


def task_method(p: Profile, objective: str, tokenizer, corpus_rows):
    """The task fine-tune's method: the task rows with CE (``ce``) or with the CDT objective (``cdt``)."""
    if objective not in TASK_OBJECTIVES:
        raise ValueError(f"objective={objective!r}; allowed: {', '.join(TASK_OBJECTIVES)}")
    inner = task_extension(p, tokenizer, corpus_rows)
    return cdt_method(p, f"task-{objective}", tokenizer, None, inner=inner) if objective == "cdt" else inner


def task_train_config(p: Profile):
    """The task fine-tune's :class:`repro.train.TrainConfig`: ``cdt.task_steps`` at ``cdt.task_lr``, a checkpoint
    every ``cdt.task_curve_every`` steps, ``extend``'s other settings."""
    from repro.train import TrainConfig

    cd, e = p.cdt, p.extend
    return TrainConfig(max_steps=cd.task_steps, lr=cd.task_lr, warmup_steps=e.warmup_steps,
                       min_lr_ratio=e.min_lr_ratio, grad_clip=e.grad_clip, bf16=e.bf16, threads=e.threads,
                       checkpoint_every=cd.task_curve_every, keep_checkpoints=10**6, seed=e.seed, device=p.run.device)


RECIPE = Recipe("cdt", owns, _method, cli={"cdt": "cdt"}, model_settings=model_settings, train_config=train_config,
                curve_every=curve_every)
"""The CD arms (``cdt``)."""
