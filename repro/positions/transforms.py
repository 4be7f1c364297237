"""Position-index transforms that simulate long context from short samples, and their registry.

Every context-extension method in the four papers that trains on samples
shorter than the target window does so by choosing ``position_ids``. This
module implements all of them behind one call signature::

    fn(sample: PositionSample, target: int, rng: np.random.Generator, **params)

``sample`` holds the sample length ``n`` (and token ids / sentence starts
where a method needs them), ``target`` is the context window being simulated
(every returned position lies in ``[0, target)``), and ``rng`` is the only
source of randomness (same generator state, same output; successive calls
on one generator give fresh samples, i.e. parameters are re-drawn per example).

Kinds of transform (see :data:`TRANSFORM_INFO`):

``positions``
    return an ``np.int64`` array of length ``n``: ``flt``, ``pose``, ``rpes``,
    ``longrecipe_eq7``, ``longrecipe_alg1`` (alias ``longrecipe``),
    ``longrecipe_official``.
``rope_scaling``
    ``pi`` returns fractional (``float64``) positions for analysis. Our model
    path does *not* feed fractional ids: it trains PI with identity ids and
    RoPE ``linear`` scaling, ``rope_parameters={"rope_type": "linear",
    "factor": target / original}`` (:func:`pi_rope_parameters`), which is the
    same rotation (HF divides the inverse frequencies by ``factor``).
``view``
    self-distillation views (RoPE-perturbed self-distillation §2.2, §2.4,
    §3.6) return a :class:`ViewPair` ``(standard, perturbed)``; for ``nope``
    ``perturbed`` is ``None``, meaning "apply no rotary embedding"
    (:mod:`repro.positions.views`).

Model-path caveat (transformers 5.x): with ``attention_mask=None`` and no
cache, any jump in ``position_ids`` is read as the start of a new packed
document and attention becomes block-diagonal. Non-contiguous positions must
be passed together with an explicit all-ones ``attention_mask`` (pinned by
``tests/positions/test_transforms.py``).

Papers' definitions versus authors' code: every transform implements its
paper's method as the paper defines it, by default. Where the authors' public
code behaves differently, that behaviour is a named option (``pose(...,
first_chunk="official")``) or a transform named ``*_official``
(:func:`longrecipe_official`), never the default; :data:`TRANSFORM_INFO` documents
each transform's parameters (:attr:`TransformInfo.params`).

Samples and sentence boundaries live in :mod:`repro.positions.sample`; metrics
and LongRecipe Fig. 2 in :mod:`repro.positions.metrics`.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

import numpy as np

from repro.positions.sample import PositionSample, _check_int, _check_rng, _check_target, _require_sentences, \
    sentence_starts_by_rule
from repro.positions.views import chunk_permutation_view, cyclic_view, dilation_view, nope_view, skip_view


# ---------------------------------------------------------------------------------------
# position transforms
# ---------------------------------------------------------------------------------------
def flt(sample: PositionSample, target: int, rng: np.random.Generator) -> np.ndarray:
    """Identity positions ``0..n-1`` (full-length training, LongRecipe §5.1 FLT; standard RoPE).

    ``rng`` is unused (kept for the uniform signature)."""
    _check_target(sample, target)
    return np.arange(sample.n, dtype=np.int64)


def pi(sample: PositionSample, target: int, rng: np.random.Generator,
       original: int | None = None) -> np.ndarray:
    """Position Interpolation (Chen et al. 2023; LongRecipe §2): fractional ids ``i * original / target``.

    A model pretrained on ``original`` tokens (default: ``n``) is extended to
    ``target`` by squeezing positions by ``target / original``. Returned as
    ``float64`` for analysis only; the model path uses identity ids with
    :func:`pi_rope_parameters` (RoPE ``linear`` scaling), which rotates by the
    same angles.
    """
    target = _check_target(sample, target)
    original = sample.n if original is None else _check_int("original", original, 1, target)
    return np.arange(sample.n, dtype=np.float64) * (original / target)


def pi_rope_parameters(target: int, original: int, rope_theta: float = 10000.0) -> dict:
    """HF ``rope_parameters`` that implement PI from ``original`` to ``target`` tokens."""
    _check_int("original", original, 1)
    _check_int("target", target, original)
    return {"rope_type": "linear", "factor": target / original, "rope_theta": rope_theta}


POSE_FIRST_CHUNK: tuple[str, ...] = ("paper", "official")
"""Laws of PoSE's first-chunk length (``first_chunk`` of :func:`pose`): ``paper`` (default) or ``official``."""


