"""One batch's default training objective: forward, weighted CLM loss and the step's metrics (:func:`clm_step`)."""

from __future__ import annotations

import torch

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.methods.metrics import answer_exact_match, answer_exact_match_hidden
from repro.models import forward, forward_hidden, plain_head_weight


def clm_step(model, batch: dict[str, torch.Tensor], bf16: bool, chunked: bool = True,
             chunk: int = 2048) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward + weighted CLM loss + training metrics for one batch.

    ``chunked`` (default) computes the loss with :func:`repro.loss.chunked_clm_loss` from the final
    hidden states, for models whose head is a plain matrix (:func:`repro.models.plain_head_weight`);
    otherwise, or with ``chunked=False``, from the model's logits (:func:`weighted_clm_loss`).
    """
    device = "cpu" if batch["input_ids"].device.type == "cpu" else "cuda"
    head = plain_head_weight(model) if chunked else None
    metrics: dict[str, float] = {}
    if head is not None:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            hidden = forward_hidden(model, batch["input_ids"], batch["position_ids"], batch.get("doc_ids"))
        loss = chunked_clm_loss(hidden, head, batch["input_ids"], batch["weights"], chunk,
                                torch.bfloat16 if bf16 else None)
        if "answer_group" in batch:
            with torch.no_grad():
                hit, total = answer_exact_match_hidden(hidden.detach(), head.detach(), batch["input_ids"],
                                                       batch["answer_group"])
            if total:
                metrics["train_em"] = hit / total
    else:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            out = forward(model, batch["input_ids"], batch["position_ids"], batch.get("doc_ids"))
        loss, _ = weighted_clm_loss(out.logits, batch["input_ids"], batch["weights"])
        if "answer_group" in batch:
            hit, total = answer_exact_match(out.logits.detach(), batch["input_ids"], batch["answer_group"])
            if total:
                metrics["train_em"] = hit / total
    metrics["loss"] = float(loss.detach())
    return loss, metrics
