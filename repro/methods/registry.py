"""The method registry: a name -> factory table that the stages build methods from.

A method module registers its factories with :func:`register_method`; importing
:mod:`repro.methods` imports every method module, so the table is full from
there alone. The trainer never looks names up: it receives a built method.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from repro.methods.protocol import Method

METHODS: dict[str, Callable[..., Method]] = {}
"""Registered method factories by name."""


def register_method(name: str):
    """Class or function decorator: register ``factory`` under ``name`` (names are unique)."""
    def deco(factory):
        if name in METHODS and METHODS[name] is not factory:
            raise ValueError(f"method {name!r} is registered twice ({METHODS[name]!r} and {factory!r})")
        METHODS[name] = factory
        return factory
    return deco


def get_method(name: str, /, **kwargs: Any) -> Method:
    """Instantiate a registered method by name (``extension``, ``base_curriculum``, ``replay``, ...)."""
    if name not in METHODS:
        raise ValueError(f"unknown method {name!r}; allowed: {', '.join(sorted(METHODS))}")
    return METHODS[name](**kwargs)


def step_rng(seed: int, step: int, salt: int = 0) -> np.random.Generator:
    """The generator a method draws step ``step``'s batch from: a pure function of (seed, step,
    salt), so a resumed run sees exactly the batches an uninterrupted one would."""
    return np.random.default_rng([seed, step, salt])
