"""Paired statistics of the gaps between two arms: the bootstrap over prompts, McNemar's test, the
training-seed spread, the noise of a gap and its verdict, and the samples a target standard error needs.

Pure numerics (numpy only); scores and results stay in the scores' unit (fractions for exact match,
the reports scale to percent). Reading result records is :mod:`repro.reports.noise`'s job.

Formulas (``A``, ``B``: two arms scored on the same prompts; strata ``s`` are cells such as one task at
one length, with ``n_s`` prompts and weight ``w_s`` in the headline ``H = sum_s w_s * mean_s``):

* paired bootstrap: every replicate redraws ``n_s`` prompts with replacement inside each stratum, the same
  prompts for both arms, and recomputes ``H(A) - H(B)``; the gap's evaluation SE is the std of the
  replicates, the CI their percentiles. For a linear headline it converges to the analytic
  ``sqrt(sum_s w_s^2 var_s(A - B) / n_s)`` (:func:`paired_se`, population variance of the per-prompt
  differences), which the tests check.
* training-seed spread: ``s`` = sample std (ddof 1) of an arm's headline over its ``k`` training seeds.
* noise of a gap of seed means: ``se = sqrt(se_eval^2 + s_A^2 / k_A + s_B^2 / k_B)`` (:func:`gap_se`):
  the variance of a difference of two independent means over ``k_A`` and ``k_B`` seeds, plus the paired
  evaluation variance. The seed spread is measured on fixed prompts (no prompt-sampling noise in it),
  the bootstrap on fixed models (no training noise in it), so the two terms add.
* verdict: ``higher`` when ``gap > z * se``, ``lower`` when ``gap < -z * se``, else ``tie`` (:func:`gap_verdict`).
* McNemar (0/1 scores): ``n10`` prompts right only under A, ``n01`` only under B; two-sided exact binomial
  ``p = min(1, 2 * P[Bin(n10 + n01, 1/2) <= min(n10, n01)])`` below ``exact_below`` discordant prompts,
  else chi-square with continuity correction ``(|n10 - n01| - 1)^2 / (n10 + n01)`` on 1 degree of freedom.
* sample size: with per-prompt score std ``sd_t`` of task ``t``, ``c`` cells per task (depths x evaluation
  seeds) and ``m`` samples per cell, an arm's headline ``sum_t w_t * mean_t`` has SE
  ``sqrt(sum_t w_t^2 sd_t^2 / (c * m))`` (:func:`headline_se`); :func:`samples_for_se` solves it for ``m``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Hashable, Mapping, Sequence

import numpy as np

Z = 2.0
"""A gap is significant beyond ``Z`` standard errors."""
BOOTSTRAP = 2000
"""Bootstrap replicates by default."""
VERDICTS = ("higher", "lower", "tie")
"""What :func:`gap_verdict` returns."""


@dataclass(frozen=True)
class Gap:
    """A gap ``A - B`` and its noise (all in the unit of the scores it was computed from)."""

    gap: float
    """The headline of A minus that of B, on the data."""
    eval_se: float
    """Standard error over prompts (paired bootstrap)."""
    lo: float
    """Lower end of the bootstrap percentile interval (prompts only, no training-seed term)."""
    hi: float
    """Upper end of that interval."""
    seed_se: float = 0.0
    """Training-seed term ``sqrt(s_A^2 / k_A + s_B^2 / k_B)`` (0 when the spread was not measured)."""

    @property
    def se(self) -> float:
        """Total standard error ``sqrt(eval_se^2 + seed_se^2)``."""
        return math.hypot(self.eval_se, self.seed_se)

    def verdict(self, z: float = Z) -> str:
        """:func:`gap_verdict` of this gap."""
        return gap_verdict(self.gap, self.se, z)


# -- bootstrap -----------------------------------------------------------------------------------
def _as_groups(groups: Sequence[Sequence[Sequence[float]]], arms: int | None = None) -> list[list[np.ndarray]]:
    out = []
    for i, g in enumerate(groups):
        arrays = [np.asarray(x, dtype=float) for x in g]
        if arms is not None and len(arrays) != arms:
            raise ValueError(f"stratum {i}: {len(arrays)} arrays; allowed: {arms} (one per arm)")
        n = {a.shape for a in arrays}
        if len(n) != 1 or arrays[0].ndim != 1 or arrays[0].size < 1:
            raise ValueError(f"stratum {i}: shapes {sorted(n)}; allowed: equal 1-D shapes with >= 1 prompt "
                             "(paired arms score the same prompts)")
        out.append(arrays)
    if not out:
        raise ValueError("no strata; allowed: at least one stratum of paired scores")
    return out


def stratified_bootstrap(groups: Sequence[Sequence[Sequence[float]]],
                         statistic: Callable[..., np.ndarray], B: int = BOOTSTRAP, seed: int = 0) -> np.ndarray:
    """``B`` bootstrap replicates of ``statistic``.

    ``groups[s]`` holds one score array per arm for stratum ``s``, aligned by prompt. Each replicate draws
    ``n_s`` prompt indices with replacement in every stratum, the same indices for every arm (paired).
    ``statistic`` gets one ``(B, S)`` array of per-stratum means per arm and returns ``(B,)`` values.
    """
    if B < 2:
        raise ValueError(f"B={B}; allowed: >= 2 bootstrap replicates")
    gs = _as_groups(groups)
    rng = np.random.default_rng(seed)
    means: list[list[np.ndarray]] = [[] for _ in gs[0]]
    for arrays in gs:
        if len(arrays) != len(means):
            raise ValueError(f"strata hold {len(arrays)} and {len(means)} arms; allowed: the same arms everywhere")
        idx = rng.integers(0, arrays[0].size, size=(B, arrays[0].size))
        for j, x in enumerate(arrays):
            means[j].append(x[idx].mean(axis=1))
    return np.asarray(statistic(*(np.stack(m, axis=1) for m in means)), dtype=float)


def linear(weights: Sequence[float]) -> Callable[[np.ndarray], np.ndarray]:
    """The headline ``sum_s w_s * mean_s`` as a function of ``(B, S)`` per-stratum means."""
    w = np.asarray(weights, dtype=float)
    return lambda m: m @ w


def bootstrap_gap(groups: Sequence[Sequence[Sequence[float]]], metric: Callable[[np.ndarray], np.ndarray],
                  B: int = BOOTSTRAP, seed: int = 0, level: float = 0.95) -> Gap:
    """Paired bootstrap of ``metric(A) - metric(B)``; ``groups[s] = (a_s, b_s)`` aligned by prompt and
    ``metric`` maps ``(B, S)`` per-stratum means to ``(B,)`` headlines (e.g. :func:`linear`)."""
    if not 0.0 < level < 1.0:
        raise ValueError(f"level={level}; allowed: 0 < level < 1")
    gs = _as_groups(groups, arms=2)
    ma = np.array([[a.mean() for a, _ in gs]])
    mb = np.array([[b.mean() for _, b in gs]])
    gap = float(metric(ma)[0] - metric(mb)[0])
    reps = stratified_bootstrap(gs, lambda a, b: metric(a) - metric(b), B, seed)
    lo, hi = np.quantile(reps, [(1 - level) / 2, (1 + level) / 2])
    return Gap(gap, float(reps.std(ddof=1)), float(lo), float(hi))


def bootstrap_se(groups: Sequence[Sequence[float]], metric: Callable[[np.ndarray], np.ndarray],
                 B: int = BOOTSTRAP, seed: int = 0) -> float:
    """Bootstrap standard error of one arm's ``metric`` (``groups[s]``: its scores in stratum ``s``)."""
    reps = stratified_bootstrap([[g] for g in groups], metric, B, seed)
    return float(reps.std(ddof=1))


