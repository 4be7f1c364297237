"""The ``train`` command's checks of its inputs before any work (sizes, seeds, anchors, LoRA rank, the launch) and
the fixes it makes to a model's config, each with one ``warning:`` line (:mod:`repro.cli.train`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from repro.cli.common import CLIError, env_limit, launched_rank, warn
from repro.io import read_json

MIN_TARGET = 16
"""Shortest ``--target`` accepted (the methods' rows need room for a sentence, its jumps and the loss)."""
MAX_TARGET = 1 << 20
"""Longest ``--target`` accepted (1M tokens)."""
MAX_STEPS = 10_000_000
"""Most ``--steps`` accepted unless ``REPRO_MAX_STEPS`` says otherwise (10M: far beyond any recipe here; the
paper profile trains 104 steps)."""
MAX_TOKENS_PER_STEP = 1 << 24
"""Most tokens per optimizer step (rows x ``--target``) accepted unless ``REPRO_MAX_TOKENS_PER_STEP`` says
otherwise: 16,777,216, about twice the paper profile's 96 x 81,920 = 7.9M. Every token of a step goes through the
forward and backward (in micro batches), so a step of more tokens than this runs for many minutes on the testbed
models before its first line of output: the bound is a time and memory estimate checked before any work."""
SEED_LIMIT = 1 << 32
"""``--seed`` must be below this (numpy's seeds are 32-bit)."""


def check_counts(args: argparse.Namespace) -> None:
    """``--seed`` in numpy's range, ``--steps`` and ``--batch-size`` x ``--target`` within their sanity bounds
    (:data:`MAX_STEPS`, :data:`MAX_TOKENS_PER_STEP`; each raised by its environment variable)."""
    if args.seed is not None and not 0 <= args.seed < SEED_LIMIT:
        raise CLIError(f"--seed {args.seed}; allowed: 0 <= --seed < 2**32 ({SEED_LIMIT})")
    max_steps = env_limit("REPRO_MAX_STEPS", MAX_STEPS)
    if args.steps is not None and args.steps > max_steps:
        raise CLIError(f"--steps {args.steps} is more than allowed; allowed: 1 <= --steps <= {max_steps:,} "
                       "(set REPRO_MAX_STEPS to go further)")
    if args.batch_size is not None:
        check_step_tokens(args.batch_size, args.target)


def check_step_tokens(batch: int, target: int) -> None:
    """A :class:`CLIError` when ``batch`` rows of ``target`` tokens exceed :data:`MAX_TOKENS_PER_STEP` (or
    ``REPRO_MAX_TOKENS_PER_STEP``), naming the product, the limit and the largest batch at this target."""
    limit = env_limit("REPRO_MAX_TOKENS_PER_STEP", MAX_TOKENS_PER_STEP)
    if batch * target > limit:
        raise CLIError(f"--batch-size {batch} x --target {target} = {batch * target:,} tokens per step, more than "
                       f"allowed; allowed: --batch-size x --target <= {limit:,} (here --batch-size <= "
                       f"{max(limit // target, 1)}): lower --batch-size or --target, or set REPRO_MAX_TOKENS_PER_STEP "
                       "when the machine can take it")


def launch_hint(sp: int) -> str:
    """How to start ``DP x sp`` processes of ``train`` (CPU and GPU: torchrun; GPUs: accelerate launch too)."""
    return (f"torchrun --nproc_per_node {sp} -m repro train ... --sequence-parallel {sp} (or DP x {sp} processes; "
            f"on GPUs also accelerate launch --num_processes {sp})")


def read_anchors(path: str | None, method: str, vocab: int, needed: bool = False):
    """Anchor token ids from a JSON list or a ``{"anchors": [...]}`` object (``analyze tokens``' output);
    ``needed``: the method selects anchor sentences (a :class:`CLIError` without ``--anchors``)."""
    if path is None:
        if needed:
            raise CLIError(f"--method {method} selects anchor sentences; allowed: pass --anchors FILE "
                           "(python -m repro analyze tokens writes one)")
        return None
    try:
        raw = read_json(path)
    except (ValueError, RecursionError) as e:  # RecursionError: JSON nested too deeply for Python's parser
        why = "nested too deeply" if isinstance(e, RecursionError) else " ".join(str(e).split())[:200]
        raise CLIError(f"--anchors {path!r} is not JSON ({why}); allowed: a JSON list of token ids or "
                       "{'anchors': [...]}") from e
    ids = raw.get("anchors") if isinstance(raw, dict) else raw
    if isinstance(ids, list) and not ids:
        raise CLIError(f"--anchors {path!r} holds an empty list of anchors; allowed: at least one token id in "
                       f"0..{vocab - 1} (python -m repro analyze tokens writes them)")
    if not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < vocab for i in ids):
        raise CLIError(f"--anchors {path!r}: expected a list of token ids in 0..{vocab - 1} (or {{'anchors': [...]}})")
    return np.asarray(ids, dtype=np.int64)


def check_lora_rank(model, spec) -> None:
    """A :class:`CLIError` when the LoRA rank exceeds the smallest width (``min(in, out)``) of the linear modules
    it adapts: past that width an adapter is no longer low-rank, only larger on disk."""
    widths = {n: min(m.in_features, m.out_features) for n, m in model.named_modules()
              if isinstance(m, torch.nn.Linear) and n.rsplit(".", 1)[-1] in spec.target_modules}
    if not widths:  # no such module: apply_lora names the targets
        return
    name = min(widths, key=widths.get)
    if spec.r > widths[name]:
        raise CLIError(f"--lora {spec.r} is larger than the model's smallest adapted width {widths[name]} ({name}; "
                       f"hidden size {getattr(model.config, 'hidden_size', '?')}); allowed: 1 <= --lora <= "
                       f"{widths[name]}")


