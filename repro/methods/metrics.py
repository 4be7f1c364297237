"""Training metrics of an objective: the teacher-forced exact match of answers (``train_em``) and
:func:`finish_metrics`, the ``(loss, metrics)`` pair a method's ``loss`` hook returns
(:class:`repro.methods.protocol.MethodHooks`)."""

from __future__ import annotations

import torch


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


def finish_metrics(loss: torch.Tensor, metrics: dict[str, float], hidden: torch.Tensor | None,
                   head: torch.Tensor | None, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """``(loss, metrics)`` of an objective, with ``loss`` and (when the batch has answers and the model a plain
    head) the teacher-forced ``train_em`` added to ``metrics``."""
    if "answer_group" in batch and head is not None and hidden is not None:
        with torch.no_grad():
            hit, total = answer_exact_match_hidden(hidden.detach(), head.detach(), batch["input_ids"],
                                                   batch["answer_group"])
        if total:
            metrics["train_em"] = hit / total
    metrics["loss"] = float(loss.detach())
    return loss, metrics
