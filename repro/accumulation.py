"""Gradient accumulation with ProLong's token-averaged loss (ProLong App. A.3).

A step's batch is split into micro-batches of rows (:func:`micro_batches`), each forwarded and backwarded on its
own. The step's loss is ProLong's "average over all valid training tokens" of the whole step, not the mean of the
micro-batches' means: with ``W_i`` the valid target weight of micro-batch ``i`` (:func:`target_weight`, the sum of
``weights[:, 1:]``: what :func:`repro.loss.weighted_clm_loss` divides by) and ``W = sum_i W_i``, micro-batch ``i``
returns its own token mean ``L_i = S_i / W_i`` and is backwarded with the scale ``W_i / W``
(:func:`accumulation_scales`), so the accumulated gradient is that of ``sum_i S_i / W``: the gradient of the whole
batch in one pass (tested in float64). The conventional average (scale ``1 / n``) weighs a micro-batch of mostly
padding as much as a full one.

Data parallel: ``W`` is then the all-reduced total over every rank's micro-batches of the step;
:func:`accumulation_scales` takes it as ``total``.

``weighting="mean"`` (:data:`WEIGHTINGS`) is the conventional average instead, each of ``n`` micro-batches ``1 / n``:
what the CDT authors' trainer does (DeepSpeed's loss scaling by the accumulation steps), offered for
:class:`repro.methods.cdt.CDTSpec`'s ``authors_accumulation``.
"""

from __future__ import annotations

from typing import Sequence

import torch


def micro_batches(batch: dict[str, torch.Tensor], size: int) -> list[dict[str, torch.Tensor]]:
    """``batch`` split along its rows into micro-batches of ``size`` rows (the last may be smaller); ``[batch]``
    itself when ``size`` is 0 or at least the batch's rows. Every entry must be per row (leading dimension = the
    rows of ``input_ids``); a 0-d entry is shared by every micro-batch."""
    if size < 0:
        raise ValueError(f"size={size}; allowed: 0 (no split) or >= 1 rows")
    rows = int(batch["input_ids"].shape[0])
    if size == 0 or size >= rows:
        return [batch]
    for k, v in batch.items():
        if v.ndim and v.shape[0] != rows:
            raise ValueError(f"batch entry {k!r} has shape {tuple(v.shape)}; allowed: a leading dimension of "
                             f"{rows} rows (as input_ids) or a 0-d value")
    return [{k: v[s:s + size] if v.ndim else v for k, v in batch.items()} for s in range(0, rows, size)]


def target_weight(batch: dict[str, torch.Tensor]) -> float:
    """The valid target weight of a batch: ``sum(weights[:, 1:])`` (the first column predicts nothing), the
    denominator of its token-mean loss."""
    return float(batch["weights"][:, 1:].sum())


WEIGHTINGS: tuple[str, ...] = ("tokens", "mean")
"""How micro-batches are weighted: by their valid target weight (``tokens``, ProLong's token mean, the default) or
each ``1 / n`` (``mean``, the conventional average)."""


def accumulation_scales(weights: Sequence[float], total: float | None = None,
                        weighting: str = "tokens") -> list[float]:
    """The factor each micro-batch's token-mean loss is multiplied by before its backward: ``w_i / total``.

    ``weights``: the micro-batches' :func:`target_weight`. ``total``: the step's valid weight; default their sum
    (one process); in data parallel, the all-reduced sum over every rank's micro-batches of the step. A step
    without any valid weight (``total <= 0``) gets ``1 / n`` each (every token-mean loss is then 0 anyway).
    ``weighting="mean"``: ``1 / n`` each whatever the weights (``total`` unused)."""
    if weighting not in WEIGHTINGS:
        raise ValueError(f"weighting={weighting!r}; allowed: {', '.join(WEIGHTINGS)}")
    if any(w < 0 for w in weights):
        raise ValueError(f"weights={list(weights)}; allowed: values >= 0")
    if weighting == "mean":
        return [1.0 / len(weights)] * len(weights)
    total = float(sum(weights)) if total is None else float(total)
    if total <= 0:
        return [1.0 / len(weights)] * len(weights)
    return [float(w) / total for w in weights]


def answer_count(batch: dict[str, torch.Tensor]) -> int:
    """Answers whose tokens are prediction targets (the ``total`` of
    :func:`repro.methods.metrics.answer_exact_match`)."""
    if "answer_group" not in batch:
        return 0
    groups = batch["answer_group"][:, 1:]
    return int(torch.unique(groups[groups >= 0]).numel())


def merge_metrics(metrics: Sequence[dict[str, float]], scales: Sequence[float],
                  answers: Sequence[int]) -> dict[str, float]:
    """One step's metrics from its micro-batches': ``train_em`` over every answer of the step (each micro-batch's
    weighted by its ``answers``), every other value (``loss`` first) weighted by the micro-batches' ``scales``:
    ``loss`` is then the step's token-mean loss. A value only some micro-batches report is averaged over those."""
    out: dict[str, float] = {}
    keys = dict.fromkeys(k for m in metrics for k in m)
    for k in keys:
        have = [(m[k], s, a) for m, s, a in zip(metrics, scales, answers) if k in m]
        if k == "train_em":
            n = sum(a for _, _, a in have)
            if n:
                out[k] = sum(v * a for v, _, a in have) / n
            continue
        if not all(isinstance(v, (int, float)) for v, _, _ in have):
            out[k] = have[-1][0]
            continue
        weight = sum(s for _, s, _ in have)
        out[k] = sum(v * s for v, s, _ in have) / weight if weight > 0 else sum(v for v, _, _ in have) / len(have)
    return out
