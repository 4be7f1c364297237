"""One batch's default training objective: forward, weighted CLM loss and the step's metrics (:func:`clm_step`)."""

from __future__ import annotations

import torch

from repro.methods.metrics import finish_metrics, lm_loss


def clm_step(model, batch: dict[str, torch.Tensor], bf16: bool, chunked: bool = True,
             chunk: int = 2048) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward + weighted CLM loss + training metrics for one batch (:func:`repro.methods.metrics.lm_loss`).

    ``chunked`` (default) computes the loss with :func:`repro.loss.chunked_clm_loss` from the final
    hidden states, for models whose head is a plain matrix (:func:`repro.models.plain_head_weight`);
    otherwise, or with ``chunked=False``, from the model's logits (:func:`repro.loss.weighted_clm_loss`).
    """
    loss, out = lm_loss(model, batch, bf16, chunked, chunk)
    return finish_metrics(loss, {}, out, batch)
