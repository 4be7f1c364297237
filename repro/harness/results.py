"""lm-evaluation-harness's logged samples as the suite's prediction rows (``predictions.jsonl``, ``summary.json``).

Each logged sample becomes one row of :data:`repro.cli.evaluate.PRED_FIELDS`: ``pred`` is the filtered response,
``input`` the prompt lm-eval gave the model (its ``gen_prefix`` appended, as the model continued it), ``outputs``
the target(s), ``length`` the prompt's tokens, ``target_length`` the length the sample was made for (RULER's
``max_length``, BABILong's config; ``null`` for a task with no length), and ``score`` the task's first metric (for
RULER the metric named after the sample's length, which lm-eval sets to -1 at every other length). A task with
several filters (GSM8K's strict and flexible matches) reports its first filter, the one lm-eval lists first.
"""

from __future__ import annotations

from typing import Any, Sequence


def _primary(sample: dict, metrics: Sequence[str], length: int | None) -> float:
    if length is not None and str(length) in sample:
        return float(sample[str(length)])
    for m in metrics:
        if m in sample and isinstance(sample[m], (int, float, bool)):
            return float(sample[m])
    raise ValueError(f"sample of doc {sample.get('doc_id')!r} has none of the metrics {list(metrics)}")


def _length(doc: dict) -> int | None:
    for key in ("max_length", "length"):
        if isinstance(doc.get(key), int):
            return int(doc[key])
    return None


def _prompt(sample: dict) -> str:
    """The context lm-eval gave the model: the first argument of its request (its ``gen_prefix`` already appended)."""
    args = sample.get("arguments") or [[""]]
    first = args[0] if isinstance(args, (list, tuple)) and args else args
    return str(first[0] if isinstance(first, (list, tuple)) and first else first)


def _pred(sample: dict) -> str:
    r = sample.get("filtered_resps")
    while isinstance(r, (list, tuple)) and r:
        r = r[0]
    return "" if r is None or isinstance(r, (list, tuple)) else str(r)


def rows_of(samples: dict[str, list[dict]], tokenizer, seed: int, order: Sequence[str]) -> list[dict]:
    """Prediction rows of lm-eval's logged ``samples`` (``{task: [sample]}``), tasks in ``order``."""
    rows: list[dict] = []
    for task in order:
        seen_filter = None
        for s in samples.get(task, []):
            if seen_filter is None:
                seen_filter = s.get("filter")
            if s.get("filter") != seen_filter:
                continue
            doc = s.get("doc") or {}
            length = _length(doc)
            prompt = _prompt(s)
            target = s.get("target")
            refs = [str(t) for t in target] if isinstance(target, (list, tuple)) else [str(target)]
            rows.append({"index": len(rows), "pred": _pred(s), "input": prompt, "outputs": refs, "others": {},
                         "truncation": -1, "length": len(tokenizer(prompt).input_ids), "task": task,
                         "target_length": length, "depth": None, "seed": seed,
                         "score": _primary(s, s.get("metrics") or [], length)})
    return rows


def harness_versions() -> dict[str, Any]:
    """The versions that made the numbers (lm-eval's task code is part of the result)."""
    import lm_eval  # lm-eval: optional and heavy; loads after go_offline()

    return {"lm_eval": getattr(lm_eval, "__version__", "unknown")}
