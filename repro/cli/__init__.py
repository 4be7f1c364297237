"""The command line, one module per command; ``python -m repro <command>`` dispatches here.

- ``reproduce`` (:mod:`repro.cli.reproduce`): every figure and table through the notebooks, or ``--dry-run``
  (:mod:`repro.cli.dry_run`): every stage's config, data sources, accelerator configs and one step per method;
- ``train`` (:mod:`repro.cli.train`): one method on a local model and a data source;
- ``evaluate`` (:mod:`repro.cli.evaluate`): the synthetic tasks, RULER-style predictions and a summary;
- ``analyze`` (:mod:`repro.cli.analyze`): IG scores, attention distances, impactful tokens;
- ``profiles``, ``bench``, ``base-search`` (:mod:`repro.cli.misc`).

Every bad argument ends the command with one ``error: ...`` line naming the value and what is allowed, and exit
status 2 (:class:`repro.cli.common.CLIError`, or argparse's own usage errors). Ctrl-C (SIGINT) ends any command
with exit status 130 and one line saying what was kept and how to go on (no traceback). In a launched run
(``torchrun``) an error every rank raises alike is printed by rank 0 only.
"""

from __future__ import annotations

import argparse
import sys

from repro.cli.common import EXIT_BROKEN_PIPE, EXIT_INTERRUPTED, EXIT_USAGE, CLIError, CommandInterrupted, speaks

COMMANDS: tuple[str, ...] = ("reproduce", "train", "evaluate", "analyze", "models", "profiles", "bench",
                             "base-search")
"""Every subcommand."""


def build_parser() -> argparse.ArgumentParser:
    """The parser of every subcommand (each module adds its own with ``add_parser``)."""
    from repro.cli import analyze, evaluate, misc, models, reproduce, train

    ap = argparse.ArgumentParser(prog="python -m repro", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    reproduce.add_parser(sub)
    train.add_parser(sub)
    evaluate.add_parser(sub)
    analyze.add_parser(sub)
    models.add_parser(sub)
    misc.add_parsers(sub)
    return ap


INTERRUPTED = ("interrupted (Ctrl-C); files are written whole or not at all, so nothing half-written is kept: "
               "re-run the command to finish")
"""The line of a command stopped by Ctrl-C that says nothing more specific (:class:`CommandInterrupted` does)."""


def main(argv: list[str] | None = None) -> int:
    """Run one command; returns its exit status (2 for a bad argument, with one ``error:`` line on stderr; 130 for
    Ctrl-C, with one line saying what was kept)."""
    try:
        return _run(argv)
    except CLIError as e:
        if speaks(e):
            print(f"error: {e}", file=sys.stderr, flush=True)
        return EXIT_USAGE
    except KeyboardInterrupt as e:
        if speaks(e):
            print(str(e) if isinstance(e, CommandInterrupted) else INTERRUPTED, file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # the reader of stdout left (``... | head``): nothing more to say, as other tools do
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no second error at interpreter exit
        return EXIT_BROKEN_PIPE


def _run(argv: list[str] | None) -> int:
    """Parse ``argv`` and run its command (errors and Ctrl-C are reported by :func:`main`)."""
    from repro.cli import analyze, evaluate, misc, models, reproduce, train

    try:
        args = build_parser().parse_args(argv)
    except SystemExit as e:  # argparse has printed its usage error
        return int(e.code or 0)
    models.resolve_model_args(args)  # --model smollm2-135m-instruct: the fetched folder
    handlers = {"reproduce": reproduce.main, "train": train.main, "evaluate": evaluate.main,
                "analyze": analyze.main, "models": models.main}
    return handlers.get(args.cmd, misc.main)(args)
