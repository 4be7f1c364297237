"""Context Denoising Training (CDT, §4): detect noise tokens by their embedding gradient, push their embeddings
down that gradient, then train on the denoised embeddings.

One training step on a batch, as the paper defines it:

1. **Critical-token detection (Eq. 2).** The model's weights are frozen (``requires_grad`` off for the pass, so
   no weight gradient is ever computed) and the step's CE loss is back-propagated to the input embeddings
   ``E(x)`` only. Token ``i`` is *noise* (``I(x_i) = 1``) when ``||dL/dE(x_i)||_2`` is below the mean of that
   norm over its sequence (:func:`noise_mask`).
2. **Denoising (Eq. 3).** ``E'(x_i) = E(x_i) - I(x_i) * dL/dE(x_i) * lr * beta`` with the step's current learning
   rate ``lr`` and the strength ``beta`` (:attr:`CDTSpec.beta`; the paper uses 5 for Llama 3).
3. **Emphasizing training (Eq. 4).** The step's loss is the CE of the model run on ``E'`` (weights unfrozen);
   the gradient reaches the embedding table through ``E`` (the detection gradient enters as a constant).

All three happen online, every step (the paper's EM remark: the model it detects with is the one being trained).

**"The sequence" of Eq. 2 when rows are packed.** The paper's mean is over a sample's ``n`` tokens. With several
documents packed into one row we take the mean per document (:attr:`CDTSpec.threshold` ``"document"``, the
default: the paper's sample is a document); the authors' trainer takes it over the whole packed row
(``"row"``), offered as a named option. Padding never counts. With one document per row both are the same.

**What the loss is.** The detection and the training use the same loss, the step's weighted CE
(:func:`repro.loss.chunked_clm_loss`: the batch's token weights, mean over weighted targets), so ``dL/dE`` has the
scale of that mean: ``lr * beta`` is in the units the paper's Eq. 3 uses.

**Cost.** A CE step is one forward and one full backward. CDT adds one forward and one backward that computes
activation gradients only (the frozen weights need none): about 1 + (1 + ~1) / 3 ~ 1.7x a CE step where a backward
costs two forwards and the weight gradients half of it. The authors' trainer runs a full second backward instead,
and before it a third, discarded pass (below): three forwards and three full backwards, about 3x. ``CD-Cost``
(:mod:`repro.bench.cdt_cost`, arm ``cdt_authors``) measures both: on the tiny model on CPU at 1024 tokens a
backward costs only ~1.1 forwards (CPU flash attention, which has no weights, is half the time), so freezing the
weights saves little and CDT measures ~1.9-2x; where matrix multiplies dominate (8B models on GPUs) the estimate
above applies.

**Where we differ from the authors' trainer** (LCM-Lab/LOOM-Train at commit 8e27da7, ``trainer/cdt.py``).
``threshold="row"`` reproduces its step to 1e-16 on unpadded rows; it differs:

- *Padding.* Their Eq. 2 mean is over every position of the row, pad positions included (their gradient there is
  0), which lowers the threshold: on a padded row they mark fewer real tokens as noise than we do (on one padded
  row checked against their code: 1 real token where we mark 10). We never count padding.
- *Gradient accumulation.* Under DeepSpeed gradient accumulation their detection backward goes through the
  engine, which scales the loss by the accumulation steps, so their ``dL/dE`` (and with it Eq. 3's step) is divided
  by the accumulation steps; ours is the gradient of the step's own loss at any accumulation.
- *Packed rows under our default.* Our default ``threshold="document"`` takes Eq. 2's mean per document; on packed
  rows whose documents carry partly weighted tokens this reclassifies tokens against their per-row mean (on one
  packed row checked against their code: 16 of 64 tokens). ``threshold="row"`` is theirs.
- *A third, discarded pass.* Each of their steps first runs a clean forward and a full backward on the token ids
  (their lines 110-114) whose gradients are zeroed before the denoised pass (their line 139): it changes no update,
  only the cost (about 3x a CE step, against our ~1.7x). We do not run it; ``CD-Cost``'s ``cdt_authors`` arm does,
  to time their step.
- *The detection backward.* Theirs is a full backward (every weight's gradient computed, then zeroed); ours
  freezes the weights (the same ``dL/dE``, :func:`embedding_gradients`).
"""

