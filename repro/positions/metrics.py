"""Metrics of position transforms: LongRecipe Fig. 2 statistics and window coverage.

LongRecipe §6 "Analysis", Fig. 2: :func:`avg_token_distance`,
:func:`mean_segment_length` (:func:`lr_fig2_rows`, :func:`lr_fig2_summary`),
plus window coverage (:func:`position_counts`, :func:`distance_counts`,
:func:`coverage`, :func:`coverages`) and one draw of each transform for plotting (:func:`examples`).
The rows and panels are named by :data:`LR_FIG2_SPECS` (a transform with parameters,
e.g. ``pose_official``) or by any registered transform name.
"""

from __future__ import annotations

import zlib
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


def coverages(sample: PositionSample, target: int, methods: Sequence[str], draws: int,
              seed: int = 0) -> dict[str, Coverage]:
    """:func:`coverage` of each method (an :data:`LR_FIG2_SPECS` label or a transform name), by method."""
    out = {}
    for method in methods:
        name, params = method_spec(method)
        out[method] = coverage(name, sample, target, draws, seed, **params)
    return out


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
LR_FIG2_SPECS: dict[str, tuple[str, dict]] = {
    "flt": ("flt", {}),
    "rpes": ("rpes", {}),
    "pose": ("pose", {}),
    "pose_official": ("pose", {"first_chunk": "official"}),
    "longrecipe_eq7": ("longrecipe_eq7", {}),
    "longrecipe": ("longrecipe_alg1", {}),
    "longrecipe_official": ("longrecipe_official", {}),
}
"""LR-Fig2 rows: label -> (transform, parameters). ``pose`` and ``longrecipe`` (Algorithm 1) are the
papers' definitions; ``pose_official`` (first chunk ``U{1..floor((n+1)/2)}``) and ``longrecipe_official``
(identity prefix, gaps >= 0, exact sentence-end tokens) are the authors' code; ``longrecipe_eq7`` is the
paper's Eq. 5-7 reading."""

LR_FIG2_METHODS: tuple[str, ...] = tuple(LR_FIG2_SPECS)
"""Methods compared in LongRecipe Fig. 2 (FLT, RPES, PoSE, LongRecipe), with the other readings of PoSE and
LongRecipe beside them."""

LR_FIG2_TEXTS: dict[str, tuple[str, ...]] = {"mixed": ("prose", "code"), "prose": ("prose",)}
"""Text of the LR-Fig2 samples: label -> corpus sources (``mixed``: prose and code, as the arms train on;
``prose``: prose only, nearer the paper's SlimPajama)."""

LR_FIG2_PAPER_SEGMENT: float = 88.0
"""LongRecipe's mean continuous-segment length in Fig. 2 (§6), tokens."""

LR_FIG2_COLUMNS: tuple[str, ...] = (
    "method", "text", "target", "sample_len", "draws", "avg_token_distance", "avg_token_distance_std",
    "avg_token_distance_se", "mean_segment_length", "mean_segment_length_se", "mean_segment_steps", "segments",
    "max_position", "share_at_or_beyond_n")
"""Columns of the LR-Fig2 table (``share_at_or_beyond_n``: share of tokens at positions >= ``sample_len``; ``_se``:
the standard errors over the draws that the figure's bars and the verdict use)."""


def method_spec(method: str) -> tuple[str, dict]:
    """``(transform name, parameters)`` of an :data:`LR_FIG2_SPECS` label or a registered transform name."""
    if method in LR_FIG2_SPECS:
        name, params = LR_FIG2_SPECS[method]
        return name, dict(params)
    if method not in TRANSFORM_INFO:
        allowed = sorted(set(LR_FIG2_SPECS) | set(TRANSFORM_INFO))
        raise ValueError(f"unknown method {method!r}; allowed: an LR_FIG2_SPECS label or a transform name {allowed}")
    return method, {}


def _method_seed(method: str) -> int:
    """A stable integer per method label, so a row's draws do not depend on which other rows are computed."""
    return zlib.crc32(method.encode())


