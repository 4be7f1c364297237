"""The self-distillation arms' training stage: every arm of :data:`repro.methods.arms.RP_ARMS` continues the
same base on full-length rows at the target window (FLT's data), with ``selfdistill.rope_theta`` (ABF) and
``selfdistill.bf16`` for all alike; the arms differ only in the objective (:mod:`repro.methods.selfdistill`).

Arms on the ``early`` schedule run the main cosine schedule and stop at ``selfdistill.ablation_steps`` (the
paper's ablations are read at step 200 of 1000); ``matched`` arms run ``selfdistill.matched_steps_ratio`` x
the steps (RP-Fig4). Arms with ``curve=True`` keep a checkpoint every ``selfdistill.curve_every`` steps,
exported as loadable folders ``curve/step-<n>`` (weights + the final config + tokenizer).
"""

from __future__ import annotations

import shutil
from pathlib import Path

from repro.profiles import Profile
from repro.stages.cache import as_profile, compute_once, stage_dir


def rp_schedule(p: Profile, name: str) -> tuple[int, int | None]:
    """``(max_steps, stop_at)`` of a self-distillation arm: the cosine horizon and where it stops (None: at it)."""
    from repro.methods.arms import rp_arm

    arm = rp_arm(name)
    if arm is None:
        raise ValueError(f"{name!r} is not a self-distillation arm; allowed: rp_* names of repro.methods.arms.RP_ARMS")
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
    from repro.methods.arms import rp_arm
    from repro.methods.selfdistill import SelfDistillation
    from repro.stages.extension import extension_method

    arm = rp_arm(name)
    inner = extension_method(p, "flt", tokenizer, corpus_rows, seed=seed)
    _, stop_at = rp_schedule(p, name)
    return SelfDistillation(name, arm.spec, inner, seed=p.extend.seed if seed is None else seed,
                            pad_id=tokenizer.pad_token_id, bf16=p.selfdistill.bf16,
                            longce=longce_config(p) if arm.spec.longce else None, stop_at=stop_at)


def train_selfdistill(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                      progress: bool = True) -> Path:
    """Train (or reuse) self-distillation arm ``name`` (``<arm>@seed<k>`` for a replicate); returns ``final``."""
    from repro.data.tokenizer import load_tokenizer
    from repro.methods.arms import rp_arm
    from repro.methods.prepared import PreparedBatches
    from repro.models import load_model
    from repro.stages.builders import model_settings
    from repro.stages.base import train_base
    from repro.stages.corpus import build_corpus
    from repro.stages.extension import prepare_extension_data
    from repro.stages.keys import extension_key, replicate_profile
    from repro.train import Trainer, TrainConfig

    p = as_profile(profile)
    rp, arm_name = replicate_profile(p, name)
    arm = rp_arm(arm_name)
    out = stage_dir(run_dir, p, f"extend-{name}", extension_key(p, name))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        e, sd = rp.extend, rp.selfdistill
        base = train_base(p, run_dir, progress=progress)
        settings = model_settings(rp, arm_name)
        overrides = settings.get("overrides")
        model = load_model(base, attn_implementation=p.model.attn_implementation, **settings)
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        m = selfdistill_method(rp, arm_name, tok, corpus.rows())
        max_steps, stop_at = rp_schedule(p, arm_name)
        data = prepare_extension_data(p, name, m, run_dir, steps=stop_at or max_steps)
        keep = {"checkpoint_every": sd.curve_every, "keep_checkpoints": 10**6} if arm.curve else {}
        cfg = TrainConfig.from_section(e, max_steps, schedule="cosine", bf16=sd.bf16, **keep)
        final = Trainer(model, PreparedBatches(data, inner=m), cfg, out, progress=progress).train()
        if overrides:  # the dropout was the control's training device; the model is evaluated without it
            from repro.io import atomic_write_json, read_json

            atomic_write_json(final / "config.json", {**read_json(final / "config.json"), "attention_dropout": 0.0})
        tok.save_pretrained(final)
        if arm.curve:
            export_curve(out, final)
        return final


def export_curve(stage: Path, final: Path) -> list[Path]:
    """Make every kept ``ckpt-<n>`` of a stage loadable as ``curve/step-<n>`` (its weights, the final folder's
    config and tokenizer); the final weights are ``curve/step-<steps>``. Returns the folders in step order."""
    from repro.io import atomic_dir

    out = []
    ckpts = sorted(stage.glob("ckpt-*"), key=lambda c: int(c.name.split("-")[1]))
    for c in ckpts:
        dest = stage / "curve" / f"step-{c.name.split('-')[1]}"
        if not (dest / "config.json").exists():
            with atomic_dir(dest) as tmp:
                shutil.copy2(c / "model.safetensors", tmp / "model.safetensors")
                for f in final.iterdir():
                    if f.suffix == ".json" and f.name != "train_summary.json" or f.name.startswith("tokenizer"):
                        shutil.copy2(f, tmp / f.name)
        out.append(dest)
    return out


def curve_checkpoints(stage_final: Path) -> dict[int, Path]:
    """Step -> loadable folder of the checkpoints kept along a curve arm's training (see :func:`export_curve`)."""
    d = Path(stage_final).parent / "curve"
    return {int(c.name.split("-")[1]): c for c in sorted(d.glob("step-*")) if (c / "config.json").exists()}
