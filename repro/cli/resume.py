"""A resumed ``train`` is the same run: the arguments that define a run are compared with the ``run.json`` of the
``--out`` it resumes, before anything there is touched (:func:`same_run`), and a run that stops on a non-finite
loss or a full disk is reported in one line, leaving nothing behind when nothing was trained
(:func:`stopped_error`). :func:`check_start` is what ``train`` calls first: ``--out`` outside ``--data``, a
``--base-window`` within the ``--target``, then :func:`same_run`.

A run is resumed when its ``--out`` holds a ``run.json`` and something of that run to go on from: a complete
checkpoint (``ckpt-<step>/``), or final weights still waiting for their tokenizer. Every argument defines the run
except those of :data:`NOT_DEFINING` (where and how it runs, not what it computes); a difference is one
:class:`repro.cli.common.CLIError` naming each field with its old and new value and the two ways on: a new
``--out`` (a new run), or ``--resume-with-changes FIELD,...`` for the fields of :data:`CHANGEABLE`, recorded in
``run.json``'s ``args.resume_history`` (the step each change took effect at, the old and new values).
"""

from __future__ import annotations

import argparse
import contextlib
import json
from pathlib import Path

from safetensors import SafetensorError, safe_open

from repro.cli.common import CLIError, RankAgreedError, check_out_outside_data, launched_rank
from repro.cli.own_settings import base_window_of, chosen_profile
from repro.io import DiskFull, is_disk_full, read_json
from repro.parallel.heads import check_model_heads
from repro.profiles import get_profile, scaled_profile

NOT_DEFINING: frozenset[str] = frozenset({
    "cmd", "out", "no_progress", "checkpoint_every", "device", "deepspeed", "sequence_parallel",
    "trust_remote_code", "gradient_checkpointing", "resume_with_changes", "resume_history"})
"""Arguments that say where and how a run computes (devices, engines, progress, checkpoint interval), not what: a
resume may change them freely. Every other argument (a flag added later included) defines the run."""
CHANGEABLE: tuple[str, ...] = ("steps", "lr", "batch_size", "seed", "data", "data_bytes", "dtype", "model",
                               "tokenizer")
"""Arguments ``--resume-with-changes`` may name: the run goes on from its checkpoint with the new value. The method,
target, profile, RoPE and adapter settings are never changed inside a run (the checkpoint's method state and
weights belong to them)."""


def flag(field: str) -> str:
    """``batch_size`` -> ``--batch-size``."""
    return "--" + field.replace("_", "-")


def field_of(name: str) -> str:
    """``--batch-size`` / ``batch-size`` / ``batch_size`` -> ``batch_size``."""
    return name.strip().lstrip("-").replace("-", "_")


def plain(value: object) -> object:
    """``value`` as ``run.json`` holds it (a JSON round trip)."""
    return json.loads(json.dumps(value, default=str))


def short(value: object, limit: int = 80) -> str:
    """``repr`` of ``value``, cut to ``limit`` characters."""
    text = repr(value)
    return text if len(text) <= limit else text[:limit - 3] + "..."


def resumable(out: Path) -> tuple[Path | None, bool]:
    """``(latest checkpoint or None, final weights without their tokenizer)`` of the run in ``out``."""
    from repro.train.checkpoints import latest_checkpoint  # repro.train imports transformers: see repro.cli.common

    final = out / "final"
    waiting = (final / "config.json").exists() and not (final / "tokenizer_config.json").exists()
    return (latest_checkpoint(out) if out.is_dir() else None), waiting


def allowed_changes(text: str | None) -> set[str]:
    """The fields ``--resume-with-changes`` names (a :class:`CLIError` for one it may not name)."""
    if not text:
        return set()
    names = {field_of(t) for t in text.split(",") if t.strip()}
    bad = sorted(n for n in names if n not in CHANGEABLE)
    if bad:
        raise CLIError(f"--resume-with-changes {text!r}: {', '.join(flag(b) for b in bad)} cannot change inside a "
                       f"run; allowed: {', '.join(flag(c) for c in CHANGEABLE)} (a new --out for anything else)")
    return names