def _strata(a, b, strata, weights) -> tuple[list, list[tuple[np.ndarray, np.ndarray]], np.ndarray]:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape or a.size < 1:
        raise ValueError(f"scores of shapes {a.shape} and {b.shape}; allowed: equal 1-D shapes, >= 1 prompt")
    labels = np.zeros(a.size, dtype=int) if strata is None else np.asarray(strata, dtype=object)
    if labels.shape != a.shape:
        raise ValueError(f"{labels.size} stratum labels for {a.size} prompts; allowed: one per prompt")
    keys = list(dict.fromkeys(labels.tolist()))
    if weights is None:
        w = np.full(len(keys), 1.0 / len(keys))
    else:
        if set(weights) != set(keys):
            raise ValueError(f"weights for {sorted(map(str, weights))} but strata {sorted(map(str, keys))}; "
                             "allowed: one weight per stratum")
        w = np.array([float(weights[k]) for k in keys])
    groups = [(a[labels == k], b[labels == k]) for k in keys]
    return keys, groups, w


def paired_bootstrap(a: Sequence[float], b: Sequence[float], strata: Sequence[Hashable] | None = None,
                     weights: Mapping[Hashable, float] | None = None, *, B: int = BOOTSTRAP, seed: int = 0,
                     level: float = 0.95) -> Gap:
    """Paired bootstrap of the difference of (weighted) means of ``a`` and ``b``, aligned by prompt.

    ``strata`` labels each prompt's cell (default: one cell); ``weights`` maps a label to its weight in
    the headline (default: equal weights, the macro average). Returns the gap, its SE and a CI.
    """
    _, groups, w = _strata(a, b, strata, weights)
    return bootstrap_gap(groups, linear(w), B, seed, level)


