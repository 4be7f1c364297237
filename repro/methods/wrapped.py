"""Objectives trained on another method's rows: the rows, the curriculum state and the stop come from ``inner``.

Self-distillation and CDT both train on FLT's rows with an objective of their own (their ``loss`` hook);
:class:`OnInnerRows` is what they share: ``batch`` is the inner method's, ``observe``, ``state_dict`` and
``load_state_dict`` pass through, and ``finished`` stops at ``stop_at`` (None: when the schedule ends).
"""

from __future__ import annotations

import numpy as np


class OnInnerRows:
    """The :class:`repro.methods.protocol.Method` members of an objective on ``self.inner``'s rows (subclasses set
    ``self.inner`` and ``self.stop_at``, and define ``loss``)."""

    inner = None
    stop_at: int | None = None

    def batch(self, step: int) -> dict[str, np.ndarray]:
        return self.inner.batch(step)

    def observe(self, step: int, metrics: dict) -> None:
        self.inner.observe(step, metrics)

    def finished(self, step: int) -> bool:
        return self.stop_at is not None and step >= self.stop_at

    def state_dict(self) -> dict:
        return self.inner.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.inner.load_state_dict(state)
