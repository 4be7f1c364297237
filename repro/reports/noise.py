"""Is a gap between two arms of a table more than noise? Their prompts paired, a paired bootstrap over the
prompts, widened by the spread across training seeds where it was measured (formulas: :mod:`repro.stats`).

A prompt is identified by :data:`PROMPT_KEY` (task, length, depth, evaluation seed, example seed; the example
seed is the sample index shifted by the evaluation seed, :mod:`repro.evaluate`). Every arm is evaluated on
the same prompts, so two arms' scores pair up; :func:`align` refuses when they do not, naming what differs.

A :class:`GapTest` holds one headline of one part of a suite, as weights over cells (:func:`macro`,
:func:`niah_m`): its :meth:`~GapTest.se` is what :func:`repro.reports.common.direction_agrees` and the other
verdicts compare a gap with (``|gap| > Z * se`` is significant, anything less a tie within noise), and
:func:`standard_error` is one arm's evaluation standard error. An arm with
training-seed replicates (:mod:`repro.reports.seeds`) enters with its per-prompt scores averaged over them
and adds ``s^2 / k`` (its seed spread ``s`` over ``k`` seeds) to the gap's variance; single-seed arms add the
pooled spread of the multi-seed arms of the same headline (``s^2 / 1``), nothing when no arm has several seeds.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Hashable, Mapping, Sequence

import numpy as np

from repro import stats
from repro.reports.seeds import seed_groups
from repro.tasks.summary import MULTIKEY

PROMPT_KEY = ("task", "length", "depth", "eval_seed", "seed")
"""The fields of a result row that identify its prompt."""
Z = stats.Z
"""Significant: more than ``Z`` standard errors."""


class PromptMismatch(ValueError):
    """Two arms (or two replicates of one) were not evaluated on the same prompts."""


def prompt_key(row: Mapping[str, Any]) -> tuple:
    """The prompt of a result row (a missing ``eval_seed`` is 0, as in :class:`~repro.reports.common.Scores`)."""
    missing = [k for k in PROMPT_KEY if k != "eval_seed" and k not in row]
    if missing:
        raise ValueError(f"result row without {', '.join(missing)}: {dict(row)}; allowed: rows with "
                         f"{', '.join(PROMPT_KEY)} (repro.evaluate.run_grid)")
    return tuple(row.get(k, 0) for k in PROMPT_KEY)


def by_prompt(rows: Sequence[Mapping[str, Any]], where: str = "") -> dict[tuple, float]:
    """Prompt -> score of the scored rows; ValueError when a prompt is scored twice."""
    out: dict[tuple, float] = {}
    for r in rows:
        if r.get("score") is None:
            continue
        k = prompt_key(r)
        if k in out:
            raise ValueError(f"prompt {dict(zip(PROMPT_KEY, k))} scored twice{' in ' + where if where else ''}; "
                             "allowed: one row per prompt")
        out[k] = float(r["score"])
    return out


def _few(values: set) -> str:
    v = sorted(values, key=repr)
    return "{" + ", ".join(map(repr, v[:6])) + (", ..." if len(v) > 6 else "") + "}"


def mismatch(keys_a, keys_b, names: tuple[str, str], where: str = "") -> PromptMismatch:
    """The error for two prompt sets that differ: how many prompts each lacks, and which fields differ."""
    ka, kb = set(keys_a), set(keys_b)
    only_a, only_b = sorted(ka - kb, key=repr), sorted(kb - ka, key=repr)
    fields = []
    for i, f in enumerate(PROMPT_KEY):
        va, vb = {k[i] for k in ka}, {k[i] for k in kb}
        if va != vb:
            fields.append(f"{f} {_few(va)} vs {_few(vb)}")
    a, b = names
    first = "; ".join(f"first only in {n}: {dict(zip(PROMPT_KEY, o[0]))}" for n, o in ((a, only_a), (b, only_b))
                      if o)
    return PromptMismatch(
        f"{a} and {b} were not evaluated on the same prompts{' (' + where + ')' if where else ''}: "
        f"{len(only_a)} prompt(s) only in {a}, {len(only_b)} only in {b}; "
        f"differing fields: {'; '.join(fields) or 'none (different combinations)'}; {first}. "
        f"A prompt is ({', '.join(PROMPT_KEY)}); allowed: the same evaluation grid for every arm")


def align(a: Mapping[tuple, float], b: Mapping[tuple, float], names: tuple[str, str] = ("A", "B"),
          where: str = "") -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """Sorted common prompts and the two score arrays on them; :class:`PromptMismatch` unless the prompt
    sets are equal."""
    if set(a) != set(b):
        raise mismatch(a, b, names, where)
    keys = sorted(a, key=repr)
    return keys, np.array([a[k] for k in keys]), np.array([b[k] for k in keys])


def pair_rows(rows_a: Sequence[Mapping[str, Any]], rows_b: Sequence[Mapping[str, Any]],
              names: tuple[str, str] = ("A", "B")) -> tuple[list[tuple], np.ndarray, np.ndarray]:
    """:func:`align` of two lists of result rows."""
    return align(by_prompt(rows_a, names[0]), by_prompt(rows_b, names[1]), names)


# -- headlines as weights over cells -------------------------------------------------------------
def macro(tasks: Sequence[str], lengths: Sequence[int] | int) -> dict[tuple[str, int], float]:
    """(task, length) -> weight of a macro average over ``tasks`` (and the mean over ``lengths``)."""
    lengths = (lengths,) if isinstance(lengths, int) else tuple(lengths)
    if not tasks or not lengths:
        raise ValueError(f"tasks={tuple(tasks)}, lengths={lengths}; allowed: at least one of each")
    return {(t, L): 1.0 / (len(tasks) * len(lengths)) for L in lengths for t in tasks}


def niah_m(length: int) -> dict[tuple[str, int], float]:
    """LongRecipe's NIAH(M) as weights: multi-key 1/9 each (their mean is a third), multi-value and
    multi-query 1/3 each (:meth:`repro.reports.common.Scores.niah_m`)."""
    return {**{(t, length): 1 / 9 for t in MULTIKEY}, ("niah_multivalue", length): 1 / 3,
            ("niah_multiquery", length): 1 / 3}


def task_length(row: Mapping[str, Any]) -> Hashable:
    """The default cell of a row: ``(task, length)``."""
    return row["task"], row["length"]


def depth_decile(row: Mapping[str, Any]) -> Hashable:
    """``(task, decile)`` of a row's depth (RP-Fig1a's bins)."""
    return row["task"], min(int(float(row["depth"]) * 10), 9)


# -- the test ------------------------------------------------------------------------------------
class GapTest:
    """Paired noise of the gaps between the arms of a suite on one headline of one part.

    ``weights`` maps a cell (``stratum(row)``, by default ``(task, length)``) to its weight in the headline
    ``sum_cell weight * mean score``; ``metric``, when given, replaces that sum by any function of the
    ``(B, cells)`` per-cell means (cells in ``weights`` order; e.g. a curve's max - min). Values, standard
    errors and gaps are in percent points. Arms are the suite's names with replicates grouped
    (:func:`repro.reports.seeds.seed_groups`); a replicate missing a cell is left out of its arm.
    """

    def __init__(self, suite: Mapping[str, Mapping[str, Any]], part: str, weights: Mapping[Hashable, float], *,
                 metric: Callable[[np.ndarray], np.ndarray] | None = None,
                 stratum: Callable[[Mapping[str, Any]], Hashable] = task_length, z: float = Z,
                 B: int = stats.BOOTSTRAP, seed: int = 0):
        if not weights:
            raise ValueError(f"GapTest on part {part!r} without cells; allowed: weights over at least one cell")
        self.suite, self.part, self.z, self.B, self.seed = suite, part, z, B, seed
        self.cells = list(weights)
        self.weights = None if metric else np.array([float(weights[c]) for c in self.cells])
        self.metric = metric or stats.linear(self.weights)
        self.stratum = stratum
        self.arms = seed_groups(suite)
        self._reps: dict[str, dict | None] = {}
        self._arm: dict[str, tuple[int, dict] | None] = {}
        self._gaps: dict[tuple[str, str], stats.Gap | None] = {}

    # per-prompt scores
    def _replicate(self, name: str) -> dict[Hashable, dict[tuple, float]] | None:
        if name not in self._reps:
            rec = self.suite.get(name, {}).get(self.part) or {}
            cells: dict[Hashable, list[dict]] = {c: [] for c in self.cells}
            for r in rec.get("results", []):
                c = self.stratum(r)
                if c in cells:
                    cells[c].append(r)
            out = {c: by_prompt(rs, f"{name}/{self.part}") for c, rs in cells.items()}
            self._reps[name] = out if all(out.values()) else None
        return self._reps[name]

    def _scores(self, arm: str) -> tuple[int, dict[Hashable, tuple[list[tuple], np.ndarray]]] | None:
        """(replicates used, cell -> (prompts, per-prompt score averaged over the replicates)); None when no
        replicate has every cell."""
        if arm not in self._arm:
            reps = [(n, r) for n in self.arms.get(arm, ()) if (r := self._replicate(n)) is not None]
            if not reps:
                self._arm[arm] = None
            else:
                (n0, r0), out = reps[0], {}
                for c in self.cells:
                    for n, r in reps[1:]:
                        if set(r[c]) != set(r0[c]):
                            raise mismatch(r0[c], r[c], (n0, n), f"part {self.part}, cell {c}")
                    keys = sorted(r0[c], key=repr)
                    out[c] = keys, np.array([[r[c][k] for k in keys] for _, r in reps]).mean(axis=0)
                self._arm[arm] = (len(reps), out)
        return self._arm[arm]

    def _value(self, cells: Mapping[Hashable, np.ndarray]) -> float:
        return 100.0 * float(self.metric(np.array([[cells[c].mean() for c in self.cells]]))[0])

    # per arm
    def value(self, arm: str) -> float | None:
        """The headline of ``arm`` (percent; mean over its replicates), None without data."""
        s = self._scores(arm)
        return None if s is None else self._value({c: x for c, (_, x) in s[1].items()})

    def replicate_values(self, arm: str) -> list[float]:
        """The headline of each replicate of ``arm`` that has every cell (percent)."""
        return [self._value({c: np.array(list(r[c].values())) for c in self.cells})
                for n in self.arms.get(arm, ()) if (r := self._replicate(n)) is not None]

    def seed_std(self, arm: str) -> float | None:
        """Training-seed spread of ``arm`` (percent; sample std over >= 2 replicates), else None."""
        v = self.replicate_values(arm)
        return stats.seed_spread(v) if len(v) > 1 else None

    def pooled_seed_std(self) -> float | None:
        """``sqrt`` of the mean seed variance of the multi-seed arms (percent), None when there are none."""
        v = [s ** 2 for a in self.arms if (s := self.seed_std(a)) is not None]
        return math.sqrt(sum(v) / len(v)) if v else None

    def arm_se(self, arm: str) -> float | None:
        """Evaluation SE of ``arm``'s headline (percent): analytic ``sqrt(sum w^2 var / n)`` (population
        variance per cell) for a weighted headline, the bootstrap over prompts for a ``metric``; None without
        data or with fewer than two prompts in a cell."""
        s = self._scores(arm)
        if s is None or any(len(k) < 2 for k, _ in s[1].values()):
            return None
        xs = [s[1][c][1] for c in self.cells]
        if self.weights is not None:
            return 100.0 * math.sqrt(sum(w ** 2 * np.var(x) / x.size for w, x in zip(self.weights, xs)))
        return 100.0 * stats.bootstrap_se(xs, self.metric, self.B, self.seed)

    def point_se(self, arm: str) -> float | None:
        """SE of ``arm``'s headline as one point of a figure (percent): :meth:`arm_se` widened by the same
        training-seed term a gap gives each arm (its own spread ``s^2 / k``, a single-seed arm the pooled spread
        ``s^2``, nothing when no arm has several seeds); None without an evaluation SE."""
        e, s = self.arm_se(arm), self._scores(arm)
        return None if e is None or s is None else math.hypot(e, self._seed_se((arm, s[0])))

    # per pair
    def gap(self, a: str, b: str) -> stats.Gap | None:
        """``a - b`` with its paired evaluation SE and the training-seed term (percent); None when an arm has
        no data or a cell has fewer than two prompts (no noise estimate). :class:`PromptMismatch` when the
        two arms were not evaluated on the same prompts."""
        if (a, b) not in self._gaps:
            sa, sb = self._scores(a), self._scores(b)
            g = None
            if sa is not None and sb is not None:
                groups = []
                for c in self.cells:
                    (ka, xa), (kb, xb) = sa[1][c], sb[1][c]
                    if ka != kb:
                        raise mismatch(ka, kb, (a, b), f"part {self.part}, cell {c}")
                    groups.append((xa, xb))
                if all(len(x) > 1 for x, _ in groups):
                    e = stats.bootstrap_gap(groups, self.metric, self.B, self.seed)
                    g = stats.Gap(100 * e.gap, 100 * e.eval_se, 100 * e.lo, 100 * e.hi,
                                  self._seed_se((a, sa[0]), (b, sb[0])))
            self._gaps[(a, b)] = g
        return self._gaps[(a, b)]

    def _seed_se(self, *arms: tuple[str, int]) -> float:
        pooled = self.pooled_seed_std()
        var = 0.0
        for arm, k in arms:
            own = self.seed_std(arm)
            s = own if own is not None else pooled
            var += 0.0 if s is None else s ** 2 / (k if own is not None else 1)
        return math.sqrt(var)

    def se(self, a: str, b: str) -> float | None:
        """Total SE of ``a - b`` (percent), None without a noise estimate (:meth:`gap`)."""
        g = self.gap(a, b)
        return None if g is None else g.se

    def method(self) -> str:
        """How :meth:`se` is computed, for the notes."""
        spread = {a: (s, len(self.replicate_values(a))) for a in self.arms if (s := self.seed_std(a)) is not None}
        how = f"paired bootstrap over prompts, {self.z:g} SE"
        if not spread:
            return how + "; training-seed spread not measured"
        return (how + "; widened by the training-seed spread (" +
                ", ".join(f"{a} {s:.1f} over {k} seeds" for a, (s, k) in spread.items()) +
                f"; single-seed arms: pooled {self.pooled_seed_std():.1f})")


def standard_error(suite, name: str, tasks: Sequence[str], length: int, part: str = "ruler") -> float | None:
    """Evaluation standard error (percent points, one decimal) of arm ``name``'s macro average over ``tasks``
    at ``length``: ``sqrt(sum_t var_t / n_t) / len(tasks)`` over its per-prompt scores (replicates averaged
    per prompt; :meth:`GapTest.arm_se`); None without rows or below two prompts a task."""
    se = GapTest(suite, part, macro(tasks, length)).arm_se(name)
    return None if se is None else round(se, 1)


def task_mcnemar(suite: Mapping[str, Mapping[str, Any]], a: str, b: str, part: str, length: int,
                 tasks: Sequence[str]) -> dict[str, stats.McNemar]:
    """McNemar's test per task at ``length`` between two checkpoints (single replicates) whose scores on that
    task are all 0/1; tasks with other scores or without rows are left out."""
    def rows(name: str, task: str) -> list[dict]:
        return [r for r in (suite.get(name, {}).get(part) or {}).get("results", [])
                if (r["task"], r["length"]) == (task, length)]

    out = {}
    for t in tasks:
        ra, rb = rows(a, t), rows(b, t)
        if not ra or not rb:
            continue
        _, xa, xb = pair_rows(ra, rb, (a, b))
        if set(np.concatenate([xa, xb]).tolist()) <= {0.0, 1.0}:
            out[t] = stats.mcnemar(xa, xb)
    return out
