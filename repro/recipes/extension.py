"""The shared extension baselines and LongRecipe's arms (FLT, PoSE, RPES, LongRecipe and its variants).

Every arm continues the base towards ``extend.target_window`` on the testbed's rows (corpus documents and
retrieval examples, ``extend.retrieval_fraction``) with ``extend``'s optimisation and a cosine schedule; the arms
differ in how position ids are drawn (:class:`repro.methods.ExtensionSpec`: ``identity`` for FLT, ``pose``,
``rpes``, ``longrecipe``) and in how many tokens a sample holds (``longrecipe.sample_ratio`` of the target, or the
ratio in an arm's name, LongRecipe Table 4). The anchor arms select sentences holding the impactful tokens of
LongRecipe §4.1 (:func:`repro.analysis.tokens.analyse`), passed in as ``Inputs.anchors``. The RoPE comes from
``extend.rope_type`` / ``rope_theta`` / ``rope_factor`` (the paper profile's dynamic NTK), else the model's own.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from repro.profiles import Profile
from repro.recipes.registry import Inputs, Recipe


def owns(arm: str) -> bool:
    """An arm of the LongRecipe comparison (:data:`repro.methods.EXTENSION_METHODS`, ``longrecipe_r<pct>``)."""
    from repro.methods import extension_spec

    try:
        extension_spec(arm)
    except ValueError:
        return False
    return True


def needs_anchors(arm: str) -> bool:
    """The arm selects anchor sentences (``longrecipe``, ``longrecipe_r<pct>``)."""
    from repro.methods import extension_spec

    return extension_spec(arm).selection == "anchors"


def extension_method(p: Profile, method: str, tokenizer, corpus_rows, anchors: np.ndarray | None = None,
                     seed: int | None = None):
    """The :class:`repro.methods.Extension` of a named arm with the profile's settings (``seed`` overrides
    ``extend.seed``); ``anchors`` are needed by arms that select anchor sentences."""
    from repro.methods import extension_spec, get_method

    spec, e = extension_spec(method), p.extend
    return get_method("extension", name=method, spec=spec, target=e.target_window, batch_size=e.batch_size,
                      retrieval_fraction=e.retrieval_fraction, tokenizer=tokenizer, corpus=corpus_rows,
                      seed=e.seed if seed is None else seed, context_weight=e.context_weight,
                      train_tasks=e.train_tasks,
                      sample_len=spec.resolve_len(e.target_window, p.longrecipe.sample_ratio),
                      anchors=anchors)


def _method(p: Profile, arm: str, tokenizer, inputs: Inputs, seed: int | None):
    return extension_method(p, arm, tokenizer, inputs.corpus_rows, inputs.anchors, seed=seed)


def model_settings(p: Profile, arm: str) -> dict[str, Any]:
    """``extend``'s RoPE scaling when set (the paper profile's dynamic NTK from the base window), else the
    model's own RoPE."""
    from repro.models import rope_parameters

    e = p.extend
    if e.rope_type != "default" or e.rope_theta is not None:
        theta = e.rope_theta or p.model.rope_theta
        return {"rope": rope_parameters(e.rope_type, theta, e.rope_factor, p.base.window)}
    return {"rope": None}


RECIPE = Recipe("extension", owns, _method, cli={"flt": "flt", "pose": "pose", "rpes": "rpes",
                                                  "longrecipe": "longrecipe"},
                model_settings=model_settings, needs_anchors=needs_anchors)
"""FLT, PoSE, RPES and LongRecipe (cosine over ``extend.steps``, ``extend``'s precision)."""