from __future__ import annotations

import contextlib
import math
from dataclasses import dataclass, replace
from typing import Callable

import torch

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.methods.registry import register_method
from repro.methods.wrapped import OnInnerRows
from repro.parallel.rows import group_sum
from repro.models import forward_hidden, plain_head_weight
from repro.methods.metrics import finish_metrics

THRESHOLDS = ("document", "row")
"""Where Eq. 2's mean is taken: per document (default) or over the whole packed row (the authors' trainer)."""


@dataclass(frozen=True)
class CDTSpec:
    """The settings of Context Denoising Training."""

    beta: float = 5.0
    """Denoising strength of Eq. 3 (>= 0; 0 gives exactly the CE step). The paper: 5 for Llama 3 at lr 1e-5."""
    threshold: str = "document"
    """Scope of Eq. 2's mean: ``document`` (each document of a packed row) or ``row`` (the authors' trainer)."""

    def __post_init__(self):
        if not (math.isfinite(self.beta) and self.beta >= 0):
            raise ValueError(f"beta={self.beta!r}; allowed: a finite value >= 0")
        if self.threshold not in THRESHOLDS:
            raise ValueError(f"threshold={self.threshold!r}; allowed: {', '.join(THRESHOLDS)}")

    def with_(self, **kw) -> "CDTSpec":
        """A copy with fields replaced."""
        return replace(self, **kw)


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


def _device(t: torch.Tensor) -> str:
    return "cpu" if t.device.type == "cpu" else "cuda"


def ce_from_embeds(model, embeds: torch.Tensor, batch: dict[str, torch.Tensor], bf16: bool = False,
                   chunk: int = 2048) -> tuple[torch.Tensor, torch.Tensor | None, torch.Tensor | None]:
    """The batch's weighted CE with the model run on ``embeds`` (B, T, H) instead of its own embedding lookup:
    ``(loss, final hidden states or None, head or None)`` (chunked from the hidden states when the model has a
    plain head, :func:`repro.models.plain_head_weight`; from the logits otherwise)."""
    ids, w = batch["input_ids"], batch["weights"]
    head = plain_head_weight(model)
    with torch.autocast(_device(ids), dtype=torch.bfloat16, enabled=bf16):
        if head is not None:
            hidden = forward_hidden(model, ids, batch.get("position_ids"), batch.get("doc_ids"), inputs_embeds=embeds)
        else:
            from repro.models import forward

            logits = forward(model, ids, batch.get("position_ids"), batch.get("doc_ids"), inputs_embeds=embeds).logits
    if head is not None:
        return chunked_clm_loss(hidden, head, ids, w, chunk, torch.bfloat16 if bf16 else None), hidden, head
    return weighted_clm_loss(logits, ids, w)[0], None, None


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


def noise_mask(grad_norm: torch.Tensor, valid: torch.Tensor, doc_ids: torch.Tensor | None = None,
               threshold: str = "document") -> torch.Tensor:
    """Eq. 2: ``True`` where a token is noise, i.e. its gradient norm is strictly below the mean norm of its
    sequence. ``grad_norm``, ``valid`` (non-padding) and ``doc_ids``: (B, T). The mean is over the valid tokens of
    each document (``threshold="document"``; rows without ``doc_ids`` are one document) or of each whole row
    (``"row"``). Padding is never noise."""
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
    out = torch.zeros_like(valid)
    out[valid] = norms < mean[g]
    return out


def denoise(embeds: torch.Tensor, grad: torch.Tensor, noise: torch.Tensor, lr: float, beta: float) -> torch.Tensor:
    """Eq. 3: ``E' = E - I(x) * grad * lr * beta`` (``noise``: the (B, T) mask ``I``). ``grad`` enters as a
    constant; the result keeps ``embeds``' graph."""
    step = (noise[..., None].to(grad.dtype) * grad.detach()) * (lr * beta)
    return embeds - step.to(embeds.dtype)