def fit_config(model, tok, target: int, out: Path) -> None:
    """Make the saved config agree with the run, each change with one ``warning:`` line: a
    ``max_position_embeddings`` below ``target`` is raised to it (positions up to ``target - 1`` are trained;
    a scaled RoPE without ``original_max_position_embeddings`` keeps the old value there, so its scaling does not
    change), and a config without ``pad_token_id`` gets the tokenizer's (the EOS token when it had no pad)."""
    cfg = model.config
    old = getattr(cfg, "max_position_embeddings", None)
    if isinstance(old, int) and old < target:
        warn(f"--model's max_position_embeddings is {old}, below --target {target}: positions up to {target - 1} "
             f"are trained and {out / 'final' / 'config.json'} will say max_position_embeddings={target}")
        rope = getattr(cfg, "rope_parameters", None)
        if isinstance(rope, dict) and rope.get("rope_type", "default") != "default":
            rope.setdefault("original_max_position_embeddings", old)
        cfg.max_position_embeddings = target
    if getattr(cfg, "pad_token_id", 0) is None and tok.pad_token_id is not None:
        cfg.pad_token_id = tok.pad_token_id


def model_rope(model: str | Path) -> dict:
    """The RoPE of the model folder's ``config.json``: its ``rope_parameters`` (or the older ``rope_theta`` and
    ``rope_scaling`` fields), ``rope_type`` and ``rope_theta`` always present."""
    cfg = read_json(Path(model) / "config.json")
    rope = dict(cfg.get("rope_parameters") or cfg.get("rope_scaling") or {})
    rope.setdefault("rope_type", rope.pop("type", "default"))
    rope.setdefault("rope_theta", float(cfg.get("rope_theta", 10000.0)))
    return rope


def upcast_note(model: str | Path) -> str | None:
    """The notice of a run whose ``--model`` holds weights other than float32 on disk (its ``config.json``'s
    ``dtype`` / ``torch_dtype``): they train as float32 (weights and optimizer states; ``--dtype`` sets only the
    autocast) and the saved checkpoint is float32. None for float32 weights or a config that names no dtype."""
    cfg = read_json(Path(model) / "config.json")
    dtype = cfg.get("dtype") or cfg.get("torch_dtype") if isinstance(cfg, dict) else None
    if not isinstance(dtype, str) or dtype in ("float32", "auto"):
        return None
    return (f"--model's weights are {dtype} on disk; they train and are saved as float32 (weights and optimizer "
            "states; --dtype sets only the autocast)")


PAPER_ROPE = "paper"
"""``--rope-theta paper``: the RoPE the method's paper sets, computed from the loaded model."""


def run_rope(method_rope: dict | None, own: dict, rope_theta: float | str | None,
             paper: tuple[dict | None, str] | None = None) -> tuple[dict | None, str | None]:
    """``(rope for load_model, notice)`` of a run on the user's model: the model's own RoPE base unless
    ``--rope-theta`` (``rope_theta``) sets one, or asks for the method's paper RoPE (:data:`PAPER_ROPE`: ``paper``,
    ``(rope, why)`` computed from this model, rope None for the model's own); a RoPE scaling the profile's ``extend``
    section sets (``rope_type`` other than ``default``: the paper profile's dynamic NTK) is kept on the chosen base.
    The notice names what changed (None: nothing; ``rope`` None: the model's own RoPE)."""
    if rope_theta == PAPER_ROPE:
        rope, why = paper if paper is not None else (None, "")
        if rope is None or rope == own:
            return None, None
        return rope, (f"RoPE changed from the model's {_show_rope(own)} to {_show_rope(rope)} (--rope-theta paper: "
                      f"{why})")
    theta = float(own["rope_theta"] if rope_theta is None else rope_theta)
    if method_rope is not None and method_rope.get("rope_type", "default") != "default":
        rope, why = {**method_rope, "rope_theta": theta}, "the profile's extend.rope_type"
    elif rope_theta is not None and theta != float(own["rope_theta"]):
        rope, why = {**own, "rope_theta": theta}, "--rope-theta"
    else:
        return None, None
    if rope == own:
        return None, None
    return rope, f"RoPE changed from the model's {_show_rope(own)} to {_show_rope(rope)} ({why})"


def _show_rope(r: dict) -> str:
    return f"{r['rope_type']} rope_theta={r['rope_theta']:g}" + (f" factor={r['factor']:g}" if "factor" in r else "")


def notice(message: str) -> None:
    """One ``note: ...`` line on stderr (rank 0 of a launched run): a setting the run changes on purpose."""
    if launched_rank() == 0:
        print(f"note: {message}", file=sys.stderr)


def zero_stage(path: str | None) -> int:
    """``zero_optimization.stage`` of a DeepSpeed config (0 without one); a config that does not parse is a
    :class:`CLIError`."""
    if path is None:
        return 0
    try:
        return int(json.loads(Path(path).read_text()).get("zero_optimization", {}).get("stage", 0))
    except (ValueError, AttributeError) as e:
        raise CLIError(f"--deepspeed {path!r} is not a DeepSpeed JSON config: {e}") from e
