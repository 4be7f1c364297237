"""The arms ``python -m repro bench gpu`` times on one row of ``T`` tokens, each a batch maker and a loss.

Every arm is one paper's training objective or rows, built from the method classes and the papers' specs, timed
as forward + backward + AdamW step on the shared model (:mod:`repro.bench.gpu`):

- ``Standard``: the trainer's objective of every method without a loss hook (:func:`repro.train.clm_step`: FLT,
  and the self-distillation comparison's ``rp_standard``);
- self-distillation (``rp_skip``, :class:`repro.methods.selfdistill.SelfDistillation`): the skip view with the
  prefix-shared second pass (``shared_prefix=True``) and with two full passes (``shared_prefix=False``);
- ``LongCE`` (``rp_longce``: the same class, LongCE's short windows and weights);
- ``CDT`` (:class:`repro.methods.cdt.ContextDenoising`, the paper profile's ``beta`` and threshold);
- PoSE and LongRecipe: the Standard step with the row's position ids from their transforms
  (:func:`repro.positions.pose`, :func:`repro.positions.longrecipe_alg1` on sentences of 10-40 tokens), spread over
  ``POSITION_SPREAD x T`` positions;
- ProLong's document-masked rows (random documents packed into the row, positions restarting per document): a dense
  block-diagonal mask (sdpa), ``sdpa_varlen`` (:mod:`repro.attention.doc_masked`), flash-attn's varlen kernel
  (``flash_attention_2``) where it is installed, and a flex implementation where :mod:`repro.attention` registers
  one (a name with ``flex`` in :data:`repro.attention.doc_masked.ATTN_IMPLEMENTATIONS`).

Every tensor is made on the model's device (``device=``), so the arms run clean under
:class:`repro.devices.DeviceGuard`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable

import numpy as np
import torch

from repro.accel import flash_attn_available
from repro.attention.doc_masked import ATTN_IMPLEMENTATIONS
from repro.bench.doc_attention import packed_rows
from repro.methods.arms import rp_arm
from repro.methods.cdt import ContextDenoising
from repro.methods.selfdistill import SelfDistillation, selfdistill_batch
from repro.positions import PositionSample, longrecipe_alg1, pose
from repro.train import clm_step
from repro.methods.protocol import StepState

POSITION_SPREAD = 4
"""PoSE and LongRecipe map the row's ``T`` tokens into ``[0, POSITION_SPREAD * T)``."""
DOC_FRACTIONS = (1 / 32, 1 / 4)
"""ProLong rows: document lengths drawn uniformly between these fractions of the row."""


@dataclass
class Arm:
    """One timed arm."""

    name: str
    paper: str
    """Whose method (``all``, ``self-distillation``, ``CDT``, ``LongRecipe``, ``ProLong``)."""
    batch: Callable[[np.random.Generator], dict[str, torch.Tensor]]
    """A fresh batch on the model's device (views and positions redrawn each step)."""
    loss: Callable[[Any, dict[str, torch.Tensor], int], torch.Tensor]
    """``loss(model, batch, step)``: the scalar to back-propagate."""
    attn: str = "sdpa"
    """The attention implementation the step runs under."""
    skip: str | None = None
    """Why the arm cannot run here (it is listed with this status instead)."""
    note: str = ""


def plain_batch(ids: torch.Tensor) -> dict[str, torch.Tensor]:
    """One document per row: positions ``0..T-1``, every token weighted 1 (on ``ids``' device)."""
    B, T = ids.shape
    return {"input_ids": ids, "position_ids": torch.arange(T, device=ids.device).expand(B, T),
            "weights": torch.ones(B, T, device=ids.device)}


def sentence_starts(n: int, rng: np.random.Generator, lo: int = 10, hi: int = 40) -> tuple[int, ...]:
    """Sentence starts of an ``n``-token row of sentences of ``lo..hi`` tokens (0 first)."""
    starts, at = [], 0
    while at < n:
        starts.append(at)
        at += int(rng.integers(lo, hi + 1))
    return tuple(starts)


def _with_positions(ids: torch.Tensor, pos: np.ndarray) -> dict[str, torch.Tensor]:
    b = plain_batch(ids)
    b["position_ids"] = torch.as_tensor(np.asarray(pos, dtype=np.int64), device=ids.device)[None]
    return b


