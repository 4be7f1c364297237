"""``python -m repro train``: one method on a local model and a data source, with :class:`repro.train.Trainer`.

Writes ``<out>/metrics.jsonl`` (one line per step), ``<out>/final/`` (weights, config, tokenizer,
``train_summary.json``) and ``<out>/run.json`` (the arguments and the arm trained). The method is built by
:func:`repro.stages.builders.build_method` with the settings of ``--profile`` resized to the target
(:func:`repro.stages.builders.scaled_profile`), exactly as the pipeline's stages build it.

:func:`build_trainer` is the one function that turns parsed arguments into a ready :class:`TrainRun`; options
that change how training runs (devices, adapters) extend it and its parser (:func:`add_parser`).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from repro.cli.common import CLIError, choice, load_tokenizer_from, model_dir, output_dir, positive_float, positive_int
from repro.cli.data import DATA_KINDS

MAX_TARGET = 1 << 20
"""Longest ``--target`` accepted (1M tokens)."""


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``train`` subcommand's arguments."""
    from repro.profiles import PROFILES
    from repro.stages.builders import CLI_METHODS

    t = sub.add_parser("train", help="train one method on a local model folder")
    t.add_argument("--model", required=True, help="local model folder (config.json + weights)")
    t.add_argument("--method", required=True, help=f"one of: {', '.join(CLI_METHODS)}")
    t.add_argument("--target", required=True, type=positive_int, help="target context window in tokens")
    t.add_argument("--data", required=True, help=f"source spec: {', '.join(DATA_KINDS)}")
    t.add_argument("--steps", type=positive_int, default=None, help="optimizer steps (default: the profile's)")
    t.add_argument("--lr", type=positive_float, default=None, help="peak learning rate (default: the profile's)")
    t.add_argument("--batch-size", type=positive_int, default=None, help="rows per step (default: the profile's)")
    t.add_argument("--seed", type=int, default=None, help="data and step seed (default: the profile's)")
    t.add_argument("--out", default=None, help="output folder (default: runs/train-<method>-<target>)")
    t.add_argument("--tokenizer", default=None, help="tokenizer folder or tokenizer.json (default: the model's)")
    t.add_argument("--rope-theta", type=positive_float, default=None,
                   help="RoPE base of the trained model (default: the method's, from the profile)")
    t.add_argument("--profile", default="tiny", help=f"settings the method starts from: {', '.join(PROFILES)}")
    t.add_argument("--base-window", type=positive_int, default=None,
                   help="the model's original window (default: the profile's, at most the target)")
    t.add_argument("--anchors", default=None,
                   help="longrecipe: JSON of anchor token ids (a list, or `analyze tokens`' anchors.json)")
    t.add_argument("--data-bytes", type=positive_int, default=2_000_000,
                   help="bytes read per built-in source of corpus:* specs (default 2,000,000)")
    t.add_argument("--checkpoint-every", type=int, default=0, help="checkpoint interval in steps (0: final only)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    return t


@dataclass
class TrainRun:
    """A run ready to start: the trainer and what the command writes after it."""

    trainer: object
    """The :class:`repro.train.Trainer`."""
    tokenizer: object
    """Saved next to the final weights."""
    out: Path
    """The output folder."""
    arm: str
    """The arm trained (``rp_skip`` for ``selfdistill``, ...)."""
    profile: object
    """The resized profile the method was built from."""


def check_args(args: argparse.Namespace) -> None:
    """Every argument check that needs no file read: a :class:`CLIError` naming the bad value."""
    from repro.cli.data import parse_data_spec
    from repro.profiles import PROFILES
    from repro.stages.builders import CLI_METHODS

    choice(args.method, tuple(CLI_METHODS), "method")
    choice(args.profile, tuple(PROFILES), "profile")
    if args.target > MAX_TARGET:
        raise CLIError(f"--target {args.target} is longer than allowed; allowed: 2 <= --target <= {MAX_TARGET}")
    if args.target < 16:
        raise CLIError(f"--target {args.target} is too short; allowed: 16 <= --target <= {MAX_TARGET}")
    if args.checkpoint_every < 0:
        raise CLIError(f"--checkpoint-every {args.checkpoint_every}; allowed: 0 (final only) or >= 1")
    if args.lr is not None and args.lr > 1:
        raise CLIError(f"--lr {args.lr}; allowed: 0 < --lr <= 1")
    if args.anchors is not None and not Path(args.anchors).is_file():
        raise CLIError(f"--anchors {args.anchors!r} does not exist; allowed: a JSON file of token ids")
    parse_data_spec(args.data)
    model_dir(args.model)


def read_anchors(path: str | None, method: str, vocab: int):
    """Anchor token ids from a JSON list or a ``{"anchors": [...]}`` object (``analyze tokens``' output)."""
    import numpy as np

    from repro.io import read_json

    if path is None:
        if method == "longrecipe":
            raise CLIError("--method longrecipe selects anchor sentences; allowed: pass --anchors FILE "
                           "(python -m repro analyze tokens writes one)")
        return None
    raw = read_json(path)
    ids = raw.get("anchors") if isinstance(raw, dict) else raw
    if not isinstance(ids, list) or not all(isinstance(i, int) and 0 <= i < vocab for i in ids):
        raise CLIError(f"--anchors {path!r}: expected a list of token ids in 0..{vocab - 1} (or {{'anchors': [...]}})")
    return np.asarray(ids, dtype=np.int64)


def run_profile(args: argparse.Namespace):
    """The ``--profile`` settings resized to the run (:func:`repro.stages.builders.scaled_profile`): the target,
    batch, steps, lr and seed of the arguments; threads left to the process; checkpoints as asked."""
    from repro.profiles import get_profile
    from repro.stages.builders import scaled_profile

    try:
        return scaled_profile(get_profile(args.profile), args.target, base_window=args.base_window,
                              batch_size=args.batch_size, steps=args.steps, lr=args.lr, seed=args.seed,
                              extend={"threads": 0, "checkpoint_every": args.checkpoint_every})
    except ValueError as e:
        raise CLIError(str(e)) from e


def build_trainer(args: argparse.Namespace) -> TrainRun:
    """Parsed ``train`` arguments -> a :class:`TrainRun` (model loaded, method built, nothing trained yet)."""
    from repro.cli import data as cli_data
    from repro.models import load_model
    from repro.stages.builders import CLI_METHODS, build_method, model_settings, prepare_model, train_config
    from repro.train import Trainer

    check_args(args)
    arm = CLI_METHODS[args.method]
    out = Path(args.out or f"runs/train-{args.method}-{args.target}")
    if (out / "final" / "config.json").exists():
        raise CLIError(f"--out {str(out)!r} already holds a finished run (final/); allowed: a new folder")
    tok = load_tokenizer_from(args.tokenizer or args.model, "--tokenizer" if args.tokenizer else "--model")
    p = run_profile(args)
    docs = cli_data.documents(args.data, tok, p.extend.target_window, args.data_bytes)
    if arm == "prolong":
        streams, rows = cli_data.prolong_streams(p, docs, args.data, p.extend.seed), None
    else:
        cli_data.require_length(docs, args.target, args.data)
        streams, rows = None, cli_data.corpus_rows(docs)
    anchors = read_anchors(args.anchors, args.method, len(tok))
    method = build_method(p, arm, tok, corpus_rows=rows, streams=streams, anchors=anchors)
    settings = model_settings(p, arm)
    if args.rope_theta is not None:
        settings["rope"] = {**(settings["rope"] or {"rope_type": "default"}), "rope_theta": float(args.rope_theta)}
    model = load_model(args.model, attn_implementation=p.model.attn_implementation, **settings)
    if model.config.vocab_size < len(tok):
        raise CLIError(f"--tokenizer has {len(tok)} tokens but the model's vocabulary is {model.config.vocab_size}; "
                       "allowed: the model's own tokenizer")
    prepare_model(p, method, model)
    cfg = train_config(p, arm)
    output_dir(out)
    trainer = Trainer(model, method, cfg, out, progress=not args.no_progress)
    return TrainRun(trainer, tok, out, arm, p)


def main(args: argparse.Namespace) -> int:
    """Train, save the tokenizer with the weights, print where they are."""
    from repro.io import atomic_write_json

    run = build_trainer(args)
    atomic_write_json(run.out / "run.json", {"args": vars(args), "arm": run.arm, "profile": run.profile.name,
                                             "train_config": run.trainer.cfg})
    final = run.trainer.train()
    run.tokenizer.save_pretrained(final)
    print(f"trained {args.method} ({run.arm}) for {run.trainer.step} steps -> {final}")
    return 0
