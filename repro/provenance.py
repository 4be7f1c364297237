"""Which code and which run wrote a figure: the commit of the checkout and the id of one ``reproduce`` run.

``python -m repro reproduce`` makes one run id (:func:`new_run_id`) and puts it, with the commit, in the
environment of every notebook it runs (:data:`RUN_ENV`, :data:`COMMIT_ENV`); each :class:`repro.figures.Recorder`
writes both into every row of ``figures/index.json`` and ``INDEX.md``. A figure written outside ``reproduce`` (a
notebook run by hand, a benchmark) gets the run ``interactive``. A notebook ``reproduce`` finds cached is not run
again, so its rows keep the run that wrote them: rows from one run all say the same run id.
"""

from __future__ import annotations

import datetime as _dt
import os
import subprocess
import uuid
from pathlib import Path

RUN_ENV, COMMIT_ENV = "REPRO_RUN_ID", "REPRO_COMMIT"
"""The environment variables ``reproduce`` sets for the notebooks it runs."""
INTERACTIVE = "interactive"
"""The run of a figure written outside ``reproduce``."""
SEPARATE: dict[str, str] = {
    "TB-BaseSearch": "python -m repro base-search",
    "TB-Throughput": "python -m repro bench",
    "TB-GPU": "python -m repro bench gpu",
    "TB-TimedArms": "python -m repro bench costs",
}
"""Target id -> the command of its own that writes it (not ``reproduce``): its row keeps that command's run."""
OUTPUTS = ("figures", "runs")
"""Folders a run writes into: changes there do not make the checkout's code dirty."""


def new_run_id() -> str:
    """A fresh run id: the UTC time to the second and six random hex digits (``20261126T190512Z-3fa9c1``)."""
    now = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")
    return f"{now}-{uuid.uuid4().hex[:6]}"


def code_commit(repo: str | os.PathLike | None = None) -> str:
    """The checkout's commit (12 hex digits), ``+dirty`` when tracked code outside :data:`OUTPUTS` has
    uncommitted changes; ``unknown`` outside a git checkout (an installed package, a copied tree)."""
    root = Path(repo) if repo is not None else Path(__file__).resolve().parent.parent

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        head = git("rev-parse", "--short=12", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                      *(f":(exclude){o}" for o in OUTPUTS))
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty" if changed else "")


def current_run() -> str:
    """The run id ``reproduce`` gave this process (:data:`RUN_ENV`), else :data:`INTERACTIVE`."""
    return os.environ.get(RUN_ENV) or INTERACTIVE


def current_commit() -> str:
    """The commit ``reproduce`` recorded for this run (:data:`COMMIT_ENV`), else :func:`code_commit`."""
    return os.environ.get(COMMIT_ENV) or code_commit()