def doc_rows(length: int, vocab: int, device: torch.device, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """One row of ``length`` tokens packed from random documents (:data:`DOC_FRACTIONS` of the row), on
    ``device``: ``input_ids``, ``position_ids`` restarting per document, ``doc_ids``, ``weights``."""
    lo, hi = (max(1, int(f * length)) for f in DOC_FRACTIONS)
    rows = packed_rows(length, 1, (lo, hi), vocab, rng)
    return {k: v.to(device) for k, v in rows.items()}


def flex_implementation() -> str | None:
    """A flex-attention implementation registered in :mod:`repro.attention` (by name), or None."""
    return next((n for n in ATTN_IMPLEMENTATIONS if "flex" in n), None)


def _clm(bf16: bool):
    return lambda model, batch, step: clm_step(model, batch, bf16)[0]


def method_arms(length: int, vocab: int, device: torch.device, bf16: bool, lr: float, longce,
                cdt_spec, checkpointing: bool, rng: np.random.Generator) -> dict[str, Arm]:
    """Every arm at rows of ``length`` tokens (module docstring), in table order; ``longce``: a
    :class:`repro.methods.longce.LongCEConfig`, ``cdt_spec``: a :class:`repro.methods.cdt.CDTSpec`, ``lr``: the
    step's learning rate (CDT's Eq. 3)."""
    ids = torch.as_tensor(rng.integers(3, vocab, (1, length)), device=device)
    starts = sentence_starts(length, rng)
    docs = doc_rows(length, vocab, device, rng)
    n_docs = int((docs["position_ids"] == 0).sum())
    clm = _clm(bf16)

    def sd_arm(name: str, arm: str, paper: str, note: str = "", **fields) -> Arm:
        spec = rp_arm(arm).spec.with_(**fields)
        method = SelfDistillation(arm, spec, None, seed=0, pad_id=0, bf16=bf16, longce=longce if spec.longce else None)
        return Arm(name, paper, lambda g: selfdistill_batch(ids, spec, g),
                   lambda model, batch, step: method.loss(model, batch, StepState(step, lr))[0], note=note)

    cdt = ContextDenoising("cdt", cdt_spec, None, pad_id=None, bf16=bf16)

    def cdt_loss(model, batch, step):
        return cdt.loss(model, batch, StepState(step, lr))[0]

    shared_note = ("under gradient checkpointing the layers keep no cache, so the shared pass falls back to two full "
                   "passes (repro.models.recomputes_layers)" if checkpointing else "")
    arms = [
        Arm("Standard", "all", lambda g: plain_batch(ids), clm, note="repro.train.clm_step (FLT, rp_standard)"),
        sd_arm("self-distillation, skip, prefix-shared", "rp_skip", "self-distillation", shared_note,
               shared_prefix=True),
        sd_arm("self-distillation, skip, two full passes", "rp_skip", "self-distillation", shared_prefix=False),
        sd_arm("LongCE", "rp_longce", "self-distillation, CDT",
               f"short windows of {longce.window} every {longce.stride} tokens"),
        Arm("CDT", "CDT", lambda g: plain_batch(ids), cdt_loss, note=f"beta {cdt_spec.beta:g}, lr {lr:g}"),
        Arm("PoSE positions", "LongRecipe", lambda g: _with_positions(ids, pose(
            PositionSample(n=length), POSITION_SPREAD * length, g)), clm,
            note=f"two chunks over {POSITION_SPREAD}T positions"),
        Arm("LongRecipe positions", "LongRecipe", lambda g: _with_positions(ids, longrecipe_alg1(
            PositionSample(n=length, sentence_starts=starts), POSITION_SPREAD * length, g)), clm,
            note=f"Alg. 1, {len(starts)} sentences over {POSITION_SPREAD}T positions"),
    ]
    doc_note = f"{n_docs} documents in the row"
    arms.append(Arm("ProLong rows, dense mask (sdpa)", "ProLong", lambda g: docs, clm, note=doc_note))
    arms.append(Arm("ProLong rows, sdpa_varlen", "ProLong", lambda g: docs, clm, attn="sdpa_varlen", note=doc_note))
    arms.append(Arm("ProLong rows, flash varlen", "ProLong", lambda g: docs, clm, attn="flash_attention_2",
                    note=doc_note, skip=None if flash_attn_available() else
                    "skipped: needs a CUDA GPU and flash-attn (requirements-gpu.txt)"))
    flex = flex_implementation()
    skip = ("skipped: no flex implementation in repro.attention (ATTN_IMPLEMENTATIONS)" if flex is None else
            "skipped: flex attention has no CPU backward" if device.type != "cuda" else None)
    arms.append(Arm("ProLong rows, flex", "ProLong", lambda g: docs, clm, attn=flex or "flex", note=doc_note,
                    skip=skip))
    return {a.name: a for a in arms}