def _draw_se(values: Sequence[float]) -> float | None:
    """Standard error of the mean over random draws: the population std / sqrt(draws - 1); None with one draw."""
    return float(np.std(values) / np.sqrt(len(values) - 1)) if len(values) > 1 else None


def lr_fig2_rows(samples: Mapping[int, PositionSample], methods: Sequence[str] = LR_FIG2_METHODS,
                 seed: int = 0, draws: int = 8, text: str = "mixed") -> list[dict]:
    """LongRecipe Fig. 2 statistics: one row per method x target.

    ``samples`` maps each target window to the short sample simulating it
    (e.g. ``{81920: 24576-token sample, 131072: 39322-token sample}``); ``text``
    labels them in the ``text`` column (:data:`LR_FIG2_TEXTS`). ``methods`` are
    :data:`LR_FIG2_SPECS` labels or transform names. FLT is full-length training,
    so its row uses identity positions on ``target`` tokens (``sample_len = target``).
    Every other method is drawn ``draws`` times (fresh parameters each time,
    seeded by ``seed``, the target and the method label); the row holds the mean
    (and std and standard error over the draws: ``std / sqrt(draws - 1)``, None with one draw, the SE the figure's
    bars and :func:`lr_fig2_summary` use) of :func:`avg_token_distance` and of :func:`mean_segment_length`, the mean of
    / :func:`mean_segment_steps`, the mean number of segments, the largest
    position seen and the mean share of tokens at positions ``>= sample_len``
    (how far the method reaches beyond the sample's own positions).
    """
    rows = []
    for target, sample in sorted(samples.items()):
        for method in methods:
            name, params = method_spec(method)
            rng = np.random.default_rng([seed, int(target), _method_seed(method)])
            smp = PositionSample(n=target) if name == "flt" else sample
            k = 1 if name == "flt" else _check_int("draws", draws, 1)
            dist, seg, nseg, beyond, top = [], [], [], [], 0
            for _ in range(k):
                p = apply_transform(name, smp, target, rng, **params)
                lengths = segment_lengths(p)
                dist.append(avg_token_distance(p))
                seg.append(float(lengths.mean()))
                nseg.append(lengths.size)
                beyond.append(float(np.mean(p >= smp.n)))
                top = max(top, int(p.max()))
            rows.append({"method": method, "text": text, "target": int(target), "sample_len": smp.n, "draws": k,
                         "avg_token_distance": float(np.mean(dist)),
                         "avg_token_distance_std": float(np.std(dist)),
                         "avg_token_distance_se": _draw_se(dist),
                         "mean_segment_length": float(np.mean(seg)),
                         "mean_segment_length_std": float(np.std(seg)),
                         "mean_segment_length_se": _draw_se(seg),
                         "mean_segment_steps": float(np.mean(seg)) - 1.0,
                         "segments": float(np.mean(nseg)), "max_position": top,
                         "share_at_or_beyond_n": float(np.mean(beyond))})
    return rows


def examples(sample: PositionSample, target: int, seed: int = 0,
             names: Sequence[str] = ("flt", "pose", "pose_official", "rpes", "longrecipe_eq7", "longrecipe_alg1",
                                     "longrecipe_official", "skip", "cyclic", "dilation",
                                     "chunk_permutation")) -> dict:
    """One draw of each transform on ``sample`` (views: the perturbed indices), for plotting.

    ``names`` are transform names or :data:`LR_FIG2_SPECS` labels. Views that
    need a larger window than ``target`` (skip with ``Y = L``, dilation by 2) are
    drawn with ``target = max(target, 2 n)``.
    """
    out = {}
    for i, label in enumerate(names):
        rng = np.random.default_rng([seed, i])
        name, params = method_spec(label)
        get_transform(name)
        info = TRANSFORM_INFO[name]
        t = max(target, 2 * sample.n) if info.kind == "view" else target
        r = apply_transform(name, sample, t, rng, **params)
        out[label] = r.perturbed if isinstance(r, ViewPair) else r
    return out