def paired_se(a: Sequence[float], b: Sequence[float], strata: Sequence[Hashable] | None = None,
              weights: Mapping[Hashable, float] | None = None) -> float:
    """Analytic SE of the weighted mean difference: ``sqrt(sum_s w_s^2 var_s(a - b) / n_s)`` (population
    variance, the quantity :func:`paired_bootstrap` estimates)."""
    _, groups, w = _strata(a, b, strata, weights)
    return float(math.sqrt(sum(wi ** 2 * np.var(x - y) / x.size for wi, (x, y) in zip(w, groups))))


# -- McNemar -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class McNemar:
    """McNemar's test of two arms' 0/1 scores on the same prompts."""

    n10: int
    """Prompts right under A only."""
    n01: int
    """Prompts right under B only."""
    p: float
    """Two-sided p-value."""
    method: str
    """``exact binomial`` or ``chi-square (continuity corrected)``."""


def mcnemar(a: Sequence[float], b: Sequence[float], exact_below: int = 25) -> McNemar:
    """McNemar's test; exact binomial when fewer than ``exact_below`` prompts are discordant."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.shape != b.shape or a.ndim != 1:
        raise ValueError(f"scores of shapes {a.shape} and {b.shape}; allowed: equal 1-D shapes (paired prompts)")
    bad = sorted(set(np.unique(np.concatenate([a, b])).tolist()) - {0.0, 1.0})
    if bad:
        raise ValueError(f"scores {bad[:5]}; allowed: 0 or 1 (McNemar needs right/wrong per prompt)")
    n10, n01 = int(np.sum((a == 1) & (b == 0))), int(np.sum((a == 0) & (b == 1)))
    n = n10 + n01
    if n < exact_below:
        tail = sum(math.comb(n, i) for i in range(min(n10, n01) + 1)) / 2 ** n
        return McNemar(n10, n01, min(1.0, 2 * tail), "exact binomial")
    x = (abs(n10 - n01) - 1) ** 2 / n
    return McNemar(n10, n01, math.erfc(math.sqrt(x / 2)), "chi-square (continuity corrected)")


# -- training seeds and verdicts -----------------------------------------------------------------
def seed_spread(values: Sequence[float]) -> float:
    """Sample std (ddof 1) of one arm's headline over its training seeds."""
    v = [float(x) for x in values]
    if len(v) < 2:
        raise ValueError(f"{len(v)} training seed(s); allowed: >= 2 to measure a spread")
    return float(np.std(v, ddof=1))


