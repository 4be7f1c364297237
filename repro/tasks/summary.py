"""Summaries of evaluation results: RULER average, NIAH(M), accuracy by depth decile, mean and std over seeds.

Input everywhere: a list of result dicts with keys ``task``, ``length``,
``depth``, ``seed`` and ``score`` (in [0, 1], one per generated example).
Averages are macro: per-task means first, then the mean over tasks, as
RULER reports (Hsieh et al., 2024) and as the papers' tables use. Outputs
stay in the scores' unit (multiply by 100 for the papers' percentages).
"""

from __future__ import annotations

import math
from collections import defaultdict
from typing import TYPE_CHECKING, Callable, Iterable, Sequence

if TYPE_CHECKING:
    from repro.profiles import Profile

RULER_TASKS = ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
               "niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2")
"""RULER's 13 tasks (RoPE-perturbed self-distillation Table 2; CDT Table 9)."""
MULTIKEY = ("niah_multikey_1", "niah_multikey_2", "niah_multikey_3")


def _select(results: Iterable[dict], length: int | None) -> list[dict]:
    rows = list(results)
    if length is not None:
        rows = [r for r in rows if r["length"] == length]
    lengths = {r["length"] for r in rows}
    if len(lengths) > 1:
        raise ValueError(f"results mix lengths {sorted(lengths)}; allowed: one length (pass length=...)")
    return rows


def task_means(results: Iterable[dict], length: int | None = None) -> dict[str, float]:
    """Mean score per task."""
    acc: dict[str, list[float]] = defaultdict(list)
    for r in _select(results, length):
        acc[r["task"]].append(float(r["score"]))
    return {t: sum(v) / len(v) for t, v in sorted(acc.items())}


def _require(means: dict[str, float], tasks: Sequence[str]) -> None:
    missing = [t for t in tasks if t not in means]
    if missing:
        raise ValueError(f"no results for {', '.join(missing)}; required: {', '.join(tasks)}")


def ruler_average(results: Iterable[dict], length: int | None = None, exclude: Sequence[str] = ()) -> float:
    """Mean over RULER's 13 task means (``exclude=("vt",)`` gives LongRecipe's 12-task Qwen2 variant)."""
    bad = [t for t in exclude if t not in RULER_TASKS]
    if bad:
        raise ValueError(f"exclude={list(exclude)!r}: {bad} are not RULER tasks; allowed: {', '.join(RULER_TASKS)}")
    tasks = [t for t in RULER_TASKS if t not in exclude]
    means = task_means(results, length)
    _require(means, tasks)
    return sum(means[t] for t in tasks) / len(tasks)


def niah_m_average(results: Iterable[dict], length: int | None = None) -> float:
    """LongRecipe Appendix E NIAH(M): mean of three components, niah_multikey (mean of
    multikey_1/2/3), niah_multivalue and niah_multiquery."""
    means = task_means(results, length)
    _require(means, MULTIKEY + ("niah_multivalue", "niah_multiquery"))
    multikey = sum(means[t] for t in MULTIKEY) / len(MULTIKEY)
    return (multikey + means["niah_multivalue"] + means["niah_multiquery"]) / 3


def accuracy_by_depth_decile(results: Iterable[dict], task: str | None = None) -> list[float | None]:
    """Mean score in each depth decile [0, .1), ..., [.9, 1.0] (depth 1.0 in the last); None where empty."""
    bins: list[list[float]] = [[] for _ in range(10)]
    for r in results:
        if task is not None and r["task"] != task:
            continue
        d = float(r["depth"])
        if not 0.0 <= d <= 1.0:
            raise ValueError(f"depth={d!r} in a result; allowed: 0.0 <= depth <= 1.0")
        bins[min(int(d * 10), 9)].append(float(r["score"]))
    return [sum(b) / len(b) if b else None for b in bins]


