"""Context Denoising Training's training stages.

- :func:`train_cdt`: a CDT arm of :data:`repro.methods.arms.CD_ARMS` at the target, trained exactly as the
  self-distillation comparison's ``rp_standard`` (same base, FLT's rows, ``selfdistill.rope_theta``,
  ``selfdistill.bf16``, ``extend``'s schedule) with the CDT objective (``cdt.beta``, ``cdt.threshold``). The plain
  arm keeps a checkpoint every ``cdt.curve_every`` steps (CD-Fig10 at the target), exported as ``curve/step-<n>``.
- :func:`train_task_model`: the analysis model. The base does not answer the multi-hop task (0% in ``TB-Base``),
  and the token-type analyses need right and wrong answers; so the base is fine-tuned on ``cdt.task`` rows at its
  own window (training key pool, all rows retrieval examples) for ``cdt.task_steps`` steps, with CE (``ce``: the
  model analysed) or with CDT (``cdt``: CD-Fig10's EM curve beside CE's), checkpoints every
  ``cdt.task_curve_every`` steps.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from repro.profiles import Profile
from repro.stages.cache import as_profile, compute_once, stage_dir, stage_key

TASK_OBJECTIVES = ("ce", "cdt")
"""Objectives of the task fine-tune."""


def cdt_spec(p: Profile):
    """The profile's :class:`repro.methods.cdt.CDTSpec`."""
    from repro.methods.cdt import CDTSpec

    return CDTSpec(beta=p.cdt.beta, threshold=p.cdt.threshold)


def cdt_method(p: Profile, name: str, tokenizer, corpus_rows, seed: int | None = None, inner=None):
    """The :class:`repro.methods.cdt.ContextDenoising` of a CD arm on FLT's rows (or ``inner``'s)."""
    from repro.methods.cdt import ContextDenoising
    from repro.stages.extension import extension_method

    inner = inner or extension_method(p, "flt", tokenizer, corpus_rows, seed=seed)
    return ContextDenoising(name, cdt_spec(p), inner, pad_id=tokenizer.pad_token_id, bf16=p.selfdistill.bf16)


def train_cdt(profile: Profile | str, name: str = "cdt", run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True) -> Path:
    """Train (or reuse) CDT arm ``name`` (``cdt@seed<k>`` for a replicate); returns its ``final`` folder."""
    from repro.data.tokenizer import load_tokenizer
    from repro.methods.arms import cd_arm, split_seed
    from repro.methods.prepared import PreparedBatches
    from repro.models import load_model
    from repro.stages.base import train_base
    from repro.stages.builders import model_settings
    from repro.stages.corpus import build_corpus
    from repro.stages.extension import prepare_extension_data
    from repro.stages.keys import extension_key, replicate_profile
    from repro.stages.selfdistill import export_curve
    from repro.train import Trainer, TrainConfig

    if cd_arm(name) is None:
        from repro.methods.arms import CD_ARMS

        raise ValueError(f"{name!r} is not a CDT arm; allowed: {', '.join(CD_ARMS)} (optionally @seed<k>)")
    p = as_profile(profile)
    rp, arm = replicate_profile(p, name)
    out = stage_dir(run_dir, p, f"extend-{name}", extension_key(p, name))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        e, sd = rp.extend, rp.selfdistill
        base = train_base(p, run_dir, progress=progress)
        model = load_model(base, attn_implementation=p.model.attn_implementation, **model_settings(rp, arm))
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        m = cdt_method(rp, arm, tok, corpus.rows())
        data = prepare_extension_data(p, name, m, run_dir)
        curve = split_seed(name)[1] == 0
        keep = {"checkpoint_every": p.cdt.curve_every, "keep_checkpoints": 10**6} if curve else {}
        cfg = TrainConfig.from_section(e, e.steps, schedule="cosine", bf16=sd.bf16, **keep)
        final = Trainer(model, PreparedBatches(data, inner=m), cfg, out, progress=progress).train()
        tok.save_pretrained(final)
        if curve:
            export_curve(out, final)
        return final


