"""How a run stops early: a non-finite loss or gradient norm (:class:`NonFiniteLoss`), or a simulated kill
(:class:`Interrupted`, tests)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from repro.train.checkpoints import latest_checkpoint


class NonFiniteLoss(FloatingPointError):
    """A step's loss or gradient norm is NaN or infinite: training stops before that step's optimizer update, with
    nothing written for the step (no metrics line, checkpoint or final folder); the last checkpoint is untouched. The
    message names that checkpoint, or says that none exists yet (a loss that is not finite at the first steps comes
    from the model or the flags, not from training)."""

    def __init__(self, step: int, value: float, what: str = "loss", out_dir: str | Path | None = None):
        ckpt = latest_checkpoint(Path(out_dir)) if out_dir is not None and Path(out_dir).is_dir() else None
        stopped = (f"non-finite {what} {value} at step {step} (0-based): training stopped before the optimizer "
                   "update of that step and wrote nothing for it")
        if ckpt is None:
            kept = (" no checkpoint exists yet, so nothing of the run is kept; allowed: finite values: check the "
                    "model's weights and RoPE settings (rope_theta, --rope-theta), the learning rate and the data")
        else:
            kept = (f"; allowed: finite values. The last checkpoint ({str(ckpt)!r}) is intact; resuming restarts "
                    "from it (the same data and settings reach the same step again: change the data, learning rate "
                    "or clipping first)")
        super().__init__(stopped + (";" if ckpt is None else "") + kept)
        self.step, self.value, self.what = step, value, what

    @classmethod
    def check(cls, step: int, what: str, value: Any, out_dir: str | Path | None = None) -> None:
        """Raise when ``value`` (the ``what`` of step ``step``) is not finite."""
        value = float(value)
        if not math.isfinite(value):
            raise cls(step, value, what, out_dir)


class Interrupted(RuntimeError):
    """Raised by ``Trainer.train(stop_after=...)`` to simulate a killed run."""

    def __init__(self, step: int):
        super().__init__(f"training interrupted at step {step}")
        self.step = step
