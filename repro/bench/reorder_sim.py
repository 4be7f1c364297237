"""A simulator of data-parallel gradient accumulation: what ordering micro-batches by sum of squared document
lengths (ProLong App. A.3, :mod:`repro.data.balance`) saves in step time.

Model. A step's micro-batches, in a given order, are dealt to ``k`` workers round-robin (as a distributed sampler
over the accumulation sequence: worker ``w`` gets micro-batches ``w, w + k, w + 2k, ...``); in accumulation round
``r`` every worker processes its ``r``-th micro-batch, then all synchronise (FSDP reduce-scatters every micro-batch's
gradient), so a round lasts as long as its slowest micro-batch and the step ``sum_r max_w cost``. A worker with no
micro-batch left in the last round costs 0. The cost of a micro-batch is :class:`CostModel`'s
``a + b * sum(len^2) + c * tokens``: a fixed part, attention with a variable-length kernel (quadratic per document)
and the linear layers (per token, padding included). ``sum(len^2)`` leaves padding out, as the sort key does
(:func:`repro.data.balance.sum_sq_lengths`); the kernel the costs are fitted with, ``sdpa_varlen``
(:mod:`repro.attention.doc_masked`), computes a row's padding tail as one more document (as flash-attn's varlen
does with boundaries read from restarting positions), so a padded row costs ``b * pad^2`` more than modelled. The
fit's probe rows have no padding; in :func:`repro.bench.reorder.realistic_steps` (rows of 2048, seed 0) the tails
add 4% to the steps' total ``sum(len^2)`` (2% in the median padded row), which the model leaves out.

Orders (:data:`ORDERS`): ``unsorted`` (the data's order), ``sorted`` (the whole step sorted by ``-sum(len^2)``,
then dealt: the round-robin deal of the brief's model) and ``sorted_per_worker`` (dealt first, then each worker
sorts its own micro-batches: ProLong's code, where each device's data loader sorts its own block of the step).

Under DDP's ``no_sync`` (gradients reduced once per step) only each worker's total would count, and the order
within a worker would not matter; this model is the per-micro-batch synchronisation of FSDP/ZeRO-3.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Mapping, Sequence

import numpy as np

from repro.data.balance import sum_sq_lengths, tokens

ORDERS: tuple[str, ...] = ("unsorted", "sorted", "sorted_per_worker")
"""How a step's micro-batches are ordered before (or after) being dealt to the workers."""


@dataclass(frozen=True)
class CostModel:
    """Seconds of one micro-batch's forward + backward: ``a + b * sum_sq + c * tokens`` (``sum_sq`` without
    padding: the module docstring says what ``sdpa_varlen``'s padding document adds)."""

    a: float = 0.0
    """Fixed seconds per micro-batch (launches, the optimizer's share, synchronisation)."""
    b: float = 0.0
    """Seconds per unit of sum over documents of (length)^2 (attention with a variable-length kernel)."""
    c: float = 0.0
    """Seconds per token (the linear layers, run on every position)."""

    def __call__(self, sum_sq: float, n_tokens: float) -> float:
        return self.a + self.b * sum_sq + self.c * n_tokens

    def of(self, batch: Mapping, pad_id: int | None = None) -> float:
        """The cost of a micro-batch (``input_ids``, ``weights``, optional ``doc_ids``; :mod:`repro.data.balance`)."""
        return self(sum_sq_lengths(batch, pad_id), tokens(batch))

    @classmethod
    def attention_share(cls, seq_len: int, share: float, per_token: float = 1.0) -> "CostModel":
        """A model where a row of one ``seq_len``-token document spends ``share`` of its time in attention
        (``b * seq_len^2 = share / (1 - share) * c * seq_len``), ``c = per_token``, ``a = 0``. An 8B Llama at 64K
        with flash attention is near ``share = 0.5`` (attention's forward + backward ~ 12 L d FLOPs per causal
        pair against ~ 6 N per token)."""
        if not 0 <= share < 1 or seq_len < 1:
            raise ValueError(f"share={share}, seq_len={seq_len}; allowed: 0 <= share < 1, seq_len >= 1")
        return cls(0.0, share / (1 - share) * per_token / seq_len, per_token)


