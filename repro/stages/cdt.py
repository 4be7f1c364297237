"""Context Denoising Training's analysis model as a cached stage (the CD arms themselves train through
:func:`repro.stages.arms.train_arm`, built by :func:`repro.methods.cdt.build`).

:func:`train_task_model`: the base does not answer the multi-hop task (0% in ``TB-Base``), and the token-type
analyses need right and wrong answers; so the base is fine-tuned on ``cdt.task`` rows at its own window (training
key pool, all rows retrieval examples) for ``cdt.task_steps`` steps, with CE (``ce``: the model analysed) or with
CDT (``cdt``: CD-Fig10's EM curve beside CE's), checkpoints every ``cdt.task_curve_every`` steps
(:func:`repro.stages.curves.task_checkpoints`).
"""

from __future__ import annotations

from pathlib import Path

from repro.data.tokenizer import load_tokenizer
from repro.methods.cdt import TASK_OBJECTIVES, task_method, task_train_config
from repro.methods.prepared import PreparedBatches, prepare_batches
from repro.models import load_model
from repro.profiles import Profile
from repro.stages.base import train_base
from repro.stages.cache import as_profile, compute_once, stage_dir, stage_key
from repro.stages.corpus import build_corpus
from repro.stages.curves import export_curve, task_checkpoints
from repro.stages.keys import base_key
from repro.train import Trainer

__all__ = ["task_checkpoints", "task_key", "train_task_model"]


def task_key(p: Profile, objective: str) -> str:
    """Cache key of a task fine-tune: the base, what builds its rows, and the objective."""
    e, cd = p.extend, p.cdt
    used = {"task": cd.task, "steps": cd.task_steps, "lr": cd.task_lr, "curve_every": cd.task_curve_every}
    if objective == "cdt":
        used.update(beta=cd.beta, threshold=cd.threshold)
    return stage_key("cdtask", {"base": base_key(p), "objective": objective, "cdt": used, "window": p.base.window,
                                "extend": {k: getattr(e, k) for k in ("batch_size", "warmup_steps", "min_lr_ratio",
                                                                       "grad_clip", "context_weight", "seed",
                                                                       "bf16", "threads", "betas", "weight_decay")
                                           if hasattr(e, k)}})


def train_task_model(profile: Profile | str, objective: str = "ce", run_dir: str | Path = "runs",
                     force: bool = False, progress: bool = True) -> Path:
    """Fine-tune (or reuse) the base on the analysis task with ``objective`` (``ce`` or ``cdt``); returns
    ``final``. Checkpoints along the way: :func:`task_checkpoints`."""
    if objective not in TASK_OBJECTIVES:
        raise ValueError(f"objective={objective!r}; allowed: {', '.join(TASK_OBJECTIVES)}")
    p = as_profile(profile)
    out = stage_dir(run_dir, p, f"cdtask-{objective}", task_key(p, objective))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        base = train_base(p, run_dir, progress=progress)
        model = load_model(base, attn_implementation=p.model.attn_implementation)
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        m = task_method(p, objective, tok, corpus.rows())
        inner = getattr(m, "inner", m)
        data = stage_dir(run_dir, p, "data-cdtask", task_key(p, "ce"))  # the same rows for both objectives
        with compute_once(data, "prepared.json", force) as prepared:
            if prepared is None:
                prepare_batches(inner, p.cdt.task_steps, data)
        final = Trainer(model, PreparedBatches(data, inner=m), task_train_config(p), out, progress=progress).train()
        tok.save_pretrained(final)
        export_curve(out, final)
        return final
