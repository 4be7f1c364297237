"""Shared pieces of every paper's tables: the :class:`Report`, reading result records (:class:`Scores`),
percent formatting, the scale note, the verdicts (:func:`count_verdict`, :func:`direction_agrees`),
standard errors and short task labels.

A cell too short for its task reads ``n/a (min length X)``, never 0 (:meth:`Scores.why`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Mapping, Sequence

from repro.profiles import Profile
from repro.tasks.summary import MULTIKEY

SHORT = {"niah_single_1": "S-1", "niah_single_2": "S-2", "niah_single_3": "S-3", "niah_multikey_1": "MK-1",
         "niah_multikey_2": "MK-2", "niah_multikey_3": "MK-3", "niah_multivalue": "MV", "niah_multiquery": "MQ",
         "vt": "VT", "cwe": "CWE", "fwe": "FWE", "qa_1": "QA-1", "qa_2": "QA-2"}
"""RULER task -> the column names of RoPE-perturbed self-distillation Table 2."""
PAPER_VS_BASELINE = ("flt", "base")
"""Fallback comparison when fewer than two checkpoints have a paper number: extended vs base."""


@dataclass
class Report:
    """One target's tables plus the index entry (``ours``, ``agrees``, ``note``)."""

    target: str
    """Target id (``repro.targets``)."""
    tables: list[dict] = field(default_factory=list)
    """``{"name", "rows", "columns", "caption"}`` per table (file names must match ``[A-Za-z0-9_.-]``)."""
    ours: str = ""
    """Our headline numbers in words."""
    agrees: str = "n/a"
    """``yes`` / ``no`` / ``partly`` / ``n/a``, computed from the numbers."""
    note: str = ""
    """How ``agrees`` was decided, and caveats."""


# -- reading records -----------------------------------------------------------------------------
class Scores:
    """Mean scores of one part of one checkpoint, with the skipped cells."""

    def __init__(self, record: Mapping[str, Any] | None):
        record = record or {}
        self.rows = [r for r in record.get("results", []) if r.get("score") is not None]
        self.skipped: dict[tuple[str, int], int] = {}
        for s in record.get("skipped", []):
            k = (s["task"], s["length"])
            self.skipped[k] = max(self.skipped.get(k, 0), int(s["minimum"]))

    def mean(self, task: str, length: int, eval_seed: int | None = None) -> float | None:
        """Mean score of ``task`` at ``length`` (None when skipped or not evaluated)."""
        if (task, length) in self.skipped:
            return None
        v = [r["score"] for r in self.rows if r["task"] == task and r["length"] == length
             and (eval_seed is None or r.get("eval_seed", 0) == eval_seed)]
        return sum(v) / len(v) if v else None

    def why(self, task: str, length: int) -> str:
        """Why a cell has no number."""
        if (task, length) in self.skipped:
            return f"n/a (min length {self.skipped[(task, length)]})"
        return "n/a (not evaluated)"

    def cell(self, task: str, length: int) -> float | str:
        """Percent (one decimal), or the reason there is none."""
        m = self.mean(task, length)
        return pct(m) if m is not None else self.why(task, length)

    def average(self, tasks: Sequence[str], length: int, eval_seed: int | None = None) -> float | None:
        """Macro average over ``tasks`` (None when any is missing or ``tasks`` is empty)."""
        vals = [self.mean(t, length, eval_seed) for t in tasks]
        return sum(vals) / len(vals) if vals and None not in vals else None

    def niah_m(self, length: int) -> float | None:
        """LongRecipe's NIAH(M): mean of multikey (mean of 1/2/3), multivalue, multiquery."""
        mk = self.average(MULTIKEY, length)
        mv, mq = self.mean("niah_multivalue", length), self.mean("niah_multiquery", length)
        return None if None in (mk, mv, mq) else (mk + mv + mq) / 3


def pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 1)


def show(x: float | None, why: str = "n/a") -> float | str:
    """Percent with one decimal, or the reason there is none."""
    return pct(x) if x is not None else why


def scores_of(suite: Mapping[str, Mapping[str, Any]], name: str, part: str) -> Scores:
    """The :class:`Scores` of one part of one checkpoint of a suite (empty when absent)."""
    return Scores(suite.get(name, {}).get(part))


def missing_note(s: Scores, tasks: Sequence[str], length: int) -> str:
    """Why an average over ``tasks`` has no number: how many tasks are there, which are missing."""
    gone = [t for t in tasks if s.mean(t, length) is None]
    return f"n/a ({len(tasks) - len(gone)}/{len(tasks)} tasks; missing {', '.join(label(t) for t in gone)})"


