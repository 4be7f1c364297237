"""General abilities at short context: the paper benchmarks through lm-evaluation-harness (GPU runs).

LongRecipe reports MMLU, GSM8K and HumanEval before and after extension,
replay and merging (Tables 1-2). They need real models and datasets from the
hub, so the tiny profile uses stand-ins (:func:`repro.stages.short_lm_loss`
and NIAH at the base window); the paper profile lists the benchmarks in
``longrecipe.general_benchmarks`` and :func:`lm_eval_scores` runs them on any
checkpoint folder with lm-evaluation-harness (``requirements-gpu.txt``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

LM_EVAL_HINT = "pip install lm-eval==0.4.13 (listed in requirements-gpu.txt; it downloads the datasets from the hub)"
UNSAFE_CODE_TASKS = ("humaneval", "mbpp")
"""Benchmarks that execute model-written code (lm-eval asks for an explicit confirmation)."""


def lm_eval_scores(path: str | Path, tasks: Sequence[str], batch_size: int | str = "auto",
                   limit: int | None = None, **kwargs: Any) -> dict[str, dict[str, Any]]:
    """Run lm-evaluation-harness's ``simple_evaluate`` on a causal-LM folder or HF id.

    Returns ``{task: {metric: value}}`` for every requested task present in the results.
    Code benchmarks (HumanEval) are run with ``confirm_run_unsafe_code=True``.
    """
    if not tasks:
        raise ValueError("no benchmark tasks given; allowed: lm-eval task names such as mmlu, gsm8k, humaneval")
    try:
        import lm_eval
    except ImportError as exc:
        raise ImportError(f"general-ability benchmarks need lm-evaluation-harness: {LM_EVAL_HINT}") from exc
    if any(t in UNSAFE_CODE_TASKS for t in tasks):
        kwargs.setdefault("confirm_run_unsafe_code", True)
    out = lm_eval.simple_evaluate(model="hf", model_args={"pretrained": str(path)}, tasks=list(tasks),
                                  batch_size=batch_size, limit=limit, **kwargs)
    results = out["results"]
    return {t: dict(results[t]) for t in tasks if t in results}
