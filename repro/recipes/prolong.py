"""ProLong's recipe and its ablations: the arms of :data:`repro.methods.arms.PL_ARMS`.

Every arm continues the base with ``extend``'s steps, batch, lr and cosine schedule on rows packed from a
mixture of streams (:class:`repro.methods.prolong.ProLongMix`): ``prolong.task_share`` task rows, the rest by
``prolong.mix`` (code repositories, books, ShortMix; a long-share arm rescales the long and short sides). The RoPE
base at the target is ``prolong.rope_ntk_multiple`` x the dynamic-NTK value (:func:`ntk_theta`; ablations: the
base model's own, 1x, 4x); the long-training arm trains at ``prolong.train_length_factor`` x the target with
proportionally fewer rows. With document masks each packed document is attended alone
(:func:`repro.recipes.prepare_model`), as ProLong trains.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Sequence

from repro.profiles import Profile
from repro.recipes.registry import Inputs, Recipe

TASK_STREAM = "tasks"
"""Name of the testbed's task rows in a ProLong mixture."""


def owns(arm: str) -> bool:
    from repro.methods.arms import PL_ARMS

    return arm in PL_ARMS


def _arm(name: str):
    from repro.methods.arms import PL_ARMS, pl_arm

    arm = pl_arm(name)
    if arm is None:
        raise ValueError(f"{name!r} is not a ProLong arm; allowed: {', '.join(PL_ARMS)} (optionally @seed<k>)")
    return arm


def long_threshold(p: Profile) -> int:
    """Tokens from which a document counts as long (``prolong.long_threshold``, 0: the target window)."""
    return p.prolong.long_threshold or p.extend.target_window


def ntk_theta(p: Profile) -> float:
    """The dynamic-NTK RoPE base for the target (emozilla 2023, ProLong B.1): ``theta * t^(d/(d-2))``, t = target /
    base window, d = head dimension."""
    m = p.model
    d = m.hidden_size // m.num_heads
    t = p.extend.target_window / p.base.window
    return float(m.rope_theta * t ** (d / (d - 2)))


def arm_rope_theta(p: Profile, name: str) -> float:
    """RoPE base of ProLong arm ``name`` at the target: the base model's (``orig``, or a multiple of 0), else the
    multiple (``recipe``: ``prolong.rope_ntk_multiple``) of :func:`ntk_theta`."""
    rope = _arm(name).rope
    multiple = 0.0 if rope == "orig" else p.prolong.rope_ntk_multiple if rope == "recipe" else float(rope)
    return ntk_theta(p) * multiple if multiple > 0 else float(p.model.rope_theta)


def arm_proportions(p: Profile, name: str) -> dict[str, float]:
    """Stream -> share of rows of arm ``name``: ``prolong.task_share`` task rows, the rest by ``prolong.mix``
    (a long-share arm keeps the ratio among the long streams and among the short ones)."""
    pl, arm = p.prolong, _arm(name)
    mix = dict(pl.mix)
    if arm.long_share is not None:
        long_total = sum(mix[n] for n in pl.long_streams)
        short = [n for n in mix if n not in pl.long_streams]
        short_total = sum(mix[n] for n in short)
        if arm.long_share > 0 and long_total <= 0 or arm.long_share < 1 and short and short_total <= 0:
            raise ValueError(f"arm {name!r}: prolong.mix={pl.mix} has no share to scale on one side")
        mix = {n: (arm.long_share * mix[n] / long_total if n in pl.long_streams else
                   (1 - arm.long_share) * mix[n] / short_total if short_total else 0.0) for n in mix}
    out = {n: (1 - pl.task_share) * v for n, v in mix.items()}
    out[TASK_STREAM] = pl.task_share
    return out


def arm_length(p: Profile, name: str) -> tuple[int, int]:
    """``(row length, rows per step)`` of arm ``name``: the target and ``extend.batch_size``, or for the
    long-training arm the length times ``prolong.train_length_factor`` and the rows divided by it."""
    f = p.prolong.train_length_factor if _arm(name).length_factor > 1 else 1
    return p.extend.target_window * f, p.extend.batch_size // f


def prolong_method(p: Profile, name: str, tokenizer, streams: Path | str | Sequence, seed: int | None = None):
    """The :class:`repro.methods.prolong.ProLongMix` of ProLong arm ``name`` (``seed``: ``extend.seed``) over
    ``streams``: a stream folder (:func:`repro.data.streams.load_streams`; the pipeline's ``build_streams``), or
    :class:`repro.data.streams.TokenStream` objects named as ``prolong.sources`` (a user's own data)."""
    from repro.data.mixing import Mixture
    from repro.data.streams import TaskStream, load_streams
    from repro.data.synthetic import RetrievalRows
    from repro.methods.prolong import ProLongMix

    e, arm = p.extend, _arm(name)
    seed = e.seed if seed is None else seed
    if isinstance(streams, (str, Path)):
        streams = load_streams(streams, seed)
    tasks = TaskStream(TASK_STREAM, RetrievalRows(tokenizer, e.train_tasks, context_weight=e.context_weight), seed)
    mixture = Mixture([*streams, tasks], arm_proportions(p, name), seed=seed)
    length, rows = arm_length(p, name)
    masks = p.prolong.doc_masks if arm.doc_masks is None else arm.doc_masks
    return ProLongMix(name, mixture, length, rows, tokenizer.pad_token_id, doc_masks=masks)


def _method(p: Profile, arm: str, tokenizer, inputs: Inputs, seed: int | None):
    return prolong_method(p, arm, tokenizer, inputs.streams, seed=seed)


def model_settings(p: Profile, arm: str) -> dict[str, Any]:
    """The arm's RoPE base (:func:`arm_rope_theta`) and positions up to its training length."""
    from repro.models import rope_parameters

    return {"rope": rope_parameters("default", arm_rope_theta(p, arm)), "max_positions": arm_length(p, arm)[0]}


def key_fields(p: Profile, name: str) -> dict:
    """What of the profile a ProLong arm's weights depend on beyond ``extend``, the base and its data streams."""
    from repro.methods.arms import split_seed

    pl = dataclasses.asdict(p.prolong)
    used = ("mix", "task_share", "doc_masks", "rope_ntk_multiple", "train_length_factor")
    return {"arm": dataclasses.asdict(_arm(split_seed(name)[0])), "prolong": {k: pl[k] for k in used},
            "rope_theta": arm_rope_theta(p, name)}


RECIPE = Recipe("prolong", owns, _method, data="streams", cli={"prolong": "prolong"}, model_settings=model_settings)
"""ProLong's recipe and ablations (``extend``'s cosine schedule and precision)."""