def scale_note(p: Profile) -> str:
    """The scale of our numbers, printed beside the paper's."""
    ev = p.eval
    if p.model.pretrained:
        model = p.model.pretrained
    else:
        m = p.model
        model = f"tiny {m.num_layers}-layer d={m.hidden_size} Llama trained here"
    return (f"{p.name}: {model}, window {p.base.window} -> {p.extend.target_window}; synthetic tasks, "
            f"{ev.suite_samples} samples x {len(ev.suite_depths)} depths per cell")


# -- agreement -----------------------------------------------------------------------------------
def count_verdict(ok: int, total: int) -> str:
    """``yes`` when all ``total`` checks hold, ``no`` when none does, ``partly`` otherwise (``n/a``: none made)."""
    return "n/a" if not total else "yes" if ok == total else "no" if ok == 0 else "partly"


def direction_agrees(ours: Mapping[str, float | None], paper: Mapping[str, float | None],
                     fallback: tuple[str, str] = PAPER_VS_BASELINE) -> tuple[str, str]:
    """Does the order of our checkpoints match the paper's? ``(verdict, how)``.

    With two or more checkpoints that have a paper number: ``yes`` when every
    pair is ordered as in the paper, ``no`` when none is, ``partly`` otherwise;
    pairs tied in our run are left out (and counted in the note), ``n/a`` when all are.
    With fewer: ``fallback = (hi, lo)`` checks ours[hi] > ours[lo] (the
    extended model beats the base at the target, implicit in every paper).
    """
    common = [n for n in paper if paper[n] is not None and ours.get(n) is not None]
    pairs = [(a, b) for a, b in combinations(common, 2) if paper[a] != paper[b]]
    if pairs:
        ordered = [(a, b) for a, b in pairs if ours[a] != ours[b]]
        ties = len(pairs) - len(ordered)
        tie_note = f"; {ties} tied pair(s) left out" if ties else ""
        if not ordered:
            return "n/a", f"every pair of {', '.join(common)} is tied in our run"
        ok = sum((ours[a] - ours[b]) * (paper[a] - paper[b]) > 0 for a, b in ordered)
        return count_verdict(ok, len(ordered)), (f"order of {', '.join(common)} as in the paper "
                                                 f"on {ok}/{len(ordered)} pairs{tie_note}")
    hi, lo = fallback
    if ours.get(hi) is None or ours.get(lo) is None:
        return "n/a", f"needs {hi} and {lo} (or two checkpoints with paper numbers)"
    if ours[hi] == ours[lo]:
        return "n/a", f"one paper method present; {hi} and {lo} are tied"
    return ("yes" if ours[hi] > ours[lo] else "no"), f"one paper method present; checked {hi} > {lo}"


# -- noise ---------------------------------------------------------------------------------------
def standard_error(suite, name: str, tasks: Sequence[str], length: int, part: str = "ruler") -> float | None:
    """Binomial standard error (percent points) of the mean score over ``tasks`` at ``length``."""
    rows = [r for r in (suite.get(name, {}).get(part) or {}).get("results", [])
            if r["task"] in tasks and r["length"] == length]
    if not rows:
        return None
    m = sum(r["score"] for r in rows) / len(rows)
    return round(100.0 * (m * (1 - m) / len(rows)) ** 0.5, 1)


def noise_note(ours: Mapping[str, float | None], suite, tasks: Sequence[str], length: int,
               part: str = "ruler") -> str:
    """How many of the gaps between checkpoints (``ours``, percent of the mean over ``tasks`` at ``length``)
    exceed twice their combined standard error (:func:`standard_error`); ``""`` with fewer than two."""
    names = [n for n, v in ours.items() if v is not None]
    se = {n: standard_error(suite, n, tasks, length, part) or 0.0 for n in names}
    pairs = [(a, b) for i, a in enumerate(names) for b in names[i + 1:]]
    if not pairs:
        return ""
    big = sum(abs(ours[a] - ours[b]) > 2 * (se[a] ** 2 + se[b] ** 2) ** 0.5 for a, b in pairs)
    return f" ({big}/{len(pairs)} gaps exceed 2 standard errors)"


# -- labels --------------------------------------------------------------------------------------
def label(task: str) -> str:
    """Short column name of a task spec (``S-1``, ``MH-2``, ``pos-first``)."""
    if task in SHORT:
        return SHORT[task]
    if task.startswith("multihop_"):
        return "MH-" + task.split("_")[1]
    if task.startswith("niah_position:ordinal="):
        return "pos-" + task.split("=")[1]
    return task