def check_start(args: argparse.Namespace, out: Path) -> None:
    """What ``train`` checks of its output folder before anything else (reads only): ``--out`` outside the
    ``--data`` folder, a ``--base-window`` that fits the ``--target`` it records, and a resume of the same run
    (:func:`same_run`)."""
    try:
        check_out_outside_data(out, getattr(args, "data", None))
        base, target = getattr(args, "base_window", None), getattr(args, "target", None)
        if base is not None and target is not None and base > target:
            raise CLIError(f"--base-window {base} is above --target {target}; allowed: --base-window <= --target (the "
                           "model's original window is shorter than the one it is extended to)")
        check_heads_split(args)
        same_run(args, out)
    except RankAgreedError:
        raise
    except CLIError as e:  # from the arguments and files alone: every rank of a launched run raises it alike
        raise RankAgreedError(str(e)) from e


def check_heads_split(args: argparse.Namespace) -> None:
    """``--sequence-parallel N`` must divide the query heads of ``--model`` (Ulysses splits them over the ranks of a
    row): :func:`repro.parallel.heads.check_model_heads`, from its config.json before any process group or model
    exists, naming the head counts and the degrees that work."""
    check_model_heads(args.model, getattr(args, "sequence_parallel", None) or 1, CLIError)


def same_run(args: argparse.Namespace, out: Path) -> None:
    """Refuse (:class:`CLIError`) a ``train`` that would resume the run in ``out`` with other run-defining arguments
    than its ``run.json`` records, unless ``--resume-with-changes`` names every changed field; refuse ``--steps``
    below the checkpoint's step and a ``--model`` whose tensors do not fit the checkpoint. Reads only. An accepted
    change is added to ``args.resume_history`` (so ``run.json`` keeps it)."""
    may_change = allowed_changes(getattr(args, "resume_with_changes", None))
    ckpt, waiting = resumable(out)
    if (ckpt is None and not waiting) or not (out / "run.json").is_file():
        return  # nothing to resume: the run starts again from step 0 with these arguments
    try:
        old = read_json(out / "run.json")["args"]
        if not isinstance(old, dict):
            raise TypeError(f"its 'args' is a JSON {type(old).__name__}")
        step = int(read_json(ckpt / "state.json")["step"]) if ckpt is not None else None
    except (OSError, ValueError, KeyError, TypeError, RecursionError) as e:
        raise CLIError(f"--out {str(out)!r} holds a run whose run.json or checkpoint state does not read "
                       f"({type(e).__name__}: {short(str(e))}); allowed: a new --out") from e
    new = {k: plain(v) for k, v in vars(args).items()}
    changed = {k: (old[k], new[k]) for k in sorted(new) if k in old and k not in NOT_DEFINING and old[k] != new[k]}
    where = f"checkpoint {ckpt.name}, step {step}" if ckpt is not None else "final weights without their tokenizer"
    refused = {k: v for k, v in changed.items() if k not in may_change}
    if refused:
        each = "; ".join(f"{flag(k)} {short(a)} -> {short(b)}" for k, (a, b) in refused.items())
        fields = ",".join(k.replace("_", "-") for k in changed)
        can = all(k in CHANGEABLE for k in changed)
        raise CLIError(f"--out {str(out)!r} holds a run started with other arguments ({where}): {each}; allowed: "
                       f"the same arguments to resume it, a new --out for a new run"
                       + (f", or --resume-with-changes {fields} to go on from its {where.split(',')[0]} with them"
                          if can else f" ({', '.join(flag(k) for k in changed if k not in CHANGEABLE)} cannot "
                                      "change inside a run)"))
    if step is not None:
        check_steps(args, step)
        if changed.get("model"):
            check_model_fits(Path(args.model), ckpt)
    history = list(old.get("resume_history") or [])
    if changed:
        history.append({"step": step, "changed": {k: list(v) for k, v in changed.items()}})
    if history:
        args.resume_history = history


def check_steps(args: argparse.Namespace, step: int) -> None:
    """``--steps`` (or the profile's) below the checkpoint's ``step``: a :class:`CLIError`."""
    steps = args.steps
    if steps is None:  # the profile's, resized to the run as train resizes it
        try:
            name = chosen_profile(args)[0]  # --profile, or the default train picks for the model
            steps = scaled_profile(get_profile(name), args.target, base_window=base_window_of(args, name),
                                   batch_size=args.batch_size, lr=args.lr, seed=args.seed).extend.steps
        except ValueError:
            return  # a bad profile or size: the train command's own checks name it
    if steps < step:
        raise CLIError(f"--steps {steps} is below the step {step} of the run's checkpoint; allowed: --steps >= {step} "
                       "(with --resume-with-changes steps), or a new --out")


