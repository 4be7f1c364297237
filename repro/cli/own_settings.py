"""What a ``train`` run on a model of your own takes from the model and what from the profile: the profile chosen
when ``--profile`` is not given (:func:`chosen_profile`: ``tiny`` for the project's own models, ``pretrained`` for
any other, at the model's own window), ``--rope-theta paper`` (:func:`paper_rope`: the method's paper RoPE computed
from the loaded model), and the saved ``final/config.json`` put back to the model's own fields that loading for
training sets (:func:`final_config`). ``docs/own_model.md`` describes them for users."""

from __future__ import annotations

import argparse
from pathlib import Path

from repro.arms import ArmSpec, build_arm, builder_of
from repro.cli.common import CLIError, positive_float
from repro.cli.train_checks import PAPER_ROPE
from repro.io import atomic_write_json, read_json
from repro.methods import extension, prolong
from repro.methods.armspec import split_seed
from repro.profiles import get_profile


def rope_theta_arg(text: str) -> float | str:
    """``--rope-theta``: a finite number > 0, or :data:`PAPER_ROPE` (argparse type)."""
    if text == PAPER_ROPE:
        return text
    try:
        return positive_float(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(f"{e}".replace("allowed: ", f"allowed: {PAPER_ROPE!r} or ")) from None


OWN_MODEL_PROFILES: tuple[str, ...] = ("smoke", "tiny")
"""Profiles whose ``model`` section is a model the project builds and trains itself (no ``model.pretrained``)."""
OWN_MODEL_FIELDS: dict[str, str] = {"hidden_size": "hidden_size", "intermediate_size": "intermediate_size",
                                    "num_hidden_layers": "num_layers", "num_attention_heads": "num_heads",
                                    "num_key_value_heads": "num_kv_heads"}
"""config.json field -> ``ModelConfig`` field compared to tell the project's own models (:func:`chosen_profile`)."""
DEFAULT_OWN_PROFILE = "tiny"
"""``--profile`` when not given for one of the project's own models (the default it always had)."""
DEFAULT_PRETRAINED_PROFILE = "pretrained"
"""``--profile`` when not given for any other model (:data:`repro.profiles.PRETRAINED`)."""
MODEL_WINDOW_PROFILES: tuple[str, ...] = ("pretrained",)
"""Profiles whose base window is the model's own ``max_position_embeddings`` (``--base-window`` replaces it)."""


def model_config(model: str | Path) -> dict:
    """The model folder's ``config.json`` as a dict (empty when it cannot be read: the model checks name that)."""
    try:
        raw = read_json(Path(model) / "config.json")
    except (OSError, ValueError, RecursionError):
        return {}
    return raw if isinstance(raw, dict) else {}


def own_model_profile(cfg: dict) -> str | None:
    """The profile of :data:`OWN_MODEL_PROFILES` whose ``model`` section has the shape of ``cfg`` (width, MLP width,
    layers, heads, key/value heads: what ``repro.models.build_tiny`` builds from it), or None: then it is a model
    the project did not build."""
    for name in OWN_MODEL_PROFILES:
        m = get_profile(name).model
        if all(cfg.get(k) == getattr(m, f) for k, f in OWN_MODEL_FIELDS.items()):
            return name
    return None


def chosen_profile(args: argparse.Namespace) -> tuple[str, str | None]:
    """``(profile, why)`` of a ``train`` run: ``--profile`` when given (why None); else :data:`DEFAULT_OWN_PROFILE`
    for one of the project's own models (:func:`own_model_profile`) and :data:`DEFAULT_PRETRAINED_PROFILE` for any
    other, with the one line that says why."""
    if args.profile is not None:
        return args.profile, None
    cfg = model_config(args.model)
    shape = ", ".join(f"{k}={cfg.get(k)}" for k in ("hidden_size", "num_hidden_layers", "num_attention_heads"))
    own = own_model_profile(cfg) if cfg else DEFAULT_OWN_PROFILE
    if own is not None:
        return DEFAULT_OWN_PROFILE, (f"--profile {DEFAULT_OWN_PROFILE} (not given): --model has the shape of the "
                                     f"{own} profile's own model ({shape})")
    return DEFAULT_PRETRAINED_PROFILE, (f"--profile {DEFAULT_PRETRAINED_PROFILE} (not given): --model is not one of "
                                        f"the project's own models ({shape}); lr 1e-5, --data only, base window the "
                                        "model's max_position_embeddings (--profile NAME chooses another)")


def base_window_of(args: argparse.Namespace, profile: str) -> int | None:
    """The base window of the run: ``--base-window``; for :data:`MODEL_WINDOW_PROFILES` the model's own
    ``max_position_embeddings``; else None (the profile's)."""
    if args.base_window is not None or profile not in MODEL_WINDOW_PROFILES:
        return args.base_window
    window = model_config(args.model).get("max_position_embeddings")
    return window if isinstance(window, int) and window >= 2 else None


WARMUP_SHARE = 0.1
"""Share of ``--steps`` that warms the lr up in :data:`MODEL_WINDOW_PROFILES` (ProLong Table 9: 10% warmup)."""


def run_warmup(profile: str, steps: int | None) -> dict[str, int]:
    """``extend`` fields of the run's warmup: for :data:`MODEL_WINDOW_PROFILES` with ``--steps`` given, the first
    :data:`WARMUP_SHARE` of them (rounded down: a 1-step run starts at the peak lr), else nothing (the profile's);
    an ``extend.warmup_steps=N`` override still wins."""
    if steps is None or profile not in MODEL_WINDOW_PROFILES:
        return {}
    return {"warmup_steps": int(steps * WARMUP_SHARE)}


def head_dim(cfg: dict) -> int | None:
    """The attention head size of a model's ``config.json``: ``head_dim``, or ``hidden_size / num_attention_heads``."""
    d, hidden, heads = cfg.get("head_dim"), cfg.get("hidden_size"), cfg.get("num_attention_heads")
    if isinstance(d, int) and d > 0:
        return d
    return hidden // heads if isinstance(hidden, int) and isinstance(heads, int) and heads > 0 else None


def paper_rope(p, arm: str, own: dict, cfg: dict) -> tuple[dict | None, str]:
    """``(rope, why)``: the RoPE arm ``arm``'s paper sets, computed from the loaded model (its RoPE ``own`` and
    ``config.json`` ``cfg``) rather than from the profile's model section: the arm built on ``p`` with ``model``
    replaced by this model's base and head size, and ``selfdistill.rope_theta`` moved to the same multiple of this
    base (ABF); rope None: the method keeps the model's own. ``why`` names the rule and its inputs (the notice)."""
    theta, heads, d = float(own["rope_theta"]), cfg.get("num_attention_heads"), head_dim(cfg)
    if not isinstance(heads, int) or d is None:
        raise CLIError("--rope-theta paper needs the model's num_attention_heads and head size in its config.json; "
                       "allowed: a number for --rope-theta")
    multiple = p.selfdistill.rope_theta / p.model.rope_theta
    q = p.override(model={"rope_theta": theta, "hidden_size": d * heads, "num_heads": heads, "num_kv_heads": heads},
                   selfdistill={"rope_theta": theta * multiple})
    build = build_arm(q, arm)
    rope = build.model.get("rope")
    if builder_of(arm) is prolong.build:
        ntk = prolong.ntk_theta(q)
        why = (f"ProLong, {prolong.arm_rope_theta(q, split_seed(arm)[0]) / ntk:g}x the dynamic-NTK base "
               f"theta*t^(d/(d-2)) = {ntk:.0f} from the model's theta={theta:g}, head size d={d}, t=target/base window="
               f"{q.extend.target_window}/{q.base.window}")
    elif builder_of(arm) is extension.build:
        why = "the profile's extend.rope_type / rope_theta / rope_factor"
    else:
        why = f"ABF, {multiple:g}x the model's base (the profile's selfdistill.rope_theta / model.rope_theta)"
    if rope is not None and rope.get("rope_type", "default") == "default":
        rope = {**own, "rope_theta": rope["rope_theta"]}  # a new base alone: the model's own scaling stays
    return rope, why


LOAD_FIELDS: tuple[str, ...] = ("use_cache",)
"""``config.json`` fields that loading for training sets (:func:`repro.models.load_model`: no key/value cache, which
would also hide packed documents from attention) and that the saved ``final/config.json`` takes back from
``--model``'s: the saved config is the model's own with only the method's declared changes."""


def final_config(model: str | Path, spec: ArmSpec) -> dict:
    """What ``final/config.json`` is set to after training: the :data:`LOAD_FIELDS` back to ``model``'s own values
    (None: a field its config.json does not hold, removed) and the arm's declared ``final_config`` (the dropout
    control's dropout switched off for evaluation, as the pipeline saves it)."""
    own = model_config(model)
    return {**{k: own.get(k) for k in LOAD_FIELDS}, **spec.final_config}


def write_final_config(final: Path, changes: dict) -> None:
    """Set ``changes`` in ``final/config.json`` (a None value removes the field), written whole or not at all;
    nothing is written when nothing changes, so a repeat (a resumed run's) is a no-op."""
    path = final / "config.json"
    old = read_json(path)
    new = {k: v for k, v in {**old, **changes}.items() if not (k in changes and changes[k] is None)}
    if new != old:
        atomic_write_json(path, new)


def positions_note(spec: ArmSpec, cfg: dict) -> str | None:
    """The notice of an arm that trains positions beyond the model's ``max_position_embeddings`` (``cfg``: its
    config.json), which loading raises to the arm's ``max_positions`` (the skip view's indices reach about twice the
    target); None when they fit."""
    old, new = cfg.get("max_position_embeddings"), spec.model.get("max_positions")
    if not isinstance(old, int) or not isinstance(new, int) or new <= old:
        return None
    return (f"max_position_embeddings raised from the model's {old} to {new}: arm {spec.name} trains position ids up "
            f"to {new - 1}")
