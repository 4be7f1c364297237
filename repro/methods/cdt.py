"""Context Denoising Training (CDT, §4): detect noise tokens by their embedding gradient (Eq. 2), push their
embeddings down that gradient (Eq. 3), then train on the denoised embeddings (Eq. 4), online every step.

:func:`cdt_loss` is the step's objective (usable in any training loop); :class:`CDTSpec` its settings, ours the
defaults and the authors' public trainer's as named options. How the step differs from the paper and from the
authors' trainer, and what it costs: docs/papers/cdt.md.
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace

import torch

from repro.methods.metrics import LMPass, finish_metrics, lm_loss
from repro.methods.wrapped import OnInnerRows
from repro.models import check_batch
from repro.parallel.rows import group_sum

THRESHOLDS = ("document", "row")
"""Where Eq. 2's mean is taken: per document (default) or over the whole packed row (the authors' trainer)."""
PERTURB_TYPES = ("below", "other", "both")
"""Which tokens Eq. 3 moves: ``below`` the mean gradient norm, down their gradient (the paper's noise; default);
``other``, those above it, up their gradient; ``both`` (the authors' trainer's ``opposite``/``other``/``both``)."""
STEPS = ("lr_beta", "epsilon")
"""Eq. 3's step size per token: ``lr * beta`` (the paper; default) or ``epsilon / (1 + ||g_i||)`` (the authors'
trainer's ``epsilon``, with ``||g_i||`` the token's own gradient norm)."""


@dataclass(frozen=True)
class CDTSpec:
    """The settings of Context Denoising Training: ours by default, the authors' public trainer's as options."""

    beta: float = 5.0
    """Denoising strength of Eq. 3 (>= 0; 0 gives exactly the CE step). The paper: 5 for Llama 3 at lr 1e-5."""
    threshold: str = "document"
    """Scope of Eq. 2's mean: ``document`` (each document of a packed row) or ``row`` (the authors' trainer)."""
    perturb_type: str = "below"
    """Which tokens move (:data:`PERTURB_TYPES`): ``below`` (the noise of Eq. 2: ``E - s g``), ``other`` (the tokens
    above the mean: ``E + s g``) or ``both`` (each its way; a token exactly at the mean moves in neither)."""
    step: str = "lr_beta"
    """Eq. 3's step size ``s`` (:data:`STEPS`): ``lr_beta`` (``lr * beta``) or ``epsilon``
    (``epsilon / (1 + ||g_i||)`` per token, independent of the learning rate and of ``beta``)."""
    epsilon: float | None = None
    """The ``epsilon`` step's numerator (a finite value > 0, with ``step="epsilon"`` only)."""
    authors_accumulation: bool = False
    """The authors' trainer under gradient accumulation over ``n`` micro-batches: the detection gradient (and with
    it Eq. 3's step and the ``epsilon`` step's norm) is divided by ``n`` (DeepSpeed scales the detection backward),
    and the micro-batches are weighted ``1 / n`` each instead of by their valid tokens (one process only)."""

    def __post_init__(self):
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"beta={self.beta!r}; allowed: a finite value >= 0")
        for name, value, allowed in (("threshold", self.threshold, THRESHOLDS),
                                     ("perturb_type", self.perturb_type, PERTURB_TYPES), ("step", self.step, STEPS)):
            if value not in allowed:
                raise ValueError(f"{name}={value!r}; allowed: {', '.join(allowed)}")
        if self.step == "epsilon" and not (isinstance(self.epsilon, (int, float)) and math.isfinite(self.epsilon)
                                           and self.epsilon > 0):
            raise ValueError(f"epsilon={self.epsilon!r}; allowed: a finite value > 0 with step='epsilon'")
        if self.step != "epsilon" and self.epsilon is not None:
            raise ValueError(f"epsilon={self.epsilon!r} with step={self.step!r}; allowed: epsilon=None, or "
                             "step='epsilon'")
        if not isinstance(self.authors_accumulation, bool):
            raise ValueError(f"authors_accumulation={self.authors_accumulation!r}; allowed: True, False")

    def with_(self, **kw) -> "CDTSpec":
        """A copy with fields replaced."""
        return replace(self, **kw)

    def detects(self, lr: float) -> bool:
        """Whether a step at learning rate ``lr`` moves any embedding (else :func:`cdt_loss` is the CE step)."""
        return self.step == "epsilon" or (self.beta > 0 and lr > 0)