def tensor_shapes(files: list[Path]) -> dict[str, tuple[int, ...]]:
    """Name -> shape of every tensor in the safetensors ``files`` (their headers only)."""
    shapes = {}
    for f in files:
        try:
            with safe_open(str(f), "pt") as st:
                shapes.update({k: tuple(st.get_slice(k).get_shape()) for k in st.keys()})
        except (OSError, SafetensorError) as e:
            raise CLIError(f"cannot read {str(f)!r} ({type(e).__name__}: {short(str(e))}); allowed: complete "
                           "safetensors files") from e
    return shapes


def check_model_fits(model: Path, ckpt: Path) -> None:
    """A :class:`CLIError` when a tensor of ``ckpt`` has another shape in ``model`` (e.g. another width): the
    checkpoint's weights would not load into it."""
    theirs = tensor_shapes(sorted(model.glob("*.safetensors")))
    ours = tensor_shapes([ckpt / "model.safetensors"])
    bad = [f"{k} {ours[k]} vs {theirs[k]}" for k in ours if k in theirs and ours[k] != theirs[k]]
    if bad:
        raise CLIError(f"--model {str(model)!r} does not fit the run's {ckpt.name}: {len(bad)} tensor(s) of another "
                       f"shape (checkpoint vs model), first {bad[0]}; allowed: a model of the checkpoint's "
                       "architecture and sizes, or a new --out")


def stopping_errors() -> tuple[type[Exception], ...]:
    """What stops a started run without being a bug: ``train`` reports each in one line (:func:`stopped_error`)."""
    from repro.train.failures import NonFiniteLoss  # repro.train imports transformers: see repro.cli.common

    return NonFiniteLoss, DiskFull, SafetensorError


def stopped_error(error: Exception, out: Path) -> CLIError:
    """The one-line :class:`CLIError` of a run stopped by ``error``: a :class:`NonFiniteLoss`, a
    :class:`repro.io.DiskFull`, or a safetensors error while a checkpoint was written or read (one that says the disk
    is full, :func:`repro.io.is_disk_full`, is reported as the :class:`repro.io.DiskFull` of ``out``: the
    checkpoints already written are intact and the same command resumes from them).

    When the run kept nothing (no checkpoint, no ``final/``) its ``run.json`` and ``metrics.jsonl`` are removed, and
    ``out`` when that leaves it empty (rank 0 of a launched run), so no run that never kept a step is left to resume.

    A :class:`NonFiniteLoss` is a :class:`RankAgreedError`: the loss and gradient norm it checks are global (averaged
    over every process before the check), so every rank of a launched run stops alike at the same step and rank 0
    alone prints the line. A full disk stays a plain :class:`CLIError`: it is met by the process that writes (rank 0
    for the weights, every rank for its engine state), which prints it."""
    from repro.train.failures import NonFiniteLoss  # repro.train imports transformers: see repro.cli.common

    if isinstance(error, (NonFiniteLoss, DiskFull)) or is_disk_full(error):
        forget_untrained(out)
    if isinstance(error, NonFiniteLoss):
        return RankAgreedError(" ".join(str(error).split()))
    if not isinstance(error, DiskFull) and is_disk_full(error):  # safetensors says so in its own words
        error = DiskFull(out, error)
    if isinstance(error, DiskFull):
        return CLIError(f"{' '.join(str(error).split())} (the same command then resumes from the last complete "
                        "checkpoint)")
    if isinstance(error, SafetensorError):
        text = " ".join(str(error).split())
        return CLIError(f"a checkpoint of {str(out)!r} could not be written or read (safetensors: {short(text, 200)}); "
                        "allowed: a complete checkpoint (re-run the command to resume from the last complete one)")
    return CLIError(" ".join(str(error).split()))


def forget_untrained(out: Path) -> None:
    """Remove ``run.json`` and ``metrics.jsonl`` of a run in ``out`` that kept nothing (no checkpoint, no
    ``final/``), and ``out`` when that leaves it empty; rank 0 of a launched run alone (the others write nothing)."""
    from repro.train.checkpoints import latest_checkpoint  # repro.train imports transformers: see repro.cli.common

    if launched_rank() != 0 or not out.is_dir() or latest_checkpoint(out) is not None or (out / "final").exists():
        return
    with contextlib.suppress(OSError):
        for name in ("run.json", "metrics.jsonl"):
            (out / name).unlink(missing_ok=True)
        if not any(out.iterdir()):
            out.rmdir()
