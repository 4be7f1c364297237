"""What the trainer (:class:`repro.train.Trainer`) needs from a method: :class:`Method`, and the optional hooks
(:class:`MethodHooks`, named in :data:`OPTIONAL_HOOKS`) it calls when a method defines them."""

from __future__ import annotations

from typing import Protocol

import numpy as np
import torch


class Method(Protocol):
    """What the trainer needs from a method (every member is called by :class:`repro.train.Trainer`)."""

    name: str
    """Shown in the progress bar and written to the final folder's ``train_summary.json``."""

    def batch(self, step: int) -> dict[str, np.ndarray]:
        """The batch of ``step`` (``input_ids``, ``position_ids``, ``weights``, optional ``doc_ids``,
        ``answer_group``): a pure function of the step and the state, so a resumed run sees the same data."""
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

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """The training objective of one batch: ``(scalar loss, metrics with a "loss" entry)`` (default:
        :func:`repro.train.clm_step`, the weighted CLM loss). Objectives that are not plain CLM (self-distillation's
        KL term, LongCE, CDT) define it.

        With gradient accumulation (``TrainConfig.micro_batch_size``) ``batch`` is one micro-batch, and the loss,
        taken to be a token mean over it, is scaled by the micro-batch's share of the step's valid weight (sum of
        ``weights[:, 1:]``, :func:`repro.accumulation.accumulation_scales`). That gives the whole batch's gradient
        when the loss is ``sum of per-token terms / sum of weights`` with terms that do not depend on other rows
        (CLM, LongCE's official ``mean``). Otherwise the step's objective is this weighted sum of the micro-batches'
        objectives, close to but not the whole batch's: LongCE's ``weighted_mean``, self-distillation's KL term (a
        mean over rows), and CDT, whose embedding shift ``lr * beta * dL/dE`` comes from the micro-batch's own mean
        loss (``W / W_i`` times the whole batch's)."""
        ...

    def before_step(self, step: int, lr: float) -> None:
        """Called before the loss of ``step`` with that step's learning rate (CDT's denoising, Eq. 3, uses it)."""
        ...


OPTIONAL_HOOKS: tuple[str, ...] = ("lr_scale", "loss", "before_step")
"""The names of :class:`MethodHooks`."""
