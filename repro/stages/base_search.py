"""The base-model search: train candidate base configurations and score each at its own window.

Each :class:`Candidate` is a named set of overrides of the ``tiny`` profile's ``model`` and
``base`` sections. :func:`run_candidate` trains it with the ordinary base stage (cached like
any stage), evaluates it at the base window on ``TB-Base``'s grid with fresh prompts
(evaluation seed :data:`SEARCH_EVAL_SEED`: keys from the evaluation pool, example seeds
disjoint from training and from the seed-0 prompts that ``TB-Base`` reports on, so the
pick is not scored on the prompts it was chosen on) and appends one row to a JSONL log:
configuration, parameters, steps, tokens, wall time, threads and per-task accuracy with
its standard error. ``TB-BaseSearch`` is that log as a table.
"""

from __future__ import annotations

import json
import math
import platform
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from repro.figures import Recorder
from repro.models import load_model, n_params
from repro.profiles import BASE_TASK_WEIGHTS, BASE_TRAIN_TASKS, TINY, TRAIN_TASKS, Profile
from repro.stages.base import train_base
from repro.stages.evaluation import evaluate_checkpoint
from repro.stats import bernoulli_sd
from repro.tasks.summary import task_accuracy

SEARCH_EVAL_SEED = 7
"""Evaluation seed of the search's prompts (``TB-Base`` reports on seed 0)."""


@dataclass(frozen=True)
class Candidate:
    """One base configuration of the search."""

    name: str
    """Short id (a row of ``TB-BaseSearch``)."""
    note: str
    """What this candidate changes, and why it was tried."""
    model: dict[str, Any] = field(default_factory=dict)
    """Overrides of the ``model`` section (e.g. ``{"num_layers": 4}``)."""
    base: dict[str, Any] = field(default_factory=dict)
    """Overrides of the ``base`` section (curriculum, task mix, steps, bf16)."""

    def profile(self, start: Profile = TINY) -> Profile:
        return start.override(**{k: v for k, v in (("model", self.model), ("base", self.base)) if v})


def _weights(tasks: tuple[str, ...], heavy: dict[str, float]) -> tuple[float, ...]:
    return tuple(heavy.get(t, 1.0) for t in tasks)


_V1 = {"train_tasks": TRAIN_TASKS, "task_weights": (1.0, 1.0, 3.0, 1.0, 1.0, 1.0, 1.0), "bf16": False,
       "copy_max_steps": 1500, "max_steps_per_length": 200, "final_steps": 400, "copy_fraction": 0.25,
       "lm_fraction": 0.25, "threads": 2}
"""The v1 base's curriculum, every field the search changed (each candidate is explicit, whatever the defaults)."""

_ALL = {**_V1, "train_tasks": BASE_TRAIN_TASKS,
        "task_weights": _weights(BASE_TRAIN_TASKS, {"niah_single_3": 3.0, "niah_multikey_3": 3.0})}

_FOCUS = {**_V1, "train_tasks": BASE_TRAIN_TASKS, "task_weights": BASE_TASK_WEIGHTS,
          "bf16": True, "copy_max_steps": 2500, "copy_fraction": 0.1, "lm_fraction": 0.15, "threads": 2}
"""Focused mix: goal-weighted families (:data:`repro.profiles.BASE_TASK_WEIGHTS`), fewer copy/corpus rows in
the retrieval phase (more answer tokens per step), and room for deeper models to form
the copy mechanism (4 layers needed ~1,450-1,800 steps)."""

CANDIDATES: dict[str, Candidate] = {c.name: c for c in (
    Candidate("v1", "the v1 base (2 layers x 128, 7 training families, fp32)", {"num_layers": 2, "hidden_size": 128},
              _V1),
    Candidate("l4-all", "4 layers x 128, every suite family in the mix", {"num_layers": 4}, _ALL),
    Candidate("l4-all-bf16", "as l4-all with bf16 autocast (2x faster here; does copy formation survive?)",
              {"num_layers": 4}, {**_ALL, "bf16": True}),
    Candidate("l6-all-bf16", "6 layers x 128: does depth give multi-token key matching?",
              {"num_layers": 6}, {**_ALL, "bf16": True}),
    Candidate("l4-focus", "4 layers x 128, bf16, goal-weighted mix, 2.3x the retrieval steps of l4-all-bf16 "
              "(500 per length + 800 final), fewer copy/corpus rows", {"num_layers": 4},
              {**_FOCUS, "max_steps_per_length": 500, "final_steps": 800}),
    Candidate("l3-focus", "as l4-focus with 3 layers (1.25x the tokens/s): 600 steps per length + 1000 final; "
              "the tiny profile's base", {"num_layers": 3},
              {**_FOCUS, "max_steps_per_length": 600, "final_steps": 1000}),
)}
"""Every configuration tried, in the order tried."""

CHOSEN = "l3-focus"
"""The candidate the tiny profile's defaults equal (a test holds them equal)."""