@contextlib.contextmanager
def frozen(model: torch.nn.Module):
    """Within the block every parameter of ``model`` has ``requires_grad=False`` (restored on exit, also after an
    error), so a backward computes activation gradients only."""
    flags = [(p, p.requires_grad) for p in model.parameters()]
    for p, _ in flags:
        p.requires_grad_(False)
    try:
        yield model
    finally:
        for p, f in flags:
            p.requires_grad_(f)


def ce_from_embeds(model, embeds: torch.Tensor, batch: dict[str, torch.Tensor], bf16: bool = False,
                   chunk: int = 2048) -> tuple[torch.Tensor, LMPass]:
    """The batch's weighted CE with the model run on ``embeds`` (B, T, H) instead of its own embedding lookup:
    ``(loss, pass)`` (:func:`repro.methods.metrics.lm_loss`: chunked when the model has a plain head)."""
    return lm_loss(model, batch, bf16, True, chunk, inputs_embeds=embeds)


def embedding_gradients(model, batch: dict[str, torch.Tensor], bf16: bool = False, chunk: int = 2048,
                        embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Detection pass (§4.1): ``(dL/dE (B, T, H), loss)`` for the batch's CE, with the model's weights frozen and
    the backward taken to the input embeddings only (no parameter gets a ``.grad``; none is computed).

    ``embeds``: the input embeddings to differentiate at (default: the model's lookup of ``input_ids``)."""
    if embeds is None:
        with torch.no_grad():
            embeds = model.get_input_embeddings()(batch["input_ids"])
    e = embeds.detach().requires_grad_(True)
    with frozen(model):
        loss = ce_from_embeds(model, e, batch, bf16, chunk)[0]
        (grad,) = torch.autograd.grad(loss, e)
    # sequence parallelism: each rank holds its own tokens' gradient (zero elsewhere); Eq. 2 needs whole documents
    return group_sum(grad), loss.detach()


def norm_masks(grad_norm: torch.Tensor, valid: torch.Tensor, doc_ids: torch.Tensor | None = None,
               threshold: str = "document") -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 2's split: ``(below, above)``, (B, T) masks of the valid tokens whose gradient norm is strictly below,
    or strictly above, the mean norm of their sequence (:func:`noise_mask`). Padding is in neither."""
    if threshold not in THRESHOLDS:
        raise ValueError(f"threshold={threshold!r}; allowed: {', '.join(THRESHOLDS)}")
    if grad_norm.shape != valid.shape:
        raise ValueError(f"grad_norm {tuple(grad_norm.shape)} and valid {tuple(valid.shape)} must have one shape")
    B, T = grad_norm.shape
    if threshold == "row" or doc_ids is None:
        groups = torch.arange(B, device=grad_norm.device)[:, None].expand(B, T)
    else:  # (row, document) pairs numbered densely
        pairs = torch.stack([torch.arange(B, device=doc_ids.device)[:, None].expand(B, T), doc_ids.long()], -1)
        groups = torch.unique(pairs.reshape(-1, 2), dim=0, return_inverse=True)[1].reshape(B, T)
    g = groups[valid]
    n = int(groups.max()) + 1
    norms = grad_norm[valid].to(torch.float64)
    total = torch.zeros(n, dtype=torch.float64, device=norms.device).index_add_(0, g, norms)
    count = torch.zeros(n, dtype=torch.float64, device=norms.device).index_add_(0, g, torch.ones_like(norms))
    mean = total / count.clamp_min(1)
    below, above = torch.zeros_like(valid), torch.zeros_like(valid)
    below[valid] = norms < mean[g]
    above[valid] = norms > mean[g]
    return below, above


def noise_mask(grad_norm: torch.Tensor, valid: torch.Tensor, doc_ids: torch.Tensor | None = None,
               threshold: str = "document") -> torch.Tensor:
    """Eq. 2: ``True`` where a token is noise, i.e. its gradient norm is strictly below the mean norm of its
    sequence. ``grad_norm``, ``valid`` (non-padding) and ``doc_ids``: (B, T). The mean is over the valid tokens of
    each document (``threshold="document"``; rows without ``doc_ids`` are one document) or of each whole row
    (``"row"``). Padding is never noise."""
    return norm_masks(grad_norm, valid, doc_ids, threshold)[0]


def denoise(embeds: torch.Tensor, grad: torch.Tensor, noise: torch.Tensor, lr: float, beta: float) -> torch.Tensor:
    """Eq. 3: ``E' = E - I(x) * grad * lr * beta`` (``noise``: the (B, T) mask ``I``). ``grad`` enters as a
    constant; the result keeps ``embeds``' graph."""
    step = (noise[..., None].to(grad.dtype) * grad.detach()) * (lr * beta)
    return embeds - step.to(embeds.dtype)


def token_norms(grad: torch.Tensor) -> torch.Tensor:
    """(B, T) L2 norms of a (B, T, H) gradient over its hidden dimension, in fp32 (fp64 for fp64)."""
    return grad.to(torch.float64 if grad.dtype == torch.float64 else torch.float32).norm(dim=-1)


def perturb(embeds: torch.Tensor, grad: torch.Tensor, below: torch.Tensor, above: torch.Tensor, spec: CDTSpec,
            lr: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Eq. 3 under every option of ``spec``: ``E' = E - s_i g_i`` for the ``below`` tokens and ``E + s_i g_i`` for
    the ``above`` ones (the masks :func:`norm_masks` gives, empty where ``spec.perturb_type`` moves none), with
    ``s_i = lr * beta`` or ``epsilon / (1 + ||g_i||)`` (``spec.step``). ``grad`` enters as a constant. Returns
    ``(E', s)``: ``s`` (B, T) the step size of each token (0 where none moves)."""
    sign = above.to(grad.dtype) - below.to(grad.dtype)  # exactly -1, 0 or 1
    g = grad.detach()
    if spec.step == "lr_beta":
        size = (lr * spec.beta) * sign.abs()
        shift = (sign[..., None] * g) * (lr * spec.beta)  # -(I g) lr beta for "below": Eq. 3's rounding exactly
    else:
        size = spec.epsilon / (1 + token_norms(g)) * sign.abs()
        shift = (size.to(g.dtype) * sign)[..., None] * g
    return embeds + shift.to(embeds.dtype), size


def valid_tokens(batch: dict[str, torch.Tensor], pad_id: int | None = None) -> torch.Tensor:
    """Non-padding tokens of a batch: its ``attention_mask`` (1 = a real token, as packed rows and HF tokenizers
    give it). Only a batch without one falls back to ``input_ids != pad_id`` (all tokens when ``pad_id`` is None),
    which also drops every real token equal to the pad id: an answer's EOS when the tokenizer pads with its EOS."""
    ids = batch["input_ids"]
    mask = batch.get("attention_mask")
    if mask is not None:
        return torch.as_tensor(mask, device=ids.device) != 0
    return torch.ones_like(ids, dtype=torch.bool) if pad_id is None else ids != pad_id


def denoised(embeds: torch.Tensor, grad: torch.Tensor, batch: dict[str, torch.Tensor], spec: CDTSpec, lr: float,
             pad_id: int | None = None, micro_batches: int = 1) -> tuple[torch.Tensor, dict[str, float]]:
    """Eq. 2-3 from the detection gradient ``grad`` = dL/dE (:func:`embedding_gradients`): ``(E', metrics)`` with
    ``noise_fraction`` (share of valid tokens below the mean), ``signal_fraction`` (above it; ``other``/``both``
    only) and ``shift`` (mean L2 norm of the embedding change over the tokens moved). ``micro_batches``: the step's
    accumulation steps, which divide ``grad`` under ``spec.authors_accumulation``."""
    if spec.authors_accumulation and micro_batches > 1:
        grad = grad / micro_batches  # DeepSpeed scales the authors' detection backward by 1 / accumulation steps
    valid = valid_tokens(batch, pad_id)
    below, above = norm_masks(grad.float().norm(dim=-1), valid, batch.get("doc_ids"), spec.threshold)
    if spec.perturb_type == "below":
        above = torch.zeros_like(above)
    elif spec.perturb_type == "other":
        below = torch.zeros_like(below)
    out, size = perturb(embeds, grad, below, above, spec, lr)
    n_valid = max(int(valid.sum()), 1)
    moved = below | above
    metrics = {"noise_fraction": int(below.sum()) / n_valid}
    if spec.perturb_type != "below":
        metrics["signal_fraction"] = int(above.sum()) / n_valid
    if not bool(moved.any()):
        metrics["shift"] = 0.0
    elif spec.step == "lr_beta":
        metrics["shift"] = float(grad[moved].float().norm(dim=-1).mean() * lr * spec.beta)
    else:
        metrics["shift"] = float((token_norms(grad) * size)[moved].mean())
    return out, metrics


def cdt_loss(model, batch: dict[str, torch.Tensor], spec: CDTSpec, lr: float, pad_id: int | None = None,
             bf16: bool = False, chunk: int = 2048, micro_batches: int = 1) -> tuple[torch.Tensor, dict[str, float]]:
    """One CDT step's objective (Eq. 2-4) on a batch (``input_ids``, ``weights``; optional ``position_ids``,
    ``doc_ids``, ``answer_group``, ``attention_mask``: the real tokens, :func:`valid_tokens`; ``pad_id`` only for a
    batch without one) at learning rate ``lr``: ``(loss, metrics)``. ``loss`` is the CE on the denoised
    embeddings (call ``backward`` on it as on a CE loss); metrics: ``loss``, ``detect_loss`` (the CE before
    denoising), those of :func:`denoised`, ``train_em``. Usable in a plain training loop on any HF causal LM.
    ``micro_batches``: the step's accumulation steps (used by ``spec.authors_accumulation`` only)."""
    if not (math.isfinite(lr) and lr >= 0):
        raise ValueError(f"lr={lr!r}; allowed: a finite value >= 0")
    if micro_batches < 1:
        raise ValueError(f"micro_batches={micro_batches!r}; allowed: >= 1")
    check_batch(batch, min_length=2)  # a length-1 row has no next token: its loss would be a silent 0
    embeds = model.get_input_embeddings()(batch["input_ids"])
    metrics: dict[str, float] = {}
    if spec.detects(lr):
        grad, detect = embedding_gradients(model, batch, bf16, chunk, embeds)
        metrics["detect_loss"] = float(detect)
        embeds, moved = denoised(embeds, grad, batch, spec, lr, pad_id, micro_batches)
        metrics.update(moved)
    loss, out = ce_from_embeds(model, embeds, batch, bf16, chunk)
    return finish_metrics(loss, metrics, out, batch)


class ContextDenoising(OnInnerRows):
    """CDT on the rows of an inner method (``inner``: e.g. FLT's :class:`repro.methods.Extension` at the target):
    same batches, the objective of :func:`cdt_loss` at the step's learning rate (the trainer's
    :class:`repro.methods.protocol.StepState`).

    ``stop_at``: stop after this many steps of the schedule."""

    def __init__(self, name: str, spec: CDTSpec, inner, pad_id: int | None, bf16: bool = False,
                 stop_at: int | None = None, chunk: int = 2048):
        self.name, self.spec, self.inner, self.pad_id = name, spec, inner, pad_id
        self.bf16, self.stop_at, self.chunk = bf16, stop_at, chunk

    @property
    def micro_batch_weighting(self) -> str:
        """``mean`` (1 / n each) under the authors' accumulation, else ``tokens``."""
        return "mean" if self.spec.authors_accumulation else "tokens"

    def loss(self, model, batch, state):
        return cdt_loss(model, batch, self.spec, state.lr, self.pad_id, self.bf16, self.chunk, state.micro_batches)


# == CDT's arm, its CE baseline and the analysis task model: builders (repro.arms' table) =========================
# A CD arm trains exactly as the self-distillation comparison's ``rp_standard`` (the plain-CE arm CD-Tab2 calls "CE":
# same base, FLT's rows, ``selfdistill.rope_theta``, ``selfdistill.bf16``, ``extend``'s schedule) with the CDT objective
# (``cdt.beta``, ``cdt.threshold``). The plain arm keeps a checkpoint every ``cdt.curve_every`` steps (CD-Fig10 at the
# target). The analysis model is the base fine-tuned on ``cdt.task`` rows at its own window, with CE or with CDT.

from repro.methods.armspec import ArmData, ArmSpec, need_data, split_seed  # noqa: E402  (the section's imports)
from repro.methods.extension import EXTENSION_METHODS, Extension, extension_method  # noqa: E402
from repro.models import rope_parameters  # noqa: E402
from repro.profiles import Profile  # noqa: E402
from repro.train.config import TrainConfig  # noqa: E402

CD_ARMS: dict[str, str] = {"cdt": "CDT"}
"""Context Denoising Training arms -> the paper's row. CD-Tab2's CE and LongCE baselines are the arms
:data:`CE_BASELINES` name (trained once for both papers)."""

CE_BASELINES: dict[str, str] = {"ce": "rp_standard", "longce": "rp_longce"}
"""CD-Tab2's baselines (the paper's row -> the arm that trains it): plain CE is the self-distillation comparison's
Standard arm, LongCE its LongCE arm; the cached pipeline and the figures use the arm names."""

TASK_OBJECTIVES = ("ce", "cdt")
"""Objectives of the task fine-tune."""


def cd_arm(name: str) -> str | None:
    """The paper row of a CDT arm name (replicate suffix allowed), else None."""
    return CD_ARMS.get(split_seed(name)[0])


def cdt_spec(p: Profile) -> CDTSpec:
    """The profile's :class:`CDTSpec` (``cdt.beta``, ``cdt.threshold``)."""
    return CDTSpec(beta=p.cdt.beta, threshold=p.cdt.threshold)


def cdt_method(p: Profile, name: str, tokenizer, corpus_rows, seed: int | None = None, inner=None):
    """The :class:`ContextDenoising` of a CD arm on FLT's rows (or ``inner``'s)."""
    inner = inner or extension_method(p, "flt", tokenizer, corpus_rows, seed=seed)
    return ContextDenoising(name, cdt_spec(p), inner, pad_id=tokenizer.pad_token_id, bf16=p.selfdistill.bf16)


def build(p: Profile, name: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """A CD arm: as ``rp_standard`` (``selfdistill.rope_theta`` and ``bf16``, ``extend``'s cosine schedule) with
    the CDT objective; ``cdt.curve_every`` checkpoints for the plain arm (not its replicates)."""
    stem, replicate = split_seed(name)
    if stem not in CD_ARMS:
        raise ValueError(f"{name!r} is not a CDT arm; allowed: {', '.join(CD_ARMS)} (optionally @seed<k>)")
    need_data(name, "rows", data)
    method = None if data is None else cdt_method(p, stem, tokenizer, data.corpus_rows)
    sd = p.selfdistill
    return ArmSpec(name, method, {"rope": rope_parameters("default", sd.rope_theta)},
                   TrainConfig.from_section(p.extend, p.extend.steps, schedule="cosine", bf16=sd.bf16,
                                            device=p.run.device),
                   {"cd": {"beta": p.cdt.beta, "threshold": p.cdt.threshold},
                    "selfdistill": {"rope_theta": sd.rope_theta, "bf16": sd.bf16}},
                   steps=p.extend.steps, curve_every=p.cdt.curve_every if replicate == 0 else 0)


def task_extension(p: Profile, tokenizer, corpus_rows) -> Extension:
    """The task fine-tune's rows: ``cdt.task`` retrieval examples at the base window (FLT's positions)."""
    e = p.extend
    return Extension(name=f"task-{p.cdt.task}", spec=EXTENSION_METHODS["flt"], target=p.base.window,
                     batch_size=e.batch_size, retrieval_fraction=1.0, tokenizer=tokenizer, corpus=corpus_rows,
                     seed=e.seed, context_weight=e.context_weight, train_tasks=(p.cdt.task,))


def task_method(p: Profile, objective: str, tokenizer, corpus_rows):
    """The task fine-tune's method: the task rows with CE (``ce``) or with the CDT objective (``cdt``)."""
    if objective not in TASK_OBJECTIVES:
        raise ValueError(f"objective={objective!r}; allowed: {', '.join(TASK_OBJECTIVES)}")
    inner = task_extension(p, tokenizer, corpus_rows)
    return cdt_method(p, f"task-{objective}", tokenizer, None, inner=inner) if objective == "cdt" else inner


def task_train_config(p: Profile) -> TrainConfig:
    """The task fine-tune's :class:`TrainConfig`: ``cdt.task_steps`` at ``cdt.task_lr``, a checkpoint every
    ``cdt.task_curve_every`` steps, ``extend``'s other settings."""
    cd, e = p.cdt, p.extend
    return TrainConfig(max_steps=cd.task_steps, lr=cd.task_lr, warmup_steps=e.warmup_steps,
                       min_lr_ratio=e.min_lr_ratio, grad_clip=e.grad_clip, bf16=e.bf16, threads=e.threads,
                       checkpoint_every=cd.task_curve_every, keep_checkpoints=10**6, seed=e.seed, device=p.run.device)
