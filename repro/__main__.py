"""Command line: ``python -m repro {reproduce,train,evaluate,analyze,profiles,bench,base-search} ...``.

``reproduce [--profile tiny] [--paper NAME] [--only NAME] [--force] [--dry-run]``: every figure and table
(or, with ``--dry-run``, a check of the profile); ``train``: one method on a local model; ``evaluate``: the
synthetic tasks; ``analyze {ig,attention-distance,tokens}``: the analyses; ``bench``, ``base-search``,
``profiles``. Each command is a module of :mod:`repro.cli`.
"""

from __future__ import annotations

import sys

from repro.cli import main

__all__ = ["main"]

if __name__ == "__main__":
    sys.exit(main())