def deal(keys: Sequence[float], workers: int, order: str = "unsorted") -> list[list[int]]:
    """Per worker, the indices of the micro-batches it processes, in its order, from their sort ``keys``
    (sum of squared document lengths) and an ``order`` of :data:`ORDERS`."""
    if workers < 1:
        raise ValueError(f"workers={workers}; allowed: >= 1")
    if order not in ORDERS:
        raise ValueError(f"order={order!r}; allowed: {', '.join(ORDERS)}")
    idx = list(range(len(keys)))
    if order == "sorted":
        idx = sorted(idx, key=lambda i: -keys[i])
    dealt = [idx[w::workers] for w in range(workers)]
    if order == "sorted_per_worker":
        dealt = [sorted(d, key=lambda i: -keys[i]) for d in dealt]
    return dealt


def step_time(costs: Sequence[float], dealt: Sequence[Sequence[int]]) -> float:
    """``sum over rounds of max over workers`` of the cost of the micro-batch each worker runs in that round."""
    rounds = max((len(d) for d in dealt), default=0)
    return float(sum(max(costs[d[r]] if r < len(d) else 0.0 for d in dealt) for r in range(rounds)))


def simulate(steps: Sequence[Sequence[Mapping]], workers: int, cost: CostModel, pad_id: int | None = None,
             orders: Sequence[str] = ORDERS) -> dict:
    """Simulated step times of ``steps`` (each a list of micro-batches) on ``workers`` workers, per order.

    Returns ``{"workers", "steps", "micro_batches", order: {"seconds": [per step], "total": sum, "ratio": total /
    unsorted's total (when unsorted is simulated)}, "ideal": {"total": sum of each step's cost / workers, "ratio"}}``;
    ``ideal`` is perfect balance, a bound no order beats."""
    keys = [[sum_sq_lengths(m, pad_id) for m in step] for step in steps]
    costs = [[cost(k, tokens(m)) for k, m in zip(ks, step)] for ks, step in zip(keys, steps)]
    out: dict = {"workers": workers, "steps": len(steps), "micro_batches": [len(s) for s in steps]}
    for order in orders:
        secs = [step_time(c, deal(k, workers, order)) for k, c in zip(keys, costs)]
        out[order] = {"seconds": secs, "total": float(sum(secs))}
    out["ideal"] = {"total": float(sum(sum(c) / workers for c in costs))}
    if "unsorted" in out and out["unsorted"]["total"] > 0:
        for name in (*orders, "ideal"):
            out[name]["ratio"] = out[name]["total"] / out["unsorted"]["total"]
    return out


def fit_cost_model(sum_sq: Sequence[float], n_tokens: Sequence[float], seconds: Sequence[float]) -> CostModel:
    """Least-squares ``a, b, c >= 0`` of ``seconds ~ a + b * sum_sq + c * n_tokens`` (non-negative: the best fit
    over the subsets of the three terms whose unconstrained fit has no negative coefficient). Timings with varying
    token counts are needed to tell ``a`` from ``c``."""
    x = np.column_stack([np.ones(len(seconds)), np.asarray(sum_sq, float), np.asarray(n_tokens, float)])
    y = np.asarray(seconds, float)
    if len(y) < 1 or x.shape[0] != len(y):
        raise ValueError(f"{len(sum_sq)}, {len(n_tokens)}, {len(seconds)} values; allowed: the same count >= 1")
    scale = np.maximum(np.abs(x).max(0), 1e-30)
    best, best_err = np.zeros(3), float(np.sum(y ** 2))
    for n in (1, 2, 3):
        for cols in itertools.combinations(range(3), n):
            coef, *_ = np.linalg.lstsq(x[:, cols] / scale[list(cols)], y, rcond=None)
            if (coef < 0).any():
                continue
            err = float(np.sum((x[:, cols] / scale[list(cols)] @ coef - y) ** 2))
            if err < best_err:
                best, best_err = np.zeros(3), err
                best[list(cols)] = coef / scale[list(cols)]
    return CostModel(*map(float, best))
