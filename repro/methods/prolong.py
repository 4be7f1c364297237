"""ProLong's training rows (§3-§6): a mixture of named streams, packed with or without document masks.

Each row of a step is one stream's row (:class:`repro.data.mixing.Mixture`): a window of a long document
(code repositories, books), several short documents packed (ShortMix), or a testbed task row. With document
masks (``doc_masks=True``, ProLong's default) each document piece is its own segment: positions restart and
attention stays inside it (:func:`repro.data.packing.pack_rows`; on CPU, :mod:`repro.attention` computes only
the in-document blocks). Without, the pieces are concatenated into one segment (documents separated by the
tokenizer's document separator, :mod:`repro.data.special_tokens`; full causal attention across them), with the
same prediction targets (:func:`repro.data.streams.merge_pieces`).

The method's state counts rows and tokens per stream (``rows_<stream>``, ``tokens_<stream>``): the mix actually
trained on (PL-Tab3).
"""

from __future__ import annotations

import numpy as np

from repro.data.mixing import Mixture
from repro.data.packing import pack_rows
from repro.data.streams import merge_pieces
from repro.methods.metrics import finish_metrics, lm_loss


class ProLongMix:
    """``batch_size`` rows of ``length`` tokens a step from ``mixture`` (see the module docstring)."""

    def __init__(self, name: str, mixture: Mixture, length: int, batch_size: int, pad_id: int,
                 doc_masks: bool = True, bf16: bool = False, chunked: bool = True):
        if length < 2 or batch_size < 1:
            raise ValueError(f"length={length}, batch_size={batch_size}; allowed: length >= 2, batch_size >= 1")
        self.name, self.mixture, self.length, self.batch_size = name, mixture, int(length), int(batch_size)
        self.pad_id, self.doc_masks = int(pad_id), bool(doc_masks)
        self.bf16, self.chunked = bool(bf16), bool(chunked)
        self.stats: dict[str, int] = {"rows": 0, "tokens": 0}

    def loss(self, model, batch, state):
        """ProLong's objective (§3): the weighted next-token loss of the packed rows, every document's tokens
        predicted within it (positions and masks from :meth:`batch`). What is ProLong's is the rows; the trainer
        averages the loss over the step's tokens across micro-batches (§B.1). ``state`` is not needed."""
        loss, out = lm_loss(model, batch, self.bf16, self.chunked)
        return finish_metrics(loss, {}, out, batch)

    def state_dict(self) -> dict:
        return dict(self.stats)

    def load_state_dict(self, state: dict) -> None:
        self.stats = {k: int(v) for k, v in state.items()}

    def finished(self, step: int) -> bool:
        return False

    def observe(self, step: int, metrics: dict) -> None:
        pass

    def batch(self, step: int) -> dict[str, np.ndarray]:
        rows = []
        for stream, pieces in self.mixture.step_rows(step, self.batch_size, self.length):
            segs = pieces if self.doc_masks else [merge_pieces(pieces)]
            packed = pack_rows(segs, self.length, self.pad_id)
            if len(packed["input_ids"]) != 1:
                raise AssertionError(f"stream {stream!r} gave a row of more than {self.length} tokens")
            rows.append(packed)
            n = sum(len(s.tokens) for s in segs)
            for k, v in ((f"rows_{stream}", 1), (f"tokens_{stream}", n), ("rows", 1), ("tokens", n)):
                self.stats[k] = self.stats.get(k, 0) + v
        return {k: np.concatenate([r[k] for r in rows]) for k in rows[0]}


# == ProLong's recipe and its ablations: the arms and their builder (repro.arms' table) ===========================
# Every arm continues the base with ``extend``'s steps, batch, lr and cosine schedule on rows packed from a mixture of
# streams: ``prolong.task_share`` task rows, the rest by ``prolong.mix`` (code repositories, books, ShortMix; a
# long-share arm rescales the long and short sides). The RoPE base at the target is ``prolong.rope_ntk_multiple`` x the
# dynamic-NTK value (:func:`ntk_theta`; ablations: the base model's own, 1x, 4x); the long-training arm trains at
# ``prolong.train_length_factor`` x the target with proportionally fewer rows. With document masks each packed
# document is attended alone (:func:`repro.arms.prepare_model`), as ProLong trains.

from dataclasses import asdict, dataclass  # noqa: E402  (the arm section's imports sit at its head)
from pathlib import Path  # noqa: E402
from typing import Sequence  # noqa: E402

from repro.data.streams import TaskStream, load_streams  # noqa: E402
from repro.data.synthetic import RetrievalRows  # noqa: E402
from repro.methods.armspec import ArmData, ArmSpec, Upstream, need_data, split_seed  # noqa: E402
from repro.models import rope_parameters  # noqa: E402
from repro.profiles import Profile  # noqa: E402
from repro.train.config import TrainConfig  # noqa: E402

TASK_STREAM = "tasks"
"""Name of the testbed's task rows in a ProLong mixture."""


