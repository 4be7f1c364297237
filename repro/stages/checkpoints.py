"""Finished checkpoints by arm name (:mod:`repro.methods.arms`): where they are, which exist."""

from __future__ import annotations

from pathlib import Path

from transformers import AutoConfig

from repro import model_store
from repro.arms import extension_arms
from repro.methods import parse_arm
from repro.methods.arms import SEED_MARK, STAGES
from repro.profiles import Profile
from repro.stages.cache import as_profile, stage_dir, verify_stage
from repro.stages.keys import base_key, extension_key, merge_key, replay_key


def checkpoint_path(profile: Profile | str, name: str, run_dir: str | Path = "runs", verify: bool = True) -> Path:
    """Path of a finished checkpoint by name; error if missing, or (``verify``) if its stage's files no longer
    match their manifest (:func:`repro.stages.cache.verify_stage`: the training notebook recomputes it).

    Names: ``base``, an extension arm (``flt``, ``pose``, ``longrecipe_r10``, ...), ``<arm>+replay``
    (after pretraining-data replay) and ``<arm>+merge`` (replayed model merged with the base, Eq. 8), each
    optionally with a training-seed suffix ``@seed<k>`` (its own stages: :func:`repro.stages.keys.replicate_profile`).
    """
    p = as_profile(profile)
    a = parse_arm(name)
    arm = f"{a.arm}{SEED_MARK}{a.replicate}" if a.replicate else a.arm  # a replicate has stages of its own
    if a.stage == "base":
        path = Path(model_store.resolve(p.model.pretrained)) if p.model.pretrained else \
            stage_dir(run_dir, p, "base", base_key(p)) / "final"  # a model name: its fetched folder
    elif a.stage == "replay":
        path = stage_dir(run_dir, p, f"replay-{arm}", replay_key(p, arm)) / "final"
    elif a.stage == "merge":
        path = stage_dir(run_dir, p, f"merge-{arm}", merge_key(p, arm)) / "final"
    else:
        path = stage_dir(run_dir, p, f"extend-{arm}", extension_key(p, arm)) / "final"
    if not p.model.pretrained and not path.exists():
        raise FileNotFoundError(f"checkpoint {name!r} for profile {p.name!r} not found at {path}; "
                                "run the training notebook first (python -m repro reproduce --only training)")
    if verify and not p.model.pretrained:
        verify_stage(path.parent, "final")
    return path


def available_checkpoints(profile: Profile | str, run_dir: str | Path = "runs") -> list[str]:
    """Names of the finished checkpoints in ``run_dir``: ``base``, extension arms, ratio arms, replay/merge."""
    p = as_profile(profile)
    out = []
    names = ["base", *extension_arms(p)]
    names += [f"{m}+{stage}" for m in p.longrecipe.replay_methods for stage in STAGES]
    for name in names:
        try:
            checkpoint_path(p, name, run_dir, verify=False)
        except FileNotFoundError:
            continue
        out.append(name)
    return out


def checkpoint_rope_theta(profile: Profile | str, name: str, run_dir: str | Path = "runs") -> float:
    """The RoPE base in a checkpoint's config (what a YaRN override must keep)."""
    cfg = AutoConfig.from_pretrained(str(checkpoint_path(profile, name, run_dir)))
    params = getattr(cfg, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(cfg, "rope_theta", as_profile(profile).model.rope_theta)))
