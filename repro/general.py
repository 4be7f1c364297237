"""General abilities at short context: the papers' benchmarks through lm-evaluation-harness, on any checkpoint.

LongRecipe reports MMLU, GSM8K and HumanEval before and after extension, replay and merging (Tables 1-2). They need
real models and the benchmarks' datasets, so the tiny profile uses stand-ins (:func:`repro.stages.short_lm_loss`
and NIAH at the base window); the paper profile lists the benchmarks in ``longrecipe.general_benchmarks`` and
:func:`lm_eval_scores` runs them with lm-eval's own task definitions on a checkpoint loaded the suite's way
(:mod:`repro.harness`), offline: the datasets come from local copies (``data``) or the datasets cache.

A record is the suite's summary (``cells``: accuracy, SE and ``n`` per leaf task) plus ``groups`` (each requested
benchmark's leaf tasks); :func:`benchmark_accuracy` pools a benchmark's leaves over their samples, which for MMLU is
lm-eval's own group score (weighted by size).
"""

from __future__ import annotations

import math
import os
from pathlib import Path
from typing import Any, Sequence

from repro.harness import offline
from repro.tasks.summary import summarize


def lm_eval_scores(path: str | os.PathLike, tasks: Sequence[str], samples: int | None = None, batch_size: int = 1,
                   device: str | None = None, dtype: str | None = None, data: str | os.PathLike | None = None,
                   cache: str | os.PathLike | None = None, progress: bool = True) -> dict[str, Any]:
    """Run lm-evaluation-harness's ``tasks`` on the checkpoint folder ``path`` (safetensors, ``device`` and
    ``dtype`` as :func:`repro.models.load_model` takes them), offline; ``samples``: the first documents of each
    task (None: all). Returns the record described in the module docstring."""
    if not tasks:
        raise ValueError("no benchmark tasks given; allowed: lm-eval task names such as mmlu, gsm8k, humaneval")

    offline.go_offline(cache)
    # imported after go_offline: lm-eval, datasets, nltk and transformers read its switches when first imported
    from repro.data.tokenizer import load_tokenizer
    from repro.harness.results import harness_versions
    from repro.harness.run import HarnessRun, evaluate, prepare
    from repro.harness.tasks import groups_of
    from repro.models import load_model

    tok = load_tokenizer(path)
    run = HarnessRun(tasks=tuple(tasks), samples=samples, batch_size=batch_size,
                     data=None if data is None else str(data))
    leaves, built = prepare(run, tok)
    model = load_model(path, device=device, dtype=dtype).eval()
    rows = evaluate(model, tok, run, built, progress=progress)
    return {"cells": summarize(rows), "groups": groups_of(tasks),
            "harness": {"name": "lm-eval", **harness_versions(),
                        "sources": {leaf.name: leaf.source for leaf in leaves}},
            "model": str(Path(path))}


def benchmark_accuracy(record: dict, name: str, length: int | None = None) -> tuple[float, float, int] | None:
    """``(accuracy, standard error, n)`` of benchmark ``name`` in a record of :func:`lm_eval_scores` (or a
    ``summary.json`` of ``evaluate --harness``): its leaf tasks' samples pooled (mean over all of them; SE
    ``std / sqrt(n)``, population std, from each cell's mean, SE and ``n``). None when the record lacks it."""
    leaves = (record.get("groups") or {}).get(name, [name])
    cells = [c for c in record.get("cells", []) if c["task"] in leaves and c.get("length") == length]
    n = sum(c["n"] for c in cells)
    if not n:
        return None
    mean = sum(c["n"] * c["accuracy"] for c in cells) / n
    second = sum(c["n"] * ((c["se"] * math.sqrt(c["n"])) ** 2 + c["accuracy"] ** 2) for c in cells) / n
    return mean, math.sqrt(max(second - mean ** 2, 0.0)) / math.sqrt(n), n