def lr_fig2_summary(rows: Sequence[Mapping], text: str = "mixed") -> dict:
    """The three LongRecipe Fig. 2 claims measured on ``rows`` from :func:`lr_fig2_rows`.

    The claims use the rows of ``text`` (default ``mixed``, the text the arms train
    on) and the papers' definitions: ``distance_ratio_longrecipe_pose``: LongRecipe
    / PoSE average token distance at the largest target (paper: about 2 at 128K).
    ``longrecipe_segment``: LongRecipe mean continuous-segment length (tokens)
    averaged over targets (paper: about 88). ``rpes_segment`` /
    ``rpes_segment_steps``: the same for RPES in tokens and in ``+1`` steps (paper:
    nearly 0). ``distance_ratio_se``, ``longrecipe_segment_se`` and ``rpes_segment_se``
    are their standard errors over the random draws of the transforms (the sample
    text fixed; a row's SE is its std over ``draws`` / sqrt(draws - 1), the ratio's by
    the delta method, a mean over targets' by ``sqrt(sum se^2) / targets``); None
    with one draw or without the std columns. Over all rows: ``segments`` maps ``"method/text"`` of every
    LongRecipe reading to its mean segment (averaged over targets) and
    ``nearest_segment`` is the ``(method, text, segment)`` nearest the paper's 88;
    ``share_at_or_beyond_n`` maps ``"method/text"`` of every PoSE reading to its
    share of tokens at positions ``>= n`` (averaged over targets).
    """
    mine = [r for r in rows if r.get("text", "mixed") == text]
    if not mine:
        allowed = sorted({r.get("text", "mixed") for r in rows})
        raise ValueError(f"no LR-Fig2 rows with text={text!r}; allowed: {allowed}")
    by = {(r["method"], r["target"]): r for r in mine}
    top = max(r["target"] for r in mine)
    lr = [r for r in mine if r["method"] == "longrecipe"]
    rp = [r for r in mine if r["method"] == "rpes"]

    def mean_by(prefix: str, key: str) -> dict[str, float]:
        groups: dict[str, list[float]] = {}
        for r in rows:
            if r["method"].startswith(prefix):
                groups.setdefault(f"{r['method']}/{r.get('text', 'mixed')}", []).append(r[key])
        return {k: float(np.mean(v)) for k, v in groups.items()}

    def se(r: Mapping, key: str) -> float | None:
        if f"{key}_se" in r:  # the table's own SE column (:func:`_draw_se`), the one the figure draws
            return r[f"{key}_se"]
        std, k = r.get(f"{key}_std"), r.get("draws", 1)  # rows written before the SE columns existed
        return None if std is None or k < 2 else float(std) / np.sqrt(k - 1)

    def mean_se(rs: Sequence[Mapping], key: str) -> float | None:
        v = [se(r, key) for r in rs]
        return None if not v or None in v else float(np.sqrt(np.sum(np.square(v)))) / len(v)

    lr_top, pose_top = by[("longrecipe", top)], by[("pose", top)]
    ratio = lr_top["avg_token_distance"] / pose_top["avg_token_distance"]
    d_lr, d_pose = se(lr_top, "avg_token_distance"), se(pose_top, "avg_token_distance")
    ratio_se = None if d_lr is None or d_pose is None else float(
        ratio * np.hypot(d_lr / lr_top["avg_token_distance"], d_pose / pose_top["avg_token_distance"]))
    segments = mean_by("longrecipe", "mean_segment_length")
    near = min(segments, key=lambda k: abs(segments[k] - LR_FIG2_PAPER_SEGMENT))
    return {
        "target": top,
        "text": text,
        "distance_ratio_longrecipe_pose": ratio,
        "distance_ratio_se": ratio_se,
        "longrecipe_segment": float(np.mean([r["mean_segment_length"] for r in lr])),
        "longrecipe_segment_se": mean_se(lr, "mean_segment_length"),
        "rpes_segment": float(np.mean([r["mean_segment_length"] for r in rp])),
        "rpes_segment_se": mean_se(rp, "mean_segment_length"),
        "rpes_segment_steps": float(np.mean([r["mean_segment_steps"] for r in rp])),
        "segments": segments,
        "nearest_segment": (*near.split("/", 1), segments[near]),
        "share_at_or_beyond_n": mean_by("pose", "share_at_or_beyond_n"),
    }