def get_candidate(name: str) -> Candidate:
    if name not in CANDIDATES:
        raise ValueError(f"unknown base candidate {name!r}; allowed: {', '.join(CANDIDATES)}")
    return CANDIDATES[name]


def score_base(p: Profile, run_dir: str | Path = "runs", seed: int = SEARCH_EVAL_SEED,
               progress: bool = True) -> dict:
    """Per-task accuracy, binomial standard error and n of profile ``p``'s base at its window, on ``TB-Base``'s
    grid drawn with evaluation seed ``seed`` (a cached evaluation record, like every evaluation)."""
    rec = evaluate_checkpoint(p, "base", p.eval.base_tasks, run_dir, progress=progress, lengths=(p.base.window,),
                              depths=p.eval.base_depths, samples=p.eval.base_samples, seeds=(seed,), record=True)
    tasks = {t: {"acc": a, "se": bernoulli_sd(a) / math.sqrt(n), "n": n}
             for t, (a, n) in task_accuracy(rec["results"]).items()}
    return {"tasks": tasks, "eval_seconds": rec["seconds"], "skipped": rec["skipped"]}


def run_candidate(name: str, run_dir: str | Path = "runs", log: str | Path | None = None, threads: int = 0,
                  progress: bool = True) -> dict:
    """Train (or reuse) candidate ``name``'s base, score it, append the row to ``log`` and return it.

    ``threads`` > 0 pins the base stage's torch threads (``base.threads``, part of its cache key: the bits
    depend on it); 0 keeps the profile's."""
    cand = get_candidate(name)
    p = cand.profile()
    if threads:
        p = p.override(base={"threads": threads})
    final = train_base(p, run_dir, progress=progress)
    summary = json.loads((final / "train_summary.json").read_text())
    metrics = [json.loads(ln) for ln in (final.parent / "metrics.jsonl").read_text().splitlines() if ln]
    scores = score_base(p, run_dir, progress=progress)
    row = {"name": name, "note": cand.note, "model": cand.model, "base": {k: v for k, v in cand.base.items()
                                                                          if k != "task_weights"},
           "layers": p.model.num_layers, "hidden": p.model.hidden_size, "params": n_params(load_model(final)),
           "bf16": p.base.bf16, "steps": summary["steps"], "tokens": sum(m["tokens"] for m in metrics),
           "train_seconds": sum(m["seconds"] for m in metrics), "copy_steps": summary["method_state"].get("copy_steps"),
           "threads": p.base.threads, "torch": torch.__version__,
           "cpu": platform.processor() or platform.machine(),
           "checkpoint": str(final), **scores}
    if log is not None:
        Path(log).parent.mkdir(parents=True, exist_ok=True)
        with open(log, "a") as f:
            f.write(json.dumps(row) + "\n")
    return row


def search_rows(log: str | Path) -> list[dict]:
    """``TB-BaseSearch``: one row per candidate run in ``log`` (the latest run of each name wins)."""
    latest: dict[str, dict] = {}
    for line in Path(log).read_text().splitlines():
        if line.strip():
            r = json.loads(line)
            latest[r["name"]] = r
    rows = []
    for r in latest.values():
        row = {"candidate": r["name"], "layers": r["layers"], "hidden": r["hidden"], "params (M)": r["params"] / 1e6,
               "bf16": r["bf16"], "steps": r["steps"], "tokens (M)": r["tokens"] / 1e6,
               "train min": r["train_seconds"] / 60, "threads": r["threads"], "copy steps": r.get("copy_steps")}
        row.update({t: round(100 * v["acc"], 1) for t, v in r["tasks"].items()})
        row["what changed"] = r["note"]
        rows.append(row)
    return rows


def search_main(names: list[str], run_dir: str, threads: int, figures_dir: str) -> int:
    """``python -m repro base-search``: list candidates, or run them and rewrite ``TB-BaseSearch``."""

    if not names:
        for c in CANDIDATES.values():
            print(f"{c.name:>14}: {c.note}")
        return 0
    bad = [n for n in names if n not in CANDIDATES]
    if bad:
        print(f"error: unknown base candidate(s) {bad}; allowed: {', '.join(CANDIDATES)}", file=sys.stderr)
        return 2
    if threads < 0:
        print(f"error: --threads={threads}; allowed: 0 (torch's default) or >= 1", file=sys.stderr)
        return 2
    log = Path(run_dir) / "tiny" / "base_search.jsonl"
    for n in names:
        row = run_candidate(n, run_dir, log, threads)
        print(n, {t: round(v["acc"], 2) for t, v in row["tasks"].items()})
    Recorder(figures_dir, "tiny").table(search_rows(log), "TB-BaseSearch", caption=(
        f"Every base configuration tried; accuracy (%) at the base window on TB-Base's grid (100 "
        f"fresh prompts per task (evaluation seed {SEARCH_EVAL_SEED}); wall time as run (other jobs may have "
        "shared the CPU: tokens are the comparable cost)."))
    return 0