def gap_se(eval_se: float, spread_a: float = 0.0, k_a: int = 1, spread_b: float = 0.0, k_b: int = 1) -> float:
    """``sqrt(eval_se^2 + spread_a^2 / k_a + spread_b^2 / k_b)``: a gap between the means of two arms over
    ``k_a`` and ``k_b`` training seeds whose headlines spread by ``spread_a`` and ``spread_b`` across seeds."""
    if min(eval_se, spread_a, spread_b) < 0 or min(k_a, k_b) < 1:
        raise ValueError(f"eval_se={eval_se}, spread_a={spread_a}, spread_b={spread_b}, k_a={k_a}, k_b={k_b}; "
                         "allowed: standard errors and spreads >= 0, seed counts >= 1")
    return math.sqrt(eval_se ** 2 + spread_a ** 2 / k_a + spread_b ** 2 / k_b)


def gap_verdict(gap: float, se: float, z: float = Z) -> str:
    """``higher`` when ``gap > z * se``, ``lower`` when ``gap < -z * se``, else ``tie`` (within noise)."""
    if se < 0 or z <= 0 or math.isnan(se):
        raise ValueError(f"se={se}, z={z}; allowed: se >= 0, z > 0")
    return "higher" if gap > z * se else "lower" if gap < -z * se else "tie"


# -- sample size ---------------------------------------------------------------------------------
def bernoulli_sd(p: float) -> float:
    """Per-prompt std of a 0/1 score with accuracy ``p`` (at most 0.5, at ``p = 0.5``)."""
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p={p}; allowed: 0 <= p <= 1")
    return math.sqrt(p * (1 - p))


def _sum_w2_var(weights: Mapping[Hashable, float], sd: Mapping[Hashable, float] | float) -> float:
    if not weights:
        raise ValueError("no weights; allowed: task -> weight of the headline, at least one")
    if not isinstance(sd, Mapping):
        sd = {t: float(sd) for t in weights}
    missing = [str(t) for t in weights if t not in sd]
    if missing:
        raise ValueError(f"no score std for {', '.join(missing)}; allowed: one per weighted task (or one number)")
    if any(sd[t] < 0 for t in weights):
        raise ValueError(f"score std {dict(sd)}; allowed: >= 0")
    return sum(float(w) ** 2 * float(sd[t]) ** 2 for t, w in weights.items())


def headline_se(weights: Mapping[Hashable, float], sd: Mapping[Hashable, float] | float, cells: int,
                samples: int) -> float:
    """SE of one arm's headline ``sum_t w_t * mean_t`` with ``samples`` prompts in each of ``cells`` cells
    per task (depths x evaluation seeds) and per-prompt score std ``sd`` (per task, or one number)."""
    if cells < 1 or samples < 1:
        raise ValueError(f"cells={cells}, samples={samples}; allowed: >= 1")
    return math.sqrt(_sum_w2_var(weights, sd) / (cells * samples))


def samples_for_se(weights: Mapping[Hashable, float], sd: Mapping[Hashable, float] | float, cells: int,
                   target_se: float) -> int:
    """Fewest samples per cell for which :func:`headline_se` is <= ``target_se`` (same unit as ``sd``:
    2 points on exact-match scores is ``target_se=0.02``)."""
    if target_se <= 0 or cells < 1:
        raise ValueError(f"target_se={target_se}, cells={cells}; allowed: target_se > 0, cells >= 1")
    need = _sum_w2_var(weights, sd) / (cells * target_se ** 2)
    return max(1, math.ceil(need - 1e-9))  # the tolerance keeps an exact solution from rounding up


def mean_se(values: Sequence[float]) -> tuple[float, float]:
    """Mean and standard error over the finite values (NaN, NaN when none; SE 0 for one value)."""
    v = np.asarray([x for x in values if x is not None and math.isfinite(x)], dtype=np.float64)
    if v.size == 0:
        return float("nan"), float("nan")
    return float(v.mean()), float(v.std(ddof=1) / math.sqrt(v.size)) if v.size > 1 else 0.0
