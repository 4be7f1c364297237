"""Command line: ``python -m repro {reproduce,train,evaluate,analyze,models,profiles,bench,base-search} ...``.

``reproduce [--profile tiny] [--paper NAME] [--only NAME] [--force] [--dry-run]``: every figure and table
(or, with ``--dry-run``, a check of the profile); ``train``: one method on a local model (:mod:`repro.cli.train`);
``evaluate``: the synthetic tasks; ``analyze {ig,attention-distance,tokens}``: the analyses; ``models
{fetch,list}``: pretrained models by name (:mod:`repro.model_store`); ``bench``,
``base-search``, ``profiles``. Each command is a module of :mod:`repro.cli`, looked up in :data:`COMMANDS`.

Every bad argument ends the command with one ``error: ...`` line naming the value and what is allowed, and exit
status 2 (:class:`repro.cli.common.CLIError`, or argparse's own usage errors). Ctrl-C (SIGINT) ends any command
with exit status 130 and one line saying what was kept and how to go on (no traceback). In a launched run
(``torchrun``) an error every rank raises alike is printed by rank 0 only.
"""

from __future__ import annotations

import argparse
import os
import sys

import torch.distributed as dist

from repro.cli import analyze, evaluate, misc, models, reproduce, train
from repro.cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, CLIError, CommandInterrupted, speaks

COMMANDS = {"reproduce": reproduce, "train": train, "evaluate": evaluate, "analyze": analyze, "models": models,
            "profiles": misc, "bench": misc, "base-search": misc}
"""Every subcommand -> its module (``add_parser(sub)``, or ``add_parsers`` for the three small ones; ``main``)."""

INTERRUPTED = ("interrupted (Ctrl-C); files are written whole or not at all, so nothing half-written is kept: "
               "re-run the command to finish")
"""The line of a command stopped by Ctrl-C that says nothing more specific (:class:`CommandInterrupted` does)."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (each module adds its own)."""
    ap = argparse.ArgumentParser(prog="python -m repro", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    for module in dict.fromkeys(COMMANDS.values()):  # each module once, in the order of COMMANDS
        (module.add_parsers if module is misc else module.add_parser)(sub)
    return ap


def parse(parser: argparse.ArgumentParser, argv: list[str] | None) -> argparse.Namespace:
    """``parser``'s arguments of ``argv``; a command with positional ``overrides`` (``train``'s
    ``section.field=value``) takes them anywhere among its options, not only in one run."""
    args, extra = parser.parse_known_args(argv)
    if extra and (not hasattr(args, "overrides") or any(e.startswith("-") for e in extra)):
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    if extra:
        args.overrides = [*args.overrides, *extra]
    return args


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (2 for a bad argument, with one ``error:`` line on stderr; 130 for
    Ctrl-C, with one line saying what was kept)."""
    try:
        try:
            args = parse(build_parser(), argv)
        except SystemExit as e:  # argparse has printed its usage error
            return int(e.code or 0)
        models.resolve_model_args(args)  # --model smollm2-135m-instruct: its fetched folder (repro.model_store)
        return COMMANDS[args.cmd].main(args)
    except CLIError as e:
        if speaks(e):
            print(f"error: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        if speaks(e):
            print(str(e) if isinstance(e, CommandInterrupted) else INTERRUPTED, file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader of stdout left (``... | head``): nothing more to say, as other tools do
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return EXIT_BROKEN_PIPE


def _exit(code: int) -> None:
    """Leave with ``code``. A process of a launched run (``torchrun`` / ``accelerate launch``) ends its process
    group first and then leaves without the interpreter's teardown: gloo's threads, still alive after
    ``destroy_process_group``, can abort the process there (``terminate called without an active exception``)
    after every result is written."""
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    _exit(main())
