"""The LM loss every objective shares, and its training metrics.

- :func:`lm_loss`: one forward of a batch and its weighted CLM loss, from the final hidden states and the plain head
  (:func:`repro.loss.chunked_clm_loss`, never the batch's logits) or from the model's logits
  (:func:`repro.loss.weighted_clm_loss`, models without a plain head); :func:`clm_from_hidden` the same loss from
  hidden states a method computed itself; :func:`autocast`, :func:`head_dtype`: the bf16 switch of both;
- :func:`answer_exact_match` (``train_em``, teacher-forced) and :func:`finish_metrics`, the ``(loss, metrics)`` pair a
  method's ``loss`` returns (:class:`repro.methods.protocol.MethodHooks`).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.models import forward, forward_hidden, plain_head_weight


def device_type(t: torch.Tensor) -> str:
    """The autocast device type of a tensor: ``cpu`` or ``cuda``."""
    return "cpu" if t.device.type == "cpu" else "cuda"


def autocast(like: torch.Tensor, bf16: bool):
    """``torch.autocast`` to bf16 on ``like``'s device when ``bf16`` (a disabled autocast otherwise)."""
    return torch.autocast(device_type(like), dtype=torch.bfloat16, enabled=bf16)


def head_dtype(bf16: bool) -> torch.dtype | None:
    """The dtype of the chunked head's matmuls: bf16 under ``bf16``, else None (the hidden states')."""
    return torch.bfloat16 if bf16 else None


@dataclass(frozen=True)
class LMPass:
    """The output of one forward: ``hidden`` (B, T, H) and ``head`` (V, H) on the chunked path, ``logits`` (B, T, V)
    otherwise (the unused ones None)."""

    hidden: torch.Tensor | None = None
    """Final hidden states (chunked path)."""
    head: torch.Tensor | None = None
    """The plain head's weight (:func:`repro.models.plain_head_weight`; chunked path)."""
    logits: torch.Tensor | None = None
    """The model's logits (models without a plain head, or ``chunked=False``)."""


def lm_loss(model, batch: dict[str, torch.Tensor], bf16: bool = False, chunked: bool = True, chunk: int = 2048,
            inputs_embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, LMPass]:
    """The batch's weighted CLM loss (``input_ids``, ``weights``; optional ``position_ids``, ``doc_ids``) and the
    pass it came from. The forward runs under :func:`autocast`, the loss outside it. ``chunked`` (default): from
    the final hidden states and the plain head, ``chunk`` targets of logits at a time, when the model has one;
    otherwise from the model's logits. ``inputs_embeds``: run the model on these (B, T, H) instead of its own
    embedding lookup."""
    ids, w = batch["input_ids"], batch["weights"]
    pos, docs = batch.get("position_ids"), batch.get("doc_ids")
    extra = {} if inputs_embeds is None else {"inputs_embeds": inputs_embeds}
    head = plain_head_weight(model) if chunked else None
    with autocast(ids, bf16):
        if head is not None:
            out = LMPass(hidden=forward_hidden(model, ids, pos, docs, **extra), head=head)
        else:
            out = LMPass(logits=forward(model, ids, pos, docs, **extra).logits)
    if head is not None:
        return chunked_clm_loss(out.hidden, head, ids, w, chunk, head_dtype(bf16)), out
    return weighted_clm_loss(out.logits, ids, w)[0], out


def clm_from_hidden(model, hidden: torch.Tensor, input_ids: torch.Tensor, weights: torch.Tensor,
                    head: torch.Tensor | None, bf16: bool, chunk: int = 2048) -> torch.Tensor:
    """:func:`lm_loss`'s loss from final hidden states a method computed itself: chunked through ``head`` when given,
    else from the model's output embeddings applied to ``hidden``."""
    if head is not None:
        return chunked_clm_loss(hidden, head, input_ids, weights, chunk, head_dtype(bf16))
    return weighted_clm_loss(model.get_output_embeddings()(hidden), input_ids, weights)[0]


def _whole_answers(correct: torch.Tensor, groups: torch.Tensor) -> tuple[int, int]:
    """(answers whose every token is correct, answers) from per-token ``correct`` and answer ``groups`` (>= 0)."""
    n = int(groups.max()) + 1
    wrong = torch.zeros(n, dtype=torch.long, device=groups.device).index_add_(0, groups, (~correct).long())
    present = torch.zeros(n, dtype=torch.long, device=groups.device).index_add_(0, groups, torch.ones_like(groups))
    return int(((wrong == 0) & (present > 0)).sum()), int((present > 0).sum())


def answer_exact_match(logits: torch.Tensor, input_ids: torch.Tensor, answer_group: torch.Tensor) -> tuple[int, int]:
    """Teacher-forced exact match of answers: (answers fully correct, answers)."""
    groups = answer_group[:, 1:]
    sel = groups >= 0
    if not sel.any():
        return 0, 0
    return _whole_answers(logits[:, :-1].argmax(-1)[sel] == input_ids[:, 1:][sel], groups[sel])


def answer_exact_match_hidden(hidden: torch.Tensor, head: torch.Tensor, input_ids: torch.Tensor,
                              answer_group: torch.Tensor) -> tuple[int, int]:
    """:func:`answer_exact_match` from final hidden states: logits only at the answer tokens."""
    groups = answer_group[:, 1:]
    sel = groups >= 0
    if not sel.any():
        return 0, 0
    pred = (hidden[:, :-1][sel].to(head.dtype) @ head.T).argmax(-1)
    return _whole_answers(pred == input_ids[:, 1:][sel], groups[sel])


def finish_metrics(loss: torch.Tensor, metrics: dict[str, float], out: LMPass,
                   batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """``(loss, metrics)`` of an objective, with ``loss`` and (when the batch has answers) the teacher-forced
    ``train_em`` of the pass ``out`` added to ``metrics``."""
    if "answer_group" in batch and (out.logits is not None or (out.hidden is not None and out.head is not None)):
        with torch.no_grad():
            if out.logits is not None:
                hit, total = answer_exact_match(out.logits.detach(), batch["input_ids"], batch["answer_group"])
            else:
                hit, total = answer_exact_match_hidden(out.hidden.detach(), out.head.detach(), batch["input_ids"],
                                                       batch["answer_group"])
        if total:
            metrics["train_em"] = hit / total
    metrics["loss"] = float(loss.detach())
    return loss, metrics