def task_key(p: Profile, objective: str) -> str:
    """Cache key of a task fine-tune: the base, what builds its rows, and the objective."""
    from repro.stages.keys import base_key

    e, cd = p.extend, p.cdt
    used = {"task": cd.task, "steps": cd.task_steps, "lr": cd.task_lr, "curve_every": cd.task_curve_every}
    if objective == "cdt":
        used.update(beta=cd.beta, threshold=cd.threshold)
    return stage_key("cdtask", {"base": base_key(p), "objective": objective, "cdt": used, "window": p.base.window,
                                "extend": {k: getattr(e, k) for k in ("batch_size", "warmup_steps", "min_lr_ratio",
                                                                       "grad_clip", "context_weight", "seed",
                                                                       "bf16", "threads", "betas", "weight_decay")
                                           if hasattr(e, k)}})


def _task_extension(p: Profile, tokenizer, corpus_rows):
    from repro.methods import EXTENSION_METHODS, get_method

    e = p.extend
    return get_method("extension", name=f"task-{p.cdt.task}", spec=EXTENSION_METHODS["flt"], target=p.base.window,
                      batch_size=e.batch_size, retrieval_fraction=1.0, tokenizer=tokenizer, corpus=corpus_rows,
                      seed=e.seed, context_weight=e.context_weight, train_tasks=(p.cdt.task,))


def train_task_model(profile: Profile | str, objective: str = "ce", run_dir: str | Path = "runs",
                     force: bool = False, progress: bool = True) -> Path:
    """Fine-tune (or reuse) the base on the analysis task with ``objective`` (``ce`` or ``cdt``); returns
    ``final``. Checkpoints along the way: :func:`task_checkpoints`."""
    from repro.data.tokenizer import load_tokenizer
    from repro.methods.prepared import PreparedBatches, prepare_batches
    from repro.models import load_model
    from repro.stages.base import train_base
    from repro.stages.corpus import build_corpus
    from repro.stages.selfdistill import export_curve
    from repro.train import Trainer, TrainConfig

    if objective not in TASK_OBJECTIVES:
        raise ValueError(f"objective={objective!r}; allowed: {', '.join(TASK_OBJECTIVES)}")
    p = as_profile(profile)
    key = task_key(p, objective)
    out = stage_dir(run_dir, p, f"cdtask-{objective}", key)
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        cd = p.cdt
        base = train_base(p, run_dir, progress=progress)
        model = load_model(base, attn_implementation=p.model.attn_implementation)
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        inner = _task_extension(p, tok, corpus.rows())
        m = cdt_method(p, f"task-{objective}", tok, None, inner=inner) if objective == "cdt" else inner
        data = stage_dir(run_dir, p, "data-cdtask", task_key(p, "ce"))  # the same rows for both objectives
        with compute_once(data, "prepared.json", force) as prepared:
            if prepared is None:
                prepare_batches(inner, cd.task_steps, data)
        cfg = TrainConfig(max_steps=cd.task_steps, lr=cd.task_lr, warmup_steps=p.extend.warmup_steps,
                          min_lr_ratio=p.extend.min_lr_ratio, grad_clip=p.extend.grad_clip, bf16=p.extend.bf16,
                          threads=p.extend.threads, checkpoint_every=cd.task_curve_every, keep_checkpoints=10**6,
                          seed=p.extend.seed)
        final = Trainer(model, PreparedBatches(data, inner=m), cfg, out, progress=progress).train()
        tok.save_pretrained(final)
        export_curve(out, final)
        return final


def task_checkpoints(final: Path) -> dict[int, Path]:
    """Step -> loadable folder of the checkpoints a curve stage kept (a task fine-tune, or the plain CDT arm),
    with the final weights at the last step."""
    from repro.io import read_json
    from repro.stages.selfdistill import curve_checkpoints

    final = Path(final)
    return {**curve_checkpoints(final), int(read_json(final / "train_summary.json")["steps"]): final}


def stage_fields(p: Profile) -> dict:
    """The ``cdt`` fields a CD arm's weights depend on (for :func:`repro.stages.keys.extension_key`)."""
    cd = dataclasses.asdict(p.cdt)
    return {k: cd[k] for k in ("beta", "threshold")}