def mean_std(results: Iterable[dict], aggregate: Callable[[list[dict]], float] = ruler_average,
             **kwargs) -> tuple[float, float, int]:
    """``aggregate`` computed per evaluation seed, then ``(mean, sample std, n_seeds)`` over seeds
    (RoPE-perturbed self-distillation Table 15); the std is 0.0 for a single seed."""
    by_seed: dict[int, list[dict]] = defaultdict(list)
    for r in results:
        by_seed[r["seed"]].append(r)
    if not by_seed:
        raise ValueError("no results; allowed: a non-empty list of result dicts")
    vals = [aggregate(rows, **kwargs) for _, rows in sorted(by_seed.items())]
    m = sum(vals) / len(vals)
    sd = math.sqrt(sum((v - m) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else 0.0
    return m, sd, len(vals)


# -- task groups of the evaluation suite (shared by repro.recipes.plans and repro.reports) --------
NIAH_M_TASKS = MULTIKEY + ("niah_multivalue", "niah_multiquery")
NIAH_TASKS = tuple(t for t in RULER_TASKS if t.startswith("niah_"))
MULTIHOP = ("multihop_2", "multihop_3", "multihop_4")
BABILONG = tuple(f"babilong_qa{k}" for k in range(1, 6))
"""BABILong's qa1-qa5 as generated here (:mod:`repro.tasks.babilong`): CD-Tab2's BABILong column."""
ORDINALS = ("first", "second", "third", "last")
POSITION_SPECS = tuple(f"niah_position:ordinal={o}" for o in ORDINALS)
DECILE_DEPTHS = tuple(round(0.05 + 0.1 * i, 2) for i in range(10))
"""Depths of the answer-position curve: the centre of each decile."""


def ruler_in_suite(p: Profile) -> tuple[str, ...]:
    """The RULER tasks of the profile's evaluation suite (``eval.suite_tasks``), in suite order."""
    return tuple(t for t in p.eval.suite_tasks if t in RULER_TASKS)


def task_accuracy(results: Sequence[dict]) -> dict[str, tuple[float, int]]:
    """Per task spec: (mean score, number of prompts)."""
    by: dict[str, list[float]] = {}
    for r in results:
        by.setdefault(r["task"], []).append(float(r["score"]))
    return {t: (sum(v) / len(v), len(v)) for t, v in by.items()}


# -- the summary of an evaluation folder (``summary.json`` / ``summary.md`` of ``python -m repro evaluate``) ----
def summarize(rows: list[dict]) -> list[dict]:
    """Accuracy (mean score), its standard error ``std / sqrt(n)`` (population std) and ``n`` per (task, length),
    in the rows' order; rows are prediction rows (``task``, ``target_length``, ``score``; the length may be None)."""
    cells: dict[tuple[str, int], list[float]] = {}
    for r in rows:
        cells.setdefault((r["task"], r["target_length"]), []).append(r["score"])
    out = []
    for (task, length), scores in cells.items():
        n = len(scores)
        mean = sum(scores) / n
        sd = math.sqrt(sum((s - mean) ** 2 for s in scores) / n)
        out.append({"task": task, "length": length, "n": n, "accuracy": mean, "se": sd / math.sqrt(n)})
    return out


def markdown(cells: list[dict], lengths: Sequence[int | None]) -> str:
    """A task x length table of ``accuracy ± se`` in percent (a length of None: tasks without one, headed ``-``)."""
    by = {(c["task"], c["length"]): c for c in cells}
    tasks = list(dict.fromkeys(c["task"] for c in cells))
    lines = ["| task | " + " | ".join("-" if n is None else str(n) for n in lengths) + " |",
             "|---|" + "---:|" * len(lengths)]
    for t in tasks:
        vals = [f"{100 * by[t, n]['accuracy']:.1f} ± {100 * by[t, n]['se']:.1f}" if (t, n) in by else "n/a"
                for n in lengths]
        lines.append(f"| {t} | " + " | ".join(vals) + " |")
    return "\n".join(lines) + "\n"