def pose(sample: PositionSample, target: int, rng: np.random.Generator,
         num_chunks: int | None = None, first_chunk: str = "paper") -> np.ndarray:
    """PoSE (Zhu et al. 2023, §3.2, Eq. 3-4; LongRecipe §5.1): chunks with skipping biases.

    ``first_chunk="paper"`` (default; the method as the PoSE paper's appendix defines it):
    the window of ``n`` tokens is cut into ``num_chunks`` non-empty chunks at cut
    points drawn uniformly without replacement from ``1..n-1``, so with two chunks
    the first chunk's length is ``U{1, ..., n-1}`` (chunk lengths re-sampled per
    example). ``first_chunk="official"``: the authors' public training code,
    where the first of the two chunks has length ``U{1, ..., floor((n+1)/2)}``
    (mean about ``n/4`` instead of ``n/2``), so more tokens sit in the shifted second
    chunk; defined for two chunks only (``num_chunks`` None or 2).

    Chunk ``i`` gets the skipping bias ``u_i``: ``u_0 = 0`` and
    ``u_i ~ U{u_{i-1}, ..., target - n}``, so biases are non-decreasing (chunks
    never overlap) and the last position ``n - 1 + u_{N-1} <= target - 1``. Within
    a chunk positions are contiguous. ``num_chunks=None`` means PoSE's default of
    two chunks (one for a 1-token sample).
    """
    target = _check_target(sample, target)
    n = sample.n
    if first_chunk not in POSE_FIRST_CHUNK:
        raise ValueError(f"first_chunk={first_chunk!r}; allowed: {', '.join(repr(c) for c in POSE_FIRST_CHUNK)}")
    if first_chunk == "official" and num_chunks not in (None, 2):
        raise ValueError(f"num_chunks={num_chunks!r} with first_chunk='official'; allowed: num_chunks=None or 2 "
                         "(the official code draws the first of two chunks)")
    k = min(2, n) if num_chunks is None else _check_int("num_chunks", num_chunks, 1, n)
    if k == 1:
        cuts = np.zeros(0, np.int64)
    elif first_chunk == "official":
        cuts = np.array([rng.integers(1, (n + 1) // 2, endpoint=True)], dtype=np.int64)
    else:
        cuts = np.sort(rng.choice(np.arange(1, n), size=k - 1, replace=False))
    bias = np.zeros(k, dtype=np.int64)
    for i in range(1, k):
        bias[i] = rng.integers(bias[i - 1], target - n, endpoint=True)
    chunk_of = np.zeros(n, dtype=np.int64)
    if k > 1:
        chunk_of[cuts] = 1
        chunk_of = np.cumsum(chunk_of)
    return np.arange(n, dtype=np.int64) + bias[chunk_of]


def rpes(sample: PositionSample, target: int, rng: np.random.Generator) -> np.ndarray:
    """Randomized positional encodings (Ruoss et al. 2023; LongRecipe §5.1 RPES).

    A uniformly random ordered subset of size ``n`` of ``{0, ..., target - 1}``.
    """
    target = _check_target(sample, target)
    return np.sort(rng.choice(target, size=sample.n, replace=False)).astype(np.int64)


def _place_sentences(sample: PositionSample, gaps: np.ndarray, starts: Any = None) -> np.ndarray:
    """Positions when sentence ``k >= 1`` starts ``gaps[k-1]`` after the end of sentence ``k-1``
    (sentences from ``starts``, default ``sample.sentence_starts``)."""
    starts = np.asarray(sample.sentence_starts if starts is None else starts, dtype=np.int64)
    offset = np.zeros(len(starts), dtype=np.int64)
    offset[1:] = np.cumsum(gaps)
    lengths = np.diff(np.append(starts, sample.n))
    return np.arange(sample.n, dtype=np.int64) + np.repeat(offset, lengths)


def longrecipe_eq7(sample: PositionSample, target: int, rng: np.random.Generator,
                   max_gap: int | None = None, literal_plus_one: bool = False,
                   max_tries: int = 10_000) -> np.ndarray:
    """LongRecipe position index transformation, Eq. 5-7 reading (§4.2).

    The sample is split into sentences (``sample.sentence_starts``); the first
    sentence starts at 0, tokens inside a sentence are consecutive, and
    sentence ``s_i`` (``i >= 2``) starts at ``pos(s_{i-1}) + |s_{i-1}| + g(s_i)``
    with gaps ``g`` i.i.d. uniform on ``{0, ..., M}`` (``M = max_gap``),
    re-drawn per example. "Repeat until the last position does not exceed the
    target" is implemented as rejection: the gaps are re-drawn until the last
    position is ``<= target - 1`` (i.e. the gaps are i.i.d. conditioned on
    fitting).

    ``max_gap=None`` picks ``M = floor(2 (target - n) / (N - 1))`` so that the
    mean total skip equals the free room ``target - n`` (about half the draws
    fit; the accepted ones fill the window). Eq. 7 as printed adds ``+ 1``,
    which would skip at least one index even for ``M = 0``, contradicting the
    text ("When M = 0 ... continuous"); we follow the text, and
    ``literal_plus_one=True`` gives the printed formula.

    Differs from :func:`longrecipe_alg1` in the gap law: here gaps are
    independent (may be 0, so neighbouring sentences may merge into one
    continuous segment) and their sum is random; in Algorithm 1 the gaps are
    the spacings of ``N - 1`` distinct slots (each >= 1, jointly uniform, their
    sum bounded by construction, no rejection).
    """
    target = _check_target(sample, target)
    starts = _require_sentences(sample)
    gaps_n = len(starts) - 1
    room = target - sample.n - (gaps_n if literal_plus_one else 0)
    if room < 0:
        raise ValueError(f"literal_plus_one needs target >= n + N - 1 = {target - room}; got target={target}")
    if gaps_n == 0:
        return np.arange(sample.n, dtype=np.int64)
    m = (2 * room) // gaps_n if max_gap is None else _check_int("max_gap", max_gap, 0)
    _check_int("max_tries", max_tries, 1)
    for _ in range(max_tries):
        gaps = rng.integers(0, m, size=gaps_n, endpoint=True)
        if gaps.sum() <= room:
            break
    else:
        raise ValueError(f"max_gap={m} with {gaps_n} gaps never fits target={target} in {max_tries} "
                         f"draws; allowed: max_gap about <= {max(1, 2 * room // gaps_n)}")
    if literal_plus_one:
        gaps = gaps + 1
    return _place_sentences(sample, gaps)


def _alg1_slots(num_sentences: int, free: int, rng: np.random.Generator) -> np.ndarray:
    """Sorted slots (number of empty cells before each sentence) for Algorithm 1."""
    if num_sentences - 1 > free:
        raise ValueError(f"Algorithm 1 needs N - 1 = {num_sentences - 1} distinct slots among the "
                         f"target - n = {free} free cells; allowed N - 1 <= target - n")
    slots = np.zeros(num_sentences, dtype=np.int64)
    if num_sentences > 1:
        slots[1:] = np.sort(rng.choice(free, size=num_sentences - 1, replace=False)) + 1
    return slots


def longrecipe_alg1(sample: PositionSample, target: int, rng: np.random.Generator) -> np.ndarray:
    """LongRecipe position index transformation, Algorithm 1 reading (Appendix D).

    Algorithm 1: "initialise a list of the target's length with zeros, select
    N - 1 distinct positions, insert the first sentence at 0 and the others at
    the selected positions, flatten; the indices of non-zero elements are the
    new positions". We read the list as the target window: ``target - n`` empty
    cells (so the ``n`` tokens fit inside ``target``; a literal list of
    ``target`` zeros plus insertions would overshoot by ``n``). ``N - 1``
    distinct slots ``q_1 < ... < q_{N-1}`` are drawn uniformly from
    ``{1, ..., target - n}``; sentence ``k`` is inserted after ``q_k`` empty
    cells (``q_0 = 0``), so its first position is ``q_k + sum_{j<k} |s_j|``.

    Versus :func:`longrecipe_eq7`: gaps ``q_k - q_{k-1}`` are always >= 1
    (sentences never merge), they are the spacings of a uniform random subset
    rather than i.i.d., and the last position never exceeds the target by
    construction (no rejection, no ``M``). Requires ``N - 1 <= target - n``.
    Consequence of gaps >= 1: position ``|s_1|`` (right after the first
    sentence) is never used; every other position and every distance is.
    """
    target = _check_target(sample, target)
    starts = _require_sentences(sample)
    slots = _alg1_slots(len(starts), target - sample.n, rng)
    return _place_sentences(sample, np.diff(slots))


def longrecipe_official(sample: PositionSample, target: int, rng: np.random.Generator,
                        split: str = "official") -> np.ndarray:
    """LongRecipe position index transformation as the authors' public code does it (a named option).

    Not the default LongRecipe: ``longrecipe`` is Algorithm 1 as the paper defines
    it (:func:`longrecipe_alg1`); this reading reproduces three behaviours of the
    official repository that the paper does not describe, to compare them:

    1. **Sentence ends** (``split="official"``): a token whose text equals one of
       :data:`~repro.positions.sample.OFFICIAL_SENTENCE_ENDS` (``.``, ``\\n``, ``?``,
       ``!``, ``.\\n``) ends its sentence; computed from ``sample.token_texts``.
       ``split="paper"`` uses ``sample.sentence_starts`` instead (our Alg. 1 rule:
       a token *containing* ``. ! ? \\n``), to separate this effect from the others.
    2. **Gaps may be 0**: the ``N`` sentences and ``target - n`` empty cells form a
       list of ``target - n + N`` cells; ``N`` distinct cells are drawn uniformly,
       sentence 0 goes to cell 0 and sentence ``k >= 1`` to the ``(k+1)``-th smallest
       drawn cell (the smallest draw is discarded).
       Two sentences in neighbouring cells are contiguous (gap 0), so they merge
       into one segment; the last position never exceeds ``target - 1``.
    3. **Identity prefix**: the first ``r ~ U{1, ..., floor((n+1)/2)}`` tokens get
       positions ``0..r-1`` (the same law as the official PoSE code's first chunk);
       the others keep their position from step 2, which is at least their index,
       so positions still increase strictly. The prefix may end inside a sentence,
       so a segment may also break there.
    """
    target = _check_target(sample, target)
    starts = np.asarray(sentence_starts_by_rule(sample, split), dtype=np.int64)
    n, count = sample.n, len(starts)
    prefix = int(rng.integers(1, (n + 1) // 2, endpoint=True))
    cells = np.sort(rng.choice(target - n + count, size=count, replace=False))
    cells[0] = 0
    positions = _place_sentences(sample, np.diff(cells) - 1, starts)
    positions[:prefix] = np.arange(prefix, dtype=np.int64)
    return positions


def longrecipe_alg1_trace(sample: PositionSample, target: int, rng: np.random.Generator) -> dict:
    """Algorithm 1 step by step, for the worked example (LR-Alg1).

    Returns ``sentence_starts``, ``sentence_lengths``, ``slots`` (empty cells
    before each sentence), ``cells`` (length ``target``: ``-1`` empty, else the
    sentence index occupying the cell) and ``positions`` (same draw as
    :func:`longrecipe_alg1` with an identically seeded generator).
    """
    target = _check_target(sample, target)
    starts = np.asarray(_require_sentences(sample), dtype=np.int64)
    lengths = sample.sentence_lengths
    slots = _alg1_slots(len(starts), target - sample.n, rng)
    positions = _place_sentences(sample, np.diff(slots))
    cells = np.full(target, -1, dtype=np.int64)
    cells[positions] = np.repeat(np.arange(len(starts)), lengths)
    return {"sentence_starts": starts, "sentence_lengths": lengths, "slots": slots,
            "cells": cells, "positions": positions, "target": target}


# ---------------------------------------------------------------------------------------
# registry
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TransformInfo:
    """Registry entry of one transform."""

    name: str
    """Name used in method configs."""
    fn: Callable
    """The transform, ``fn(sample, target, rng, **params)``."""
    kind: str
    """``positions`` (int64 ids), ``rope_scaling`` (PI: float ids, model uses linear RoPE) or ``view``."""
    covers_target: bool
    """Whether repeated draws cover every position and distance of the target window."""
    order_preserving: bool
    """Whether positions increase strictly with the token index."""
    paper: str
    """Section of the paper it follows."""
    params: Mapping[str, str] = field(default_factory=dict)
    """Each keyword parameter of ``fn`` with its allowed values and default (the keys are exactly
    :func:`transform_params`'s)."""


_POSE_PARAMS = {
    "num_chunks": "number of chunks, an integer 1..n; default None (two chunks, one for a 1-token sample)",
    "first_chunk": "law of the first chunk's length: 'paper' (default, U{1..n-1}, PoSE's appendix) or 'official' "
                   "(U{1..floor((n+1)/2)}, the authors' code; two chunks only)",
}
_EQ7_PARAMS = {
    "max_gap": "M, the largest gap, an integer >= 0; default None (2 (target - n) / (N - 1))",
    "literal_plus_one": "add Eq. 7's printed + 1 to every gap; default False (the text: M = 0 is continuous)",
    "max_tries": "rejection draws before giving up, an integer >= 1; default 10000",
}
_OFFICIAL_PARAMS = {
    "split": "sentence ends: 'official' (default, tokens equal to . \\n ? ! .\\n, from sample.token_texts) or "
             "'paper' (sample.sentence_starts: tokens containing . ! ? \\n)",
}

TRANSFORM_INFO: dict[str, TransformInfo] = {t.name: t for t in [
    TransformInfo("flt", flt, "positions", False, True, "LongRecipe §5.1 (FLT)"),
    TransformInfo("identity", flt, "positions", False, True, "standard RoPE indices (alias of flt)"),
    TransformInfo("pi", pi, "rope_scaling", False, True, "Chen et al. 2023; LongRecipe §2",
                  {"original": "pretraining window, an integer 1..target; default None (n)"}),
    TransformInfo("pose", pose, "positions", True, True, "Zhu et al. 2023 §3.2; LongRecipe §5.1", _POSE_PARAMS),
    TransformInfo("rpes", rpes, "positions", True, True, "Ruoss et al. 2023; LongRecipe §5.1"),
    TransformInfo("longrecipe_eq7", longrecipe_eq7, "positions", True, True, "LongRecipe §4.2 Eq. 5-7", _EQ7_PARAMS),
    TransformInfo("longrecipe_alg1", longrecipe_alg1, "positions", False, True, "LongRecipe App. D Alg. 1"),
    TransformInfo("longrecipe", longrecipe_alg1, "positions", False, True,
                  "LongRecipe App. D Alg. 1 (alias of longrecipe_alg1)"),
    TransformInfo("longrecipe_official", longrecipe_official, "positions", True, True,
                  "LongRecipe official code (identity prefix, gaps >= 0, exact sentence-end tokens)",
                  _OFFICIAL_PARAMS),
    TransformInfo("skip", skip_view, "view", False, True, "RoPE-perturbed self-distillation §2.2 Eq. 4",
                  {"max_skip": "Y, the largest skip, an integer >= 1; default None (n)"}),
    TransformInfo("cyclic", cyclic_view, "view", False, False, "RoPE-perturbed self-distillation §2.4 Eq. 9"),
    TransformInfo("dilation", dilation_view, "view", False, False, "RoPE-perturbed self-distillation §3.6",
                  {"min_factor": "smallest dilation factor, > 0; default 0.5",
                   "max_factor": "largest dilation factor, >= min_factor; default 2.0"}),
    TransformInfo("chunk_permutation", chunk_permutation_view, "view", False, False,
                  "RoPE-perturbed self-distillation §3.6",
                  {"num_chunks": "number of index blocks, an integer 1..n; default 4"}),
    TransformInfo("nope", nope_view, "view", False, False, "RoPE-perturbed self-distillation §3.6"),
]}
"""Every transform by name. ``dilation`` preserves order only weakly (ties for f < 1).
``longrecipe_official`` is the authors' code's reading of LongRecipe (a named option; the
default ``longrecipe`` is the paper's Algorithm 1); PoSE's code behaviour is ``pose``'s
``first_chunk="official"``.
``longrecipe_alg1`` covers every relative distance but not every position: the
cell right after the first sentence (position ``|s_1|``) is never used, because
distinct slots leave at least one empty cell before every later sentence."""

TRANSFORMS: dict[str, Callable] = {name: t.fn for name, t in TRANSFORM_INFO.items()}
"""Name -> transform function, for method configs."""


def get_transform(name: str) -> Callable:
    """The transform registered as ``name``; ValueError listing the allowed names otherwise."""
    if name not in TRANSFORMS:
        raise ValueError(f"unknown position transform {name!r}; allowed: {sorted(TRANSFORMS)}")
    return TRANSFORMS[name]


def transform_params(name: str) -> dict[str, Any]:
    """The keyword parameters ``name`` accepts, with their defaults."""
    sig = inspect.signature(get_transform(name))
    return {p.name: p.default for p in list(sig.parameters.values())[3:]}


def apply_transform(name: str, sample: PositionSample, target: int, rng: np.random.Generator,
                    **params: Any):
    """Run transform ``name``; unknown parameter names raise ValueError listing the allowed ones."""
    fn = get_transform(name)
    _check_rng(rng)
    allowed = transform_params(name)
    bad = sorted(set(params) - set(allowed))
    if bad:
        raise ValueError(f"transform {name!r} got unknown parameter(s) {bad}; allowed: {sorted(allowed)}")
    return fn(sample, target, rng, **params)
