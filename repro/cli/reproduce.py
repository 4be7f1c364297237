"""``python -m repro reproduce``: every figure and table by running the notebooks (:func:`repro.pipeline.reproduce`),
or with ``--dry-run`` a check of the profile without training (:mod:`repro.cli.dry_run`)."""

from __future__ import annotations

import argparse
import time

from repro.cli.common import CLIError, choice, device_args
from repro.papers import ALL, PAPERS
from repro.pipeline import check_output_folder, reproduce
from repro.profiles import PROFILES, get_profile


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``reproduce`` subcommand's arguments."""
    r = sub.add_parser("reproduce", help="regenerate figures and tables by running the notebooks")
    r.add_argument("--profile", default="tiny", help=f"one of: {', '.join(PROFILES)} (default tiny)")
    r.add_argument("--paper", default=ALL, help=f"only the stages and tables of one paper: {', '.join(PAPERS)} "
                   f"(default {ALL}; the shared testbed is built for every paper)")
    r.add_argument("--only", default=None, help="run just this notebook (by file stem)")
    r.add_argument("--force", action="store_true", help="recompute cached stages and notebooks")
    r.add_argument("--run-dir", default="runs", help="where checkpoints, results and executed notebooks go")
    r.add_argument("--figures-dir", default=None, help="default: figures/ (tiny) or figures/<profile>/")
    r.add_argument("--dry-run", action="store_true",
                   help="check configs, data sources, accelerator configs and one step per method; train nothing")
    r.add_argument("--methods", default=None,
                   help="--dry-run: comma-separated methods to step (default: all of them)")
    r.add_argument("--no-engine", action="store_true",
                   help="--dry-run: skip the step through the profile's DeepSpeed config (a process of its own)")
    r.add_argument("--device", default="", help="where the stages train and evaluate: auto, cpu, cuda or cuda:N "
                   "(default: the profile's run.device; paper: cuda, the others auto)")
    r.add_argument("--dtype", default="", help="evaluation and analysis weights: auto, float32 or bfloat16 "
                   "(default: the profile's run.dtype; paper: bfloat16)")
    return r


def main(args: argparse.Namespace) -> int:
    """Run the notebooks (or the dry run) and print each one's status."""
    choice(args.profile, tuple(PROFILES), "profile")
    try:
        for flag, folder in (("--run-dir", args.run_dir), ("--figures-dir", args.figures_dir)):
            check_output_folder(flag, folder)
    except ValueError as e:
        raise CLIError(str(e)) from e
    if args.device or args.dtype:
        device_args(argparse.Namespace(device=args.device or "auto", dtype=args.dtype or "auto"))
    if args.dry_run:  # checks the profile on any machine, the paper's on a CPU too
        from repro.cli.dry_run import dry_run  # loads torch, the models and the trainer: only --dry-run needs them

        return dry_run(args.profile, methods=args.methods.split(",") if args.methods else None,
                       engine=not args.no_engine)
    check_runs_here(args.profile, args.device, args.dtype)  # before any notebook starts or folder is made
    t0 = time.perf_counter()
    try:
        status = reproduce(args.profile, only=args.only, force=args.force, run_dir=args.run_dir,
                           figures_dir=args.figures_dir, paper=args.paper, device=args.device, dtype=args.dtype)
    except ValueError as e:
        raise CLIError(str(e)) from e
    total = time.perf_counter() - t0
    for name, s in status.items():
        print(f"  {name:<16} {s['status']:<7} {s['seconds']:8.1f} s")
    print(f"reproduce --profile {args.profile} --paper {args.paper}: {total:.1f} s")
    return 0


def missing_here(profile) -> list[str]:
    """What ``profile`` needs that this machine lacks: a CUDA GPU for its ``run.device`` (``cuda``/``cuda:N``) or its
    ``attn_implementation='flash_attention_2'``, and the flash-attn package for the latter
    (:func:`repro.accel.flash_attn_available`, as E80's check in :mod:`repro.attention.doc_masked`). Empty: it can
    run here."""
    import torch  # torch: only this check needs it, and reproduce's start-up stays light without it

    from repro import accel  # accel: guarded GPU helpers, loaded with torch for this check only

    gpu = torch.cuda.is_available()
    flash = profile.model.attn_implementation == "flash_attention_2"
    needs = []
    why = ([f"run.device={profile.run.device!r}"] if profile.run.device.startswith("cuda") else []) + \
        (["attn_implementation='flash_attention_2'"] if flash else [])
    if not gpu and why:
        needs.append(f"a CUDA GPU (for {' and '.join(why)}; this machine has none)")
    if flash and not accel.flash_attn_available():
        needs.append("the flash-attn package (pip install -r requirements-gpu.txt --no-build-isolation on a GPU "
                     "machine)")
    return needs


def check_runs_here(name: str, device: str = "", dtype: str = "") -> None:
    """A :class:`CLIError` before any work when profile ``name`` (with ``--device`` / ``--dtype``) cannot run on
    this machine (:func:`missing_here`), naming what it needs and the profiles that run here (and ``--dry-run``,
    which checks any profile without training)."""
    try:
        needs = missing_here(get_profile(name, device, dtype))
    except ValueError as e:
        raise CLIError(str(e)) from e
    if needs:
        here = [p for p in PROFILES if p != name and not missing_here(get_profile(p))]
        raise CLIError(f"--profile {name} needs {' and '.join(needs)}; allowed here: --profile "
                       f"{'|'.join(here) or '(none)'}, or reproduce --profile {name} --dry-run (checks the profile "
                       "without training)")