@dataclass(frozen=True)
class PLArm:
    """A ProLong arm: the recipe (``prolong.*`` settings) with at most one thing changed."""

    paper: str
    """The paper's row or point."""
    long_share: float | None = None
    """Share of long data among the non-task rows (None: the recipe's ``prolong.mix``)."""
    doc_masks: bool | None = None
    """Document masks (None: ``prolong.doc_masks``)."""
    rope: str | float = "recipe"
    """RoPE base at the target: ``recipe`` (``prolong.rope_ntk_multiple`` x the dynamic-NTK value), ``orig`` (the
    base model's own), or a multiple of the dynamic-NTK value."""
    length_factor: int = 1
    """Training length as a multiple of the target (>1: ``prolong.train_length_factor``'s arm)."""


PL_ARMS: dict[str, PLArm] = {
    "prolong": PLArm("ProLong recipe (60% long: code 30 + books 30; ShortMix 40; masks; RoPE 2x NTK)"),
    **{f"pl_long{pct}": PLArm(f"{pct}% long", long_share=pct / 100) for pct in (0, 20, 40, 80, 100)},
    "pl_nomask": PLArm("w/o document masks", doc_masks=False),
    "pl_rope_orig": PLArm("RoPE base of the base model", rope="orig"),
    "pl_rope_ntk": PLArm("RoPE base = dynamic-NTK value", rope=1.0),
    "pl_rope_ntk4": PLArm("RoPE base = 4x dynamic-NTK value", rope=4.0),
    "pl_train2x": PLArm("trained at 2x the target", length_factor=2),
}
"""ProLong's recipe and its ablations (PL-Fig1/3: long share; PL-Tab20: masks; PL-Tab18: RoPE base; PL-Tab7:
training length), all from the same base with ``extend``'s steps and optimisation."""


def pl_arm(name: str) -> PLArm | None:
    """The :class:`PLArm` of a ProLong arm name (replicate suffix allowed), else None."""
    return PL_ARMS.get(split_seed(name)[0])


def _pl(name: str) -> PLArm:
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
    rope = _pl(name).rope
    multiple = 0.0 if rope == "orig" else p.prolong.rope_ntk_multiple if rope == "recipe" else float(rope)
    return ntk_theta(p) * multiple if multiple > 0 else float(p.model.rope_theta)


def arm_proportions(p: Profile, name: str) -> dict[str, float]:
    """Stream -> share of rows of arm ``name``: ``prolong.task_share`` task rows, the rest by ``prolong.mix``
    (a long-share arm keeps the ratio among the long streams and among the short ones)."""
    pl, arm = p.prolong, _pl(name)
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
    f = p.prolong.train_length_factor if _pl(name).length_factor > 1 else 1
    return p.extend.target_window * f, p.extend.batch_size // f


def prolong_method(p: Profile, name: str, tokenizer, streams: Path | str | Sequence, seed: int | None = None):
    """The :class:`ProLongMix` of ProLong arm ``name`` (``seed``: ``extend.seed``) over ``streams``: a stream folder
    (:func:`repro.data.streams.load_streams`; the pipeline's ``build_streams``), or
    :class:`repro.data.streams.TokenStream` objects named as ``prolong.sources`` (a user's own data)."""
    e, arm = p.extend, _pl(name)
    seed = e.seed if seed is None else seed
    if isinstance(streams, (str, Path)):
        streams = load_streams(streams, seed)
    tasks = TaskStream(TASK_STREAM, RetrievalRows(tokenizer, e.train_tasks, context_weight=e.context_weight), seed)
    mixture = Mixture([*streams, tasks], arm_proportions(p, name), seed=seed)
    length, rows = arm_length(p, name)
    masks = p.prolong.doc_masks if arm.doc_masks is None else arm.doc_masks
    return ProLongMix(name, mixture, length, rows, tokenizer.pad_token_id, doc_masks=masks, bf16=p.extend.bf16)


def build(p: Profile, name: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """A ProLong arm: its RoPE base (:func:`arm_rope_theta`) and positions up to its training length, ``extend``'s
    cosine schedule and precision; it reads ProLong's streams."""
    stem = split_seed(name)[0]
    arm = _pl(stem)
    need_data(name, "streams", data)
    pl = p.prolong
    used = ("mix", "task_share", "doc_masks", "rope_ntk_multiple", "train_length_factor")
    fields = {"arm": asdict(arm), "prolong": {k: asdict(pl)[k] for k in used}, "rope_theta": arm_rope_theta(p, stem),
              "data": Upstream("streams")}
    method = None if data is None else prolong_method(p, stem, tokenizer, data.streams)
    return ArmSpec(name, method, {"rope": rope_parameters("default", arm_rope_theta(p, stem)),
                                  "max_positions": arm_length(p, stem)[0]},
                   TrainConfig.from_section(p.extend, p.extend.steps, schedule="cosine", device=p.run.device),
                   {"pl": fields}, steps=p.extend.steps, data="streams")
