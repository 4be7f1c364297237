"""The files of an evaluation folder (``predictions.jsonl``, ``summary.json``, ``summary.md``), written the same way
by the suite's ``evaluate`` and by ``evaluate --harness lm-eval``."""

from __future__ import annotations

import json
from pathlib import Path

import repro.io  # the module: its writers are looked up at each call (tests stand in for them)
from repro.tasks.summary import markdown, summarize


def clear_summary(out: Path) -> None:
    """Remove a previous run's summary: ``summary.json`` exists only when it matches ``predictions.jsonl``."""
    for stale in ("summary.json", "summary.md"):
        (out / stale).unlink(missing_ok=True)


def write_outputs(out: Path, rows: list[dict], meta: dict, lengths, skipped: list[dict]) -> list[dict]:
    """Write ``predictions.jsonl``, then ``summary.json`` (``meta``, the cells, the skipped cells) and
    ``summary.md``, each atomically, the summary last; returns the cells."""
    cells = summarize(rows)
    lines = "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows)
    repro.io.atomic_write_text(out / "predictions.jsonl", lines)
    repro.io.atomic_write_json(out / "summary.json", {**meta, "cells": cells, "skipped": skipped})
    repro.io.atomic_write_text(out / "summary.md", markdown(cells, lengths))
    return cells
