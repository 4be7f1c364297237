"""Shared pieces of every paper's tables: the :class:`Report`, reading result records (:class:`Scores`),
percent formatting, the scale note, the verdicts (:func:`count_verdict`, :func:`order_verdict`,
:func:`combine_verdicts`, :func:`direction_agrees`: gaps within noise are ties, :data:`TIE`) and short task
labels (standard errors: :mod:`repro.reports.noise`).

A cell too short for its task reads ``n/a (min length X)``, never 0 (:meth:`Scores.why`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from typing import Any, Mapping, Protocol, Sequence

from repro.profiles import Profile
from repro.stats import Z, gap_verdict
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
    """``yes`` / ``no`` / ``partly`` / ``tie within noise`` / ``n/a``, computed from the numbers."""
    note: str = ""
    """How ``agrees`` was decided, and caveats."""
    claims: tuple[dict, ...] = ()
    """Each claim of the declared headline as it was tested (:attr:`repro.reports.headline.Judgement.claims`): what
    ``agrees`` was decided from, stored in index.json so the verdict can be checked against it."""


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

    def lengths(self) -> set[int]:
        """The lengths that have scored rows."""
        return {int(r["length"]) for r in self.rows}

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


def model_note(p: Profile) -> str:
    """The model and windows of our numbers (``scale_note`` without the evaluation grid), for tables whose own
    caption says how many prompts they rest on."""
    if p.model.pretrained:
        model = p.model.pretrained
    else:
        m = p.model
        model = f"tiny {m.num_layers}-layer d={m.hidden_size} Llama trained here"
    return f"{p.name}: {model}, window {p.base.window} -> {p.extend.target_window}"


def scale_note(p: Profile, samples: int | None = None) -> str:
    """The scale of our numbers, printed beside the paper's. ``samples``: prompts per cell of the table's grid
    (default ``eval.suite_samples``, the suite's; LongRecipe's grid passes ``longrecipe.eval_samples``)."""
    ev = p.eval
    samples = ev.suite_samples if samples is None else samples
    return f"{model_note(p)}; synthetic tasks, {samples} samples x {len(ev.suite_depths)} depths per cell"


# -- agreement -----------------------------------------------------------------------------------
TIE = "tie within noise"
"""The verdict when every gap a verdict rests on is within noise (neither agreement nor disagreement)."""


class Noise(Protocol):
    """What the verdicts need of a noise estimate (:class:`repro.reports.noise.GapTest`)."""

    z: float

    def se(self, a: str, b: str) -> float | None:
        """Standard error of ``ours[a] - ours[b]`` in their unit, None when there is no estimate."""

    def method(self) -> str:
        """How the standard error is computed, for the notes."""


def count_verdict(ok: int, total: int) -> str:
    """``yes`` when all ``total`` checks hold, ``no`` when none does, ``partly`` otherwise (``n/a``: none made)."""
    return "n/a" if not total else "yes" if ok == total else "no" if ok == 0 else "partly"


def order_verdict(ok: int, bad: int, ties: int) -> str:
    """:func:`count_verdict` over the significant checks (``ok`` hold, ``bad`` fail); :data:`TIE` when every
    check made is a tie within noise, ``n/a`` when none is made."""
    return count_verdict(ok, ok + bad) if ok + bad else TIE if ties else "n/a"


def combine_verdicts(*verdicts: str) -> str:
    """One verdict from several: ``n/a`` and ties are left out unless nothing else is there."""
    known = [v for v in verdicts if v not in ("n/a", TIE)]
    if not known:
        return TIE if TIE in verdicts else "n/a"
    return known[0] if len(set(known)) == 1 and known[0] in ("yes", "no") else "partly"


def compare(gap: float, se: float | None, z: float = Z) -> tuple[str, bool]:
    """``higher`` / ``lower`` / ``tie`` of a gap (:func:`repro.stats.gap_verdict`) and whether it was tested;
    without a standard error the gap is taken as it is (any nonzero gap counts)."""
    if se is None:
        return ("higher" if gap > 0 else "lower" if gap < 0 else "tie"), False
    return gap_verdict(gap, se, z), True


def significance(n_sig: int, n: int, noise: Noise | None, untested: int = 0) -> str:
    """``"3/6 gaps significant (paired bootstrap over prompts, 2 SE; ...)"``."""
    how = noise.method() if noise is not None else "no noise estimate: gaps taken as they are"
    if untested and noise is not None:
        how += f"; {untested} gap(s) without a noise estimate (fewer than 2 prompts per cell) taken as they are"
    return f"{n_sig}/{n} gaps significant ({how})"


def direction_agrees(ours: Mapping[str, float | None], paper: Mapping[str, float | None],
                     fallback: tuple[str, str] = PAPER_VS_BASELINE, noise: Noise | None = None) -> tuple[str, str]:
    """Does the order of our checkpoints match the paper's? ``(verdict, how)``.

    A pair counts as ordered only when its gap exceeds ``noise.z`` standard errors (``noise.se(a, b)``:
    the paired test of :class:`repro.reports.noise.GapTest`, widened by the training-seed spread where
    measured); pairs within noise are ties, neither agreement nor disagreement. With two or more
    checkpoints that have a paper number: ``yes`` when every significant pair is ordered as in the paper,
    ``no`` when none is, ``partly`` otherwise, :data:`TIE` when every pair ties; ``how`` says how many gaps
    are significant. With fewer: ``fallback = (hi, lo)`` checks ours[hi] > ours[lo] (the extended model
    beats the base at the target, implicit in every paper). Without ``noise`` (or where it has no
    estimate for a pair) gaps are taken as they are, and ``how`` says so.
    """
    common = [n for n in paper if paper[n] is not None and ours.get(n) is not None]
    pairs = [(a, b) for a, b in combinations(common, 2) if paper[a] != paper[b]]
    z = noise.z if noise is not None else Z
    if pairs:
        res = [(a, b, *compare(ours[a] - ours[b], noise.se(a, b) if noise else None, z)) for a, b in pairs]
        sig = [(a, b, o) for a, b, o, _ in res if o != "tie"]
        note = significance(len(sig), len(pairs), noise, sum(not tested for *_, tested in res))
        if not sig:
            return TIE, f"every pair of {', '.join(common)} is tied within noise; {note}"
        ok = sum((o == "higher") == (paper[a] > paper[b]) for a, b, o in sig)
        ties = len(pairs) - len(sig)
        tie_note = f"; {ties} pair(s) tied within noise" if ties else ""
        return count_verdict(ok, len(sig)), (f"order of {', '.join(common)} as in the paper on {ok}/{len(sig)} "
                                             f"significant pairs{tie_note}; {note}")
    hi, lo = fallback
    if ours.get(hi) is None or ours.get(lo) is None:
        return "n/a", f"needs {hi} and {lo} (or two checkpoints with paper numbers)"
    o, tested = compare(ours[hi] - ours[lo], noise.se(hi, lo) if noise else None, z)
    note = significance(int(o != "tie"), 1, noise, int(not tested))
    if o == "tie":
        return TIE, f"one paper method present; {hi} and {lo} tie within noise; {note}"
    return ("yes" if o == "higher" else "no"), f"one paper method present; checked {hi} > {lo}; {note}"


# -- labels --------------------------------------------------------------------------------------
def label(task: str) -> str:
    """Short column name of a task spec (``S-1``, ``MH-2``, ``BL-qa1``, ``pos-first``)."""
    if task in SHORT:
        return SHORT[task]
    if task.startswith("multihop_"):
        return "MH-" + task.split("_")[1]
    if task.startswith("babilong_"):
        return "BL-" + task.split("_")[1]
    if task.startswith("niah_position:ordinal="):
        return "pos-" + task.split("=")[1]
    return task
