"""Self-distillation views (RoPE-perturbed self-distillation §2.2, §2.4, §3.6).

Same call signature as the position transforms,
``fn(sample, target, rng, **params)``, but each returns a :class:`ViewPair`
``(standard, perturbed)``; for ``nope`` ``perturbed`` is ``None``, meaning
"apply no rotary embedding". Registered with kind ``view`` in
:data:`repro.positions.transforms.TRANSFORM_INFO`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterator

import numpy as np

from repro.positions.sample import PositionSample, _check_int, _check_target


# ---------------------------------------------------------------------------------------
# self-distillation views
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class ViewPair:
    """Standard and perturbed RoPE indices of one sample (self-distillation §2.2)."""

    standard: np.ndarray
    """Standard view ``r_i = i`` (Eq. 2), ``np.int64``."""
    perturbed: np.ndarray | None
    """Perturbed view, ``np.int64``; ``None`` means no rotary embedding at all (NoPE)."""
    info: dict = field(default_factory=dict)
    """The sampled parameters (e.g. ``s``, ``y``; ``u``; ``factor``; ``order``)."""

    def __iter__(self) -> Iterator[np.ndarray | None]:
        yield self.standard
        yield self.perturbed


def skip_view(sample: PositionSample, target: int, rng: np.random.Generator,
              max_skip: int | None = None) -> ViewPair:
    """Skip-based shift (self-distillation §2.2, Eq. 4): ``r_i = i`` for ``i < s``, ``i + y`` after.

    ``s ~ U{0, ..., L-1}`` and ``y ~ U{1, ..., Y}`` per example with ``L = n`` and
    ``Y = max_skip`` (default ``L``, the paper's main setting; §3.6 varies it).
    ``target`` bounds the indices: requires ``n + Y <= target`` (so with the
    default ``Y = L`` pass ``target >= 2 n``). ``info`` holds ``s`` and ``y``.
    """
    target = _check_target(sample, target)
    n = sample.n
    y_max = n if max_skip is None else _check_int("max_skip", max_skip, 1)
    if n + y_max > target:
        raise ValueError(f"skip view with max_skip={y_max} reaches index n - 1 + max_skip = {n - 1 + y_max}; "
                         f"allowed: target >= n + max_skip = {n + y_max} (got target={target})")
    s = int(rng.integers(0, n))
    y = int(rng.integers(1, y_max, endpoint=True))
    std = np.arange(n, dtype=np.int64)
    return ViewPair(std, np.where(std < s, std, std + y), {"s": s, "y": y})


def cyclic_view(sample: PositionSample, target: int, rng: np.random.Generator) -> ViewPair:
    """Cyclic shift (self-distillation §2.4, Eq. 9): ``r_i = (i + u) mod L``, ``u ~ U{0..L-1}``.

    A permutation of ``0..n-1`` (not order-preserving). ``info`` holds ``u``."""
    _check_target(sample, target)
    n = sample.n
    u = int(rng.integers(0, n))
    std = np.arange(n, dtype=np.int64)
    return ViewPair(std, (std + u) % n, {"u": u})


def dilation_view(sample: PositionSample, target: int, rng: np.random.Generator,
                  min_factor: float = 0.5, max_factor: float = 2.0) -> ViewPair:
    """Random dilation (self-distillation §3.6, Table 10): ``r_i = round(f * i)``.

    ``f`` is drawn log-uniformly in ``[min_factor, max_factor]`` (default
    ``[0.5, 2]``; log-uniform so shrinking and stretching are equally likely,
    the paper only gives the range). Rounded to integers: for ``f < 1``
    neighbouring tokens may share an index (non-decreasing, not strictly).
    Requires ``round((n - 1) * max_factor) < target``. ``info`` holds ``factor``.
    """
    target = _check_target(sample, target)
    if not (0 < min_factor <= max_factor):
        raise ValueError(f"min_factor={min_factor!r}, max_factor={max_factor!r}; allowed 0 < min_factor <= max_factor")
    top = int(np.rint((sample.n - 1) * max_factor))
    if top >= target:
        raise ValueError(f"dilation by max_factor={max_factor} reaches index {top}; allowed: target > {top} "
                         f"(got target={target})")
    f = float(np.exp(rng.uniform(np.log(min_factor), np.log(max_factor))))
    std = np.arange(sample.n, dtype=np.int64)
    return ViewPair(std, np.rint(std * f).astype(np.int64), {"factor": f})


def chunk_permutation_view(sample: PositionSample, target: int, rng: np.random.Generator,
                           num_chunks: int = 4) -> ViewPair:
    """Chunked permutation of large index blocks (self-distillation §3.6, Table 10).

    The index range ``0..n-1`` is cut into ``num_chunks`` near-equal contiguous
    blocks (the paper gives no block count; default 4) and the blocks are
    re-ordered by a random permutation, drawn again until it is not the
    identity (when ``num_chunks > 1``). Tokens keep contiguous indices inside
    each block; the result is a permutation of ``0..n-1``. ``info`` holds
    ``order`` (block ids in token order).
    """
    _check_target(sample, target)
    n = sample.n
    k = _check_int("num_chunks", num_chunks, 1, n)
    blocks = np.array_split(np.arange(n, dtype=np.int64), k)
    order = np.arange(k)
    if k > 1:
        while np.array_equal(order, np.arange(k)):
            order = rng.permutation(k)
    return ViewPair(np.arange(n, dtype=np.int64), np.concatenate([blocks[j] for j in order]),
                    {"order": order.tolist()})


def nope_view(sample: PositionSample, target: int, rng: np.random.Generator) -> ViewPair:
    """NoPE perturbed view (self-distillation §3.6, Table 10): no rotary embedding.

    ``perturbed`` is ``None``; the model path must skip RoPE in that pass."""
    _check_target(sample, target)
    return ViewPair(np.arange(sample.n, dtype=np.int64), None, {})