def valid_tokens(batch: dict[str, torch.Tensor], pad_id: int | None) -> torch.Tensor:
    """Non-padding tokens of a batch: ``input_ids != pad_id`` (all tokens when ``pad_id`` is None)."""
    ids = batch["input_ids"]
    return torch.ones_like(ids, dtype=torch.bool) if pad_id is None else ids != pad_id


def cdt_loss(model, batch: dict[str, torch.Tensor], spec: CDTSpec, lr: float, pad_id: int | None = None,
             bf16: bool = False, chunk: int = 2048,
             detector: Callable[..., tuple[torch.Tensor, torch.Tensor]] = embedding_gradients,
             ) -> tuple[torch.Tensor, dict[str, float]]:
    """One CDT step's objective (Eq. 2-4) on a batch (``input_ids``, ``weights``; optional ``position_ids``,
    ``doc_ids``, ``answer_group``) at learning rate ``lr``: ``(loss, metrics)``. ``loss`` is the CE on the denoised
    embeddings (call ``backward`` on it as on a CE loss); metrics: ``loss``, ``detect_loss`` (the CE before
    denoising), ``noise_fraction`` (share of valid tokens marked noise), ``shift`` (mean L2 norm of the
    embedding change over noise tokens), ``train_em``. Usable in a plain training loop on any HF causal LM.

    ``detector``: the detection pass, called as ``detector(model, batch, bf16, chunk, embeds) -> (dL/dE, loss)``
    (default :func:`embedding_gradients`; CD-Cost's benchmark passes timed ones, :mod:`repro.bench.cdt_cost`)."""
    if not (math.isfinite(lr) and lr >= 0):
        raise ValueError(f"lr={lr!r}; allowed: a finite value >= 0")
    embeds = model.get_input_embeddings()(batch["input_ids"])
    metrics: dict[str, float] = {}
    if spec.beta > 0 and lr > 0:
        grad, detect = detector(model, batch, bf16, chunk, embeds)
        valid = valid_tokens(batch, pad_id)
        noise = noise_mask(grad.float().norm(dim=-1), valid, batch.get("doc_ids"), spec.threshold)
        embeds = denoise(embeds, grad, noise, lr, spec.beta)
        n_noise = int(noise.sum())
        metrics.update(detect_loss=float(detect), noise_fraction=n_noise / max(int(valid.sum()), 1),
                       shift=float(grad[noise].float().norm(dim=-1).mean() * lr * spec.beta) if n_noise else 0.0)
    loss, hidden, head = ce_from_embeds(model, embeds, batch, bf16, chunk)
    return finish_metrics(loss, metrics, hidden, head, batch)


@register_method("cdt")
class ContextDenoising(OnInnerRows):
    """CDT on the rows of an inner method (``inner``: e.g. FLT's :class:`repro.methods.Extension` at the target):
    same batches, the objective of :func:`cdt_loss` with the trainer's current learning rate (the
    :meth:`before_step` hook).

    ``stop_at``: stop after this many steps of the schedule."""

    def __init__(self, name: str, spec: CDTSpec, inner, pad_id: int | None, bf16: bool = False,
                 stop_at: int | None = None, chunk: int = 2048):
        self.name, self.spec, self.inner, self.pad_id = name, spec, inner, pad_id
        self.bf16, self.stop_at, self.chunk = bf16, stop_at, chunk
        self.lr: float | None = None

    def before_step(self, step: int, lr: float) -> None:
        self.lr = float(lr)

    def loss(self, model, batch):
        if self.lr is None:
            raise RuntimeError(f"method {self.name!r}: no learning rate yet; the trainer calls before_step(step, lr) "
                               "before each loss (call it yourself in a custom loop, or use cdt_loss(..., lr=...))")
        return cdt_loss(model, batch, self.spec, self.lr, self.pad_id, self.bf16, self.chunk)


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
