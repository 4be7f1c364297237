"""Command line: ``python -m repro {reproduce,train,evaluate,analyze,profiles,bench,base-search} ...``.

``reproduce [--profile tiny] [--paper NAME] [--only NAME] [--force] [--dry-run]``: every figure and table
(or, with ``--dry-run``, a check of the profile); ``train``: one method on a local model; ``evaluate``: the
synthetic tasks; ``analyze {ig,attention-distance,tokens}``: the analyses; ``bench``, ``base-search``,
``profiles``. Each command is a module of :mod:`repro.cli`.
"""

from __future__ import annotations

import os
import sys

from repro.cli import main

__all__ = ["main"]


def _exit(code: int) -> None:
    """Leave with ``code``. A process of a launched run (``torchrun`` / ``accelerate launch``) ends its process
    group first and then leaves without the interpreter's teardown: gloo's threads, still alive after
    ``destroy_process_group``, can abort the process there (``terminate called without an active exception``)
    after every result is written."""
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    sys.exit(code)


if __name__ == "__main__":
    _exit(main())
