"""Learning-rate curves shared by the trainer's schedule (:func:`repro.train.lr_at`) and a method that decides its
own (the base curriculum's anneal, :mod:`repro.methods.base`)."""

from __future__ import annotations

import math


def cosine_decay(t: float, floor: float) -> float:
    """Cosine from 1 at ``t = 0`` down to ``floor`` at ``t = 1``."""
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t))
