"""Metrics of position transforms: LongRecipe Fig. 2 statistics and window coverage.

LongRecipe §6 "Analysis", Fig. 2: :func:`avg_token_distance`,
:func:`mean_segment_length` (:func:`lr_fig2_rows`, :func:`lr_fig2_summary`),
plus window coverage (:func:`position_counts`, :func:`distance_counts`,
:func:`coverage`) and one draw of each transform for plotting (:func:`examples`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np

from repro.positions.sample import PositionSample, _check_int
from repro.positions.transforms import TRANSFORM_INFO, apply_transform, get_transform
from repro.positions.views import ViewPair


# ---------------------------------------------------------------------------------------
# metrics
# ---------------------------------------------------------------------------------------
def avg_token_distance(positions: np.ndarray) -> float:
    """Average distance among tokens: mean of ``|p_i - p_j|`` over all unordered pairs ``i < j``.

    This is our definition of LongRecipe Fig. 2's "average distance among
    tokens" (the paper does not define it): the mean RoPE offset between two
    tokens of the sample, i.e. the relative distances the model is trained on.
    Computed exactly in O(n log n): for sorted positions ``q``,
    ``sum_{i<j} (q_j - q_i) = sum_k q_k (2k - n + 1)`` (integer arithmetic),
    divided by ``n (n - 1) / 2``. Identity on ``n`` tokens gives ``(n + 1) / 3``.
    Returns 0.0 for fewer than two tokens.
    """
    p = np.asarray(positions)
    n = p.size
    if n < 2:
        return 0.0
    q = np.sort(p.ravel())
    if np.issubdtype(q.dtype, np.integer):
        total = int(np.dot(q.astype(np.int64), 2 * np.arange(n, dtype=np.int64) - n + 1))
        return total / (n * (n - 1) / 2)
    return float(np.dot(q.astype(np.float64), 2.0 * np.arange(n) - n + 1) / (n * (n - 1) / 2))


def segment_lengths(positions: np.ndarray) -> np.ndarray:
    """Lengths (in tokens) of the maximal runs where each next position is the previous + 1."""
    p = np.asarray(positions).ravel()
    if p.size == 0:
        return np.zeros(0, dtype=np.int64)
    breaks = np.flatnonzero(np.diff(p) != 1) + 1
    return np.diff(np.concatenate([[0], breaks, [p.size]])).astype(np.int64)


def mean_segment_length(positions: np.ndarray) -> float:
    """Average continuous-segment length (LongRecipe Fig. 2): mean token count of maximal runs.

    A run is maximal with ``p[t+1] == p[t] + 1``; isolated tokens are runs of
    length 1, so RPES gives about ``1 / (1 - n/target)`` here (the paper's
    "nearly 0" suggests it counts the ``+1`` steps, i.e. this value minus 1;
    see :func:`mean_segment_steps`).
    """
    return float(np.mean(segment_lengths(positions))) if np.size(positions) else 0.0


def mean_segment_steps(positions: np.ndarray) -> float:
    """Mean number of ``+1`` steps per maximal run (= :func:`mean_segment_length` - 1)."""
    return mean_segment_length(positions) - 1.0 if np.size(positions) else 0.0


def position_counts(positions: np.ndarray, target: int) -> np.ndarray:
    """How many tokens sit at each position ``0..target-1`` (int64, length ``target``)."""
    return np.bincount(np.asarray(positions, dtype=np.int64).ravel(), minlength=target)[:target]


def distance_counts(positions: np.ndarray, target: int) -> np.ndarray:
    """Number of token pairs at each relative distance ``d = 0..target-1`` (unordered pairs).

    ``out[d] = sum_x c[x] c[x + d]`` for ``d >= 1`` with ``c`` the position
    counts (the autocorrelation, exact via FFT and rounding), ``out[0]`` the
    pairs sharing a position. For order-preserving transforms ``d`` is the
    RoPE offset between a query and an earlier key.
    """
    c = position_counts(positions, target).astype(np.float64)
    # zero-pad to a power of two >= 2 * target so the FFT's circular correlation has no wrap-around
    size = 1 << int(np.ceil(np.log2(2 * target)))
    f = np.fft.rfft(c, size)
    ac = np.rint(np.fft.irfft(f * np.conj(f), size)[:target]).astype(np.int64)
    ac[0] = int(((c * (c - 1)) // 2).sum())
    return ac


@dataclass(frozen=True, eq=False)
class Coverage:
    """Window coverage of one transform over many draws."""

    positions: np.ndarray
    """Tokens seen at each position ``0..target-1``, summed over draws."""
    distances: np.ndarray
    """Token pairs seen at each relative distance ``0..target-1``, summed over draws."""
    draws: int
    """Number of draws."""


def coverage(name: str, sample: PositionSample, target: int, draws: int, seed: int = 0,
             **params: Any) -> Coverage:
    """Accumulate :func:`position_counts` and :func:`distance_counts` over ``draws`` samples."""
    info = TRANSFORM_INFO.get(name)
    if info is None or info.kind != "positions":
        allowed = sorted(k for k, v in TRANSFORM_INFO.items() if v.kind == "positions")
        raise ValueError(f"coverage needs an integer position transform, got {name!r}; allowed: {allowed}")
    _check_int("draws", draws, 1)
    rng = np.random.default_rng(seed)
    pos = np.zeros(target, dtype=np.int64)
    dist = np.zeros(target, dtype=np.int64)
    for _ in range(draws):
        p = apply_transform(name, sample, target, rng, **params)
        pos += position_counts(p, target)
        dist += distance_counts(p, target)
    return Coverage(pos, dist, draws)


# ---------------------------------------------------------------------------------------
# LongRecipe Fig. 2
# ---------------------------------------------------------------------------------------
LR_FIG2_METHODS: tuple[str, ...] = ("flt", "rpes", "pose", "longrecipe")
"""Methods compared in LongRecipe Fig. 2."""

LR_FIG2_COLUMNS: tuple[str, ...] = (
    "method", "target", "sample_len", "draws", "avg_token_distance", "avg_token_distance_std",
    "mean_segment_length", "mean_segment_steps", "segments", "max_position")
"""Columns of the LR-Fig2 table."""


def lr_fig2_rows(samples: Mapping[int, PositionSample], methods: Sequence[str] = LR_FIG2_METHODS,
                 seed: int = 0, draws: int = 8) -> list[dict]:
    """LongRecipe Fig. 2 statistics: one row per method x target.

    ``samples`` maps each target window to the short sample simulating it
    (e.g. ``{81920: 24576-token sample, 131072: 39322-token sample}``). FLT is
    full-length training, so its row uses identity positions on ``target``
    tokens (``sample_len = target``). Every other method is drawn ``draws``
    times (fresh parameters each time, seeded by ``seed``); the row holds the
    mean (and std) of :func:`avg_token_distance`, the mean of
    :func:`mean_segment_length` / :func:`mean_segment_steps`, the mean number
    of segments and the largest position seen.
    """
    rows = []
    for t_idx, (target, sample) in enumerate(sorted(samples.items())):
        for m_idx, method in enumerate(methods):
            get_transform(method)
            rng = np.random.default_rng([seed, t_idx, m_idx])
            smp = PositionSample(n=target) if method == "flt" else sample
            k = 1 if method == "flt" else _check_int("draws", draws, 1)
            dist, seg, steps, nseg, top = [], [], [], [], 0
            for _ in range(k):
                p = apply_transform(method, smp, target, rng)
                lengths = segment_lengths(p)
                dist.append(avg_token_distance(p))
                seg.append(float(lengths.mean()))
                steps.append(float(lengths.mean()) - 1.0)
                nseg.append(lengths.size)
                top = max(top, int(p.max()))
            rows.append({"method": method, "target": int(target), "sample_len": smp.n, "draws": k,
                         "avg_token_distance": float(np.mean(dist)),
                         "avg_token_distance_std": float(np.std(dist)),
                         "mean_segment_length": float(np.mean(seg)),
                         "mean_segment_steps": float(np.mean(steps)),
                         "segments": float(np.mean(nseg)), "max_position": top})
    return rows


def examples(sample: PositionSample, target: int, seed: int = 0,
             names: Sequence[str] = ("flt", "pose", "rpes", "longrecipe_eq7", "longrecipe_alg1",
                                     "skip", "cyclic", "dilation", "chunk_permutation")) -> dict:
    """One draw of each transform on ``sample`` (views: the perturbed indices), for plotting.

    Views that need a larger window than ``target`` (skip with ``Y = L``,
    dilation by 2) are drawn with ``target = max(target, 2 n)``.
    """
    out = {}
    for i, name in enumerate(names):
        rng = np.random.default_rng([seed, i])
        get_transform(name)
        info = TRANSFORM_INFO[name]
        t = max(target, 2 * sample.n) if info.kind == "view" else target
        r = apply_transform(name, sample, t, rng)
        out[name] = r.perturbed if isinstance(r, ViewPair) else r
    return out


def lr_fig2_summary(rows: Sequence[Mapping]) -> dict:
    """The three LongRecipe Fig. 2 claims measured on ``rows`` from :func:`lr_fig2_rows`.

    ``distance_ratio_longrecipe_pose``: LongRecipe / PoSE average token distance
    at the largest target (paper: about 2 at 128K). ``longrecipe_segment``:
    LongRecipe mean continuous-segment length (tokens) averaged over targets
    (paper: about 88). ``rpes_segment`` / ``rpes_segment_steps``: the same for
    RPES in tokens and in ``+1`` steps (paper: nearly 0).
    """
    by = {(r["method"], r["target"]): r for r in rows}
    top = max(r["target"] for r in rows)
    lr = [r for r in rows if r["method"] == "longrecipe"]
    rp = [r for r in rows if r["method"] == "rpes"]
    return {
        "target": top,
        "distance_ratio_longrecipe_pose": by[("longrecipe", top)]["avg_token_distance"]
        / by[("pose", top)]["avg_token_distance"],
        "longrecipe_segment": float(np.mean([r["mean_segment_length"] for r in lr])),
        "rpes_segment": float(np.mean([r["mean_segment_length"] for r in rp])),
        "rpes_segment_steps": float(np.mean([r["mean_segment_steps"] for r in rp])),
    }
