"""What the trainer (:class:`repro.train.Trainer`) needs from a method: :class:`Method`, the optional hooks
(:class:`MethodHooks`, named in :data:`OPTIONAL_HOOKS`) it calls when a method defines them, and :class:`StepState`,
what an objective is told about its step (the objective keeps no state of the trainer's between steps)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import torch


@dataclass(frozen=True)
class StepState:
    """What the trainer tells a method's ``loss`` about the step it computes (passed on every call)."""

    step: int
    """The optimizer step (0-based), the one whose batch is being trained."""
    lr: float
    """The step's learning rate: the schedule's, times the method's ``lr_scale`` (CDT's Eq. 3 uses it)."""
    micro_batches: int = 1
    """Micro-batches the step's batch is split into (gradient accumulation; 1 without). Under data parallelism: this
    process's micro-batches of the step."""


class Method(Protocol):
    """What the trainer needs from a method (every member is called by :class:`repro.train.Trainer`)."""

    name: str
    """Shown in the progress bar and written to the final folder's ``train_summary.json``."""

    def batch(self, step: int) -> dict[str, np.ndarray]:
        """The batch of ``step`` (``input_ids``, ``position_ids``, ``weights``, optional ``doc_ids``,
        ``answer_group``, ``attention_mask``: 0 on padding, which objectives read instead of the pad id): a pure
        function of the step and the state, so a resumed run sees the same data."""
        ...

    def observe(self, step: int, metrics: dict[str, float]) -> None:
        """Called after each optimizer step with that step's metrics (curricula advance here)."""
        ...

    def finished(self, step: int) -> bool:
        """True to stop before ``step`` (a curriculum that decides its own length)."""
        ...

    def state_dict(self) -> dict:
        """JSON-able state saved in every checkpoint; scalar entries are logged as ``method_<key>``."""
        ...

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` on resume."""
        ...


class MethodHooks(Protocol):
    """Optional hooks of a method (:data:`OPTIONAL_HOOKS`); the trainer calls each one a method defines."""

    def lr_scale(self, step: int) -> float:
        """Multiplies the schedule's learning rate for ``step`` (default 1): a method whose phases are
        decided during training, e.g. the base curriculum's anneal."""
        ...

    micro_batch_weighting: str
    """How the trainer weights this method's micro-batches (default ``tokens``): ``tokens``, by their share of the
    step's valid weight (below); ``mean``, each ``1 / n`` of ``n`` (CDT's ``authors_accumulation``, the authors'
    trainer). :data:`repro.accumulation.WEIGHTINGS`."""

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor],
             state: StepState) -> tuple[torch.Tensor, dict[str, float]]:
        """The training objective of one batch at the step ``state`` (step, learning rate): ``(scalar loss, metrics
        with a "loss" entry)`` (default: :func:`repro.train.clm_step`, the weighted CLM loss). Objectives that are
        not plain CLM (self-distillation's KL term, LongCE, CDT) define it; those that need nothing of the step
        accept ``state`` and ignore it.

        With gradient accumulation (``TrainConfig.micro_batch_size``) ``batch`` is one micro-batch, and the loss,
        taken to be a token mean over it, is scaled by the micro-batch's share of the step's valid weight (sum of
        ``weights[:, 1:]``, :func:`repro.accumulation.accumulation_scales`). That gives the whole batch's gradient
        when the loss is ``sum of per-token terms / sum of weights`` with terms that do not depend on other rows
        (CLM, LongCE's official ``mean``). Otherwise the step's objective is this weighted sum of the micro-batches'
        objectives, close to but not the whole batch's: LongCE's ``weighted_mean``, self-distillation's KL term (a
        mean over rows), and CDT, whose embedding shift ``lr * beta * dL/dE`` comes from the micro-batch's own mean
        loss (``W / W_i`` times the whole batch's)."""
        ...


OPTIONAL_HOOKS: tuple[str, ...] = ("lr_scale", "loss", "micro_batch_weighting")
"""The names of :class:`MethodHooks`."""
