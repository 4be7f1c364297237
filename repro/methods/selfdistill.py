"""RoPE-perturbed self-distillation (Li et al. 2026, §2): ``L = L_CLM(standard view) + lambda * L_KL`` (Eq. 8).

Per sequence, ``L_KL`` is the mean over the positions whose next-token distribution the perturbation can change of
``KL(p_perturbed || sg(p_standard))`` (reverse KL, Eq. 5-6), averaged over the batch's sequences (Eq. 7). For the
skip view ``r_i = i + y [i >= s]`` (Eq. 4) those are the outputs at positions ``s .. L-1``, ``L - s`` of them as in
Eq. 6's ``1 / (L - s)``; for every other perturbation, all ``L`` positions. Evaluation always uses standard indices.
:class:`SelfDistillSpec` holds the method and every control of the paper's ablations (Tables 8-11), one field each;
where the reproduction differs from the paper: docs/papers/selfdistill.md.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass, field, fields, replace

import numpy as np
import torch

from repro.loss import KL_DIRECTIONS, chunked_kl_loss, kl_from_logits
from repro.methods.longce import longce_clm_term
from repro.methods.metrics import LMPass, autocast, clm_from_hidden, finish_metrics, head_dtype
from repro.methods.perturb import attention_noise, no_rope
from repro.methods.registry import step_rng
from repro.methods.two_view import perturbed_hidden_naive, perturbed_hidden_shared, standard_pass
from repro.methods.wrapped import OnInnerRows
from repro.models import plain_head_weight, recomputes_layers
from repro.parallel.rows import active as split_rows_active
from repro.positions import PositionSample
from repro.positions.views import chunk_permutation_view, cyclic_view, dilation_view, skip_view

VIEWS: tuple[str, ...] = ("skip", "cyclic", "dilation", "chunk_permutation", "nope", "none")
"""Perturbed views (:mod:`repro.positions.views`; ``none``: standard indices)."""
PERTURBATIONS: tuple[str, ...] = ("rope", "dropout", "attention_noise")
CONSISTENCIES: tuple[str, ...] = ("kl", "clm", "none")
BATCH_KEYS: tuple[str, ...] = ("perturbed_position_ids", "split", "kl_mask")
"""Arrays a self-distillation batch adds to an extension batch."""


@dataclass(frozen=True)
class SelfDistillSpec:
    """One arm of the self-distillation comparison (the method, a control or a baseline)."""

    view: str = "skip"
    """Perturbed view: one of :data:`VIEWS`."""
    max_skip: float = 1.0
    """Skip view: ``Y`` as a multiple of the sample length ``L`` (paper: ``Y = L``; Table 9: L/2, L, 2L)."""
    fixed_split: bool = False
    """Skip view: ``s = y = L // 2`` for every sample instead of sampling them (Table 8 "w/o random skip")."""
    view_params: dict = field(default_factory=dict)
    """Extra keyword arguments of the view function (``num_chunks``, ``min_factor``/``max_factor``)."""
    perturbation: str = "rope"
    """``rope`` (the view's indices), ``dropout`` or ``attention_noise`` (view ``none``)."""
    consistency: str = "kl"
    """``kl``, ``clm`` (CLM on the perturbed view) or ``none``."""
    direction: str = "reverse"
    """KL direction: ``reverse`` KL(pert || sg(std)) (Eq. 5) or ``forward`` KL(sg(std) || pert)."""
    lam: float = 1.0
    """Weight lambda of the consistency term (Eq. 8; Table 11: 0.2, 0.5, 1, 2)."""
    standard_clm: bool = True
    """CLM on the standard view; False with ``consistency="none"``: CLM on the perturbed view only (PoSE)."""
    shared_prefix: bool = True
    """Skip view: the prefix-shared second pass (exact; ~1.5x a standard step). False: two full passes (also
    used under activation checkpointing, whose layers drop the cache the shared pass reads)."""
    longce: bool = False
    """LongCE token weights on the CLM term (Fang et al. 2025; :mod:`repro.methods.longce`)."""
    noise_std: float = 1.0
    """Attention noise: std of the Gaussian added to the scaled attention scores (the paper gives none)."""
    dropout: float = 0.1
    """Dropout control: the model's ``attention_dropout`` while training this arm (Llama's own dropout; the
    tiny model is configured without dropout, so the arm loads it with this rate)."""

    def __post_init__(self):
        for name, value, allowed in (("view", self.view, VIEWS), ("perturbation", self.perturbation, PERTURBATIONS),
                                     ("consistency", self.consistency, CONSISTENCIES),
                                     ("direction", self.direction, KL_DIRECTIONS)):
            if value not in allowed:
                raise ValueError(f"{name}={value!r}; allowed: {', '.join(allowed)}")
        if self.perturbation != "rope" and self.view != "none":
            raise ValueError(f"perturbation={self.perturbation!r} keeps the standard indices; use view='none' "
                             f"(got view={self.view!r})")
        if not self.max_skip > 0:
            raise ValueError(f"max_skip={self.max_skip!r}; allowed: > 0 (a multiple of the sample length)")
        if self.lam < 0:
            raise ValueError(f"lam={self.lam!r}; allowed: >= 0")
        if not self.standard_clm and self.consistency != "none":
            raise ValueError("standard_clm=False (PoSE: CLM on the perturbed view only) needs consistency='none'")
        if self.noise_std < 0 or not 0 <= self.dropout < 1:
            raise ValueError(f"noise_std={self.noise_std!r}, dropout={self.dropout!r}; allowed: noise_std >= 0, "
                             "0 <= dropout < 1")

    def max_index(self, n: int) -> int:
        """The largest RoPE index the perturbed view reaches on ``n``-token samples (``max_position_embeddings``
        must exceed it)."""
        if self.view == "skip":
            return n - 1 + (n // 2 if self.fixed_split else self.skip_range(n))
        if self.view == "dilation":
            return int(np.rint((n - 1) * float(self.view_params.get("max_factor", 2.0))))
        return n - 1

    def skip_range(self, n: int) -> int:
        """``Y`` for ``n``-token samples (at least 1)."""
        return max(1, int(round(self.max_skip * n)))

    def with_(self, **kw) -> "SelfDistillSpec":
        bad = set(kw) - {f.name for f in fields(self)}
        if bad:
            raise ValueError(f"SelfDistillSpec has no field(s) {sorted(bad)}")
        return replace(self, **kw)


def draw_view(spec: SelfDistillSpec, n: int, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """The perturbed indices of one ``n``-token sample (relative to standard ``0..n-1``) and its split ``s``
    (positions before ``s`` keep their outputs; 0 for every view but skip)."""
    sample = PositionSample(n=n)
    std = np.arange(n, dtype=np.int64)
    if spec.view == "skip":
        if spec.fixed_split:
            s = y = n // 2
            return np.where(std < s, std, std + y), s
        y_max = spec.skip_range(n)
        v = skip_view(sample, n + y_max, rng, max_skip=y_max, **spec.view_params)
        return v.perturbed, int(v.info["s"])
    if spec.view == "cyclic":
        return cyclic_view(sample, n, rng).perturbed, 0
    if spec.view == "dilation":
        return dilation_view(sample, spec.max_index(n) + 1, rng, **spec.view_params).perturbed, 0
    if spec.view == "chunk_permutation":
        return chunk_permutation_view(sample, n, rng, **spec.view_params).perturbed, 0
    return std, 0  # nope (the pass drops RoPE) and none (dropout / attention noise)


def perturb_rows(spec: SelfDistillSpec, position_ids: np.ndarray, rng: np.random.Generator,
                 valid: np.ndarray | None = None) -> dict[str, np.ndarray]:
    """The arrays a self-distillation batch adds to rows of standard ``position_ids`` (B, T): one view per row,
    drawn with ``rng`` (``perturbed_position_ids``: the view's offsets added to the row's own indices, so packed
    rows keep their per-document restarts), its ``split`` and the ``kl_mask`` (positions ``>= split`` that are
    ``valid``, e.g. not padding)."""
    position_ids = np.asarray(position_ids)
    B, T = position_ids.shape
    pert = np.empty_like(position_ids)
    split = np.zeros(B, dtype=np.int64)
    for r in range(B):
        view, split[r] = draw_view(spec, T, rng)
        pert[r] = position_ids[r] + (view - np.arange(T))
    kl_mask = np.arange(T)[None, :] >= split[:, None]
    if valid is not None:
        kl_mask &= np.asarray(valid, dtype=bool)
    return {"perturbed_position_ids": pert, "split": split, "kl_mask": kl_mask}


def selfdistill_batch(input_ids: torch.Tensor, spec: SelfDistillSpec, rng: np.random.Generator,
                      pad_id: int | None = None, attention_mask=None) -> dict[str, torch.Tensor]:
    """A ready batch for :func:`selfdistill_loss` from plain rows of token ids (B, T) at the target length, for
    a training loop of your own on any HF causal LM with RoPE: standard indices ``0..T-1``, loss weight 1 on
    every real token, one perturbed view per row (:func:`perturb_rows`). The real tokens are those of
    ``attention_mask`` ((B, T), 1 = real, as a padding tokenizer returns it); without one, the tokens that are not
    ``pad_id`` (all when None), which drops an EOS that is also the pad token: pass the mask then."""
    ids = torch.as_tensor(input_ids)
    if ids.ndim != 2 or ids.shape[1] < 2:
        raise ValueError(f"input_ids of shape {tuple(ids.shape)}; expected (batch, length) with length >= 2")
    B, T = ids.shape
    if attention_mask is not None:
        mask = torch.as_tensor(attention_mask)
        if tuple(mask.shape) != (B, T):
            raise ValueError(f"attention_mask of shape {tuple(mask.shape)}; allowed: the shape of input_ids {(B, T)}")
        valid = (mask != 0).cpu().numpy()
    else:
        valid = np.ones((B, T), dtype=bool) if pad_id is None else (ids != pad_id).cpu().numpy()
    pos = np.tile(np.arange(T, dtype=np.int64), (B, 1))
    out = {"input_ids": ids, "position_ids": torch.as_tensor(pos, device=ids.device),
           "weights": torch.as_tensor(valid, dtype=torch.float32, device=ids.device),
           "attention_mask": torch.as_tensor(valid, dtype=torch.int64, device=ids.device)}
    out.update({k: torch.as_tensor(v, device=ids.device) for k, v in perturb_rows(spec, pos, rng, valid).items()})
    return out


def real_tokens(batch, pad_id: int | None) -> np.ndarray:
    """(B, T) bool: the batch's real tokens, from its ``attention_mask`` (packed rows carry one); only a batch
    without one falls back to the tokens that are not ``pad_id``."""
    mask = batch.get("attention_mask")
    if mask is not None:
        return np.asarray(mask) != 0
    ids = np.asarray(batch["input_ids"])
    return np.ones(ids.shape, dtype=bool) if pad_id is None else ids != pad_id


class SelfDistillation(OnInnerRows):
    """Full-length extension rows (``inner``: an :class:`repro.methods.Extension` at the target, e.g. FLT's)
    with a perturbed view drawn per row, trained with :func:`selfdistill_loss`.

    ``stop_at``: stop after this many steps of the schedule (the ablations' early checkpoint, §3.6).
    ``longce``: a :class:`repro.methods.longce.LongCEConfig` when ``spec.longce``.
    """

    def __init__(self, name: str, spec: SelfDistillSpec, inner, seed: int, pad_id: int, bf16: bool = False,
                 longce=None, stop_at: int | None = None, chunk: int = 2048):
        if spec.longce and longce is None:
            raise ValueError(f"method {name!r} uses LongCE: pass its LongCEConfig (repro.methods.longce)")
        self.name, self.spec, self.inner, self.seed, self.pad_id = name, spec, inner, seed, pad_id
        self.bf16, self.longce, self.stop_at, self.chunk = bf16, longce, stop_at, chunk

    def batch(self, step: int) -> dict[str, np.ndarray]:
        b = dict(self.inner.batch(step))
        rng = step_rng(self.seed, step, 2)
        b.update(perturb_rows(self.spec, b["position_ids"], rng, real_tokens(b, self.pad_id)))
        return b

    def loss(self, model, batch, state):
        return selfdistill_loss(model, batch, self.spec, self.bf16, self.longce, self.chunk)


def _perturbed_context(model, spec: SelfDistillSpec):
    if spec.view == "nope":
        return no_rope(model)
    if spec.perturbation == "attention_noise":
        if split_rows_active() is not None:
            raise ValueError("perturbation='attention_noise' replaces the attention function, which sequence "
                             "parallelism needs for its own (sp_ulysses); allowed: sequence_parallel=1 for this "
                             "control, or the RoPE-index, NoPE and dropout perturbations")
        return attention_noise(model, spec.noise_std)
    if spec.perturbation == "dropout" and not (model.training and getattr(model.config, "attention_dropout", 0) > 0):
        raise ValueError("the dropout control needs a model in training mode with config.attention_dropout > 0 "
                         f"(got training={model.training}, attention_dropout="
                         f"{getattr(model.config, 'attention_dropout', None)!r}); load it with the spec's dropout")
    return contextlib.nullcontext()


def _logits(model, hidden: torch.Tensor) -> torch.Tensor:
    return model.get_output_embeddings()(hidden)


def clm_term(model, hidden: torch.Tensor, batch: dict, head: torch.Tensor | None, bf16: bool, longce=None,
             chunk: int = 2048) -> tuple[torch.Tensor, dict[str, float]]:
    """The weighted CLM loss of ``hidden`` (the batch's token weights), with LongCE weights when ``longce``
    ("skip + LongCE", and the LongCE arm: :func:`repro.methods.longce.longce_clm_term`)."""
    if longce is not None:
        return longce_clm_term(model, hidden, batch, head, bf16, longce, chunk)
    return clm_from_hidden(model, hidden, batch["input_ids"], batch["weights"], head, bf16, chunk), {}


def kl_term(model, student: torch.Tensor, teacher: torch.Tensor, kl_mask: torch.Tensor, head: torch.Tensor | None,
            direction: str, bf16: bool, chunk: int = 2048) -> torch.Tensor:
    """Eq. 6-7: per row, the mean KL over its ``kl_mask`` positions; then the mean over rows that have any."""
    acc = torch.float64 if student.dtype == torch.float64 else torch.float32
    count = kl_mask.sum(1)
    rows = (count > 0).sum().clamp_min(1)
    per_pos = kl_mask.to(torch.float64) / (count.clamp_min(1)[:, None] * rows).to(torch.float64)
    sel = kl_mask.reshape(-1)
    s, t = student.reshape(-1, student.shape[-1])[sel], teacher.reshape(-1, teacher.shape[-1])[sel]
    wpos = per_pos.reshape(-1)[sel].to(acc)
    if head is not None:
        return chunked_kl_loss(s, t, head, wpos, direction, chunk, head_dtype(bf16))
    return (kl_from_logits(_logits(model, s), _logits(model, t), direction) * wpos).sum()


def selfdistill_loss(model, batch: dict[str, torch.Tensor], spec: SelfDistillSpec, bf16: bool = False, longce=None,
                     chunk: int = 2048, clock=None) -> tuple[torch.Tensor, dict[str, float]]:
    """The training objective of one batch (``input_ids``, ``position_ids``, ``weights``, ``perturbed_position_ids``,
    ``split``, ``kl_mask``; optional ``doc_ids``, ``answer_group``): ``(loss, metrics)`` with ``loss``, ``clm``,
    ``consistency`` (the KL or perturbed-view CLM before lambda) and ``train_em``.

    ``clock``: an object with ``lap(part)`` (e.g. :class:`repro.bench.step_timing.Clock`), told when each part ends:
    ``first_pass`` (the standard view's forward, or PoSE's one view), ``clm`` (its CLM term, LongCE's windows
    included), ``second_pass`` (the perturbed view's forward) and ``consistency`` (the KL or CLM on it)."""
    ids, pos, pert = batch["input_ids"], batch["position_ids"], batch.get("perturbed_position_ids")
    doc = batch.get("doc_ids")
    head = plain_head_weight(model)
    metrics: dict[str, float] = {}
    lap = clock.lap if clock is not None else (lambda part: None)
    with autocast(ids, bf16):
        if not spec.standard_clm:  # PoSE: CLM on the perturbed view only
            hidden = perturbed_hidden_naive(model, ids, pert, doc)
            lap("first_pass")
            loss, extra = clm_term(model, hidden, batch, head, bf16, longce if spec.longce else None, chunk)
            metrics.update(extra, clm=float(loss.detach()))
            lap("clm")
            return finish_metrics(loss, metrics, LMPass(hidden, head), batch)
        active = spec.consistency != "none" and spec.lam > 0
        shared = active and spec.view == "skip" and spec.shared_prefix and not recomputes_layers(model) \
            and split_rows_active() is None  # sequence parallelism shards the cache: two passes
        hidden, cache = standard_pass(model, ids, pos, doc, cache=shared)
        lap("first_pass")
        clm, extra = clm_term(model, hidden, batch, head, bf16, longce if spec.longce else None, chunk)
        metrics.update(extra, clm=float(clm.detach()))
        lap("clm")
        loss = clm
        if active:
            with _perturbed_context(model, spec):
                if shared:
                    pert_hidden = perturbed_hidden_shared(model, ids, pert, batch["split"], hidden, cache, doc)
                else:
                    pert_hidden = perturbed_hidden_naive(model, ids, pert, doc)
            lap("second_pass")
            if spec.consistency == "kl":
                cons = kl_term(model, pert_hidden, hidden.detach(), batch["kl_mask"].bool(), head, spec.direction,
                               bf16, chunk)
            else:
                cons = clm_term(model, pert_hidden, batch, head, bf16, None, chunk)[0]
            metrics["consistency"] = float(cons.detach())
            lap("consistency")
            loss = clm + spec.lam * cons
    return finish_metrics(loss, metrics, LMPass(hidden, head), batch)


# == The self-distillation comparison's arms and their builder (repro.arms' table) ================================
# Every ``rp_*`` arm continues the same base on FLT's full-length rows at the target with ``selfdistill.rope_theta``
# (ABF) and ``selfdistill.bf16``; they differ only in the objective. Arms on the ``early`` schedule run the main cosine
# schedule and stop at ``selfdistill.ablation_steps`` (the paper's ablations are read at step 200 of 1000); ``matched``
# arms run ``selfdistill.matched_steps_ratio`` x the steps (RP-Fig4). The dropout control trains with
# ``attention_dropout`` and is evaluated without it.

from dataclasses import asdict  # noqa: E402  (the arm section's imports sit at its head)

from repro.methods.armspec import ArmData, ArmSpec, need_data, split_seed  # noqa: E402
from repro.methods.extension import extension_method  # noqa: E402
from repro.methods.longce import LongCEConfig  # noqa: E402
from repro.models import rope_parameters  # noqa: E402
from repro.profiles import Profile  # noqa: E402
from repro.train.config import TrainConfig  # noqa: E402


@dataclass(frozen=True)
class RPArm:
    """A self-distillation arm: its objective and its schedule."""

    spec: SelfDistillSpec
    """The objective (:class:`SelfDistillSpec`)."""
    schedule: str = "main"
    """``main`` (``extend.steps``), ``early`` (stopped at ``selfdistill.ablation_steps``) or ``matched``
    (``selfdistill.matched_steps_ratio`` x the steps, checkpoints kept along the way: RP-Fig4)."""
    paper: str = ""
    """The paper's row it stands for."""
    curve: bool = False
    """Keep a checkpoint every ``selfdistill.curve_every`` steps for RP-Fig4 (accuracy vs wall-clock)."""


_SD = SelfDistillSpec()
_STANDARD = SelfDistillSpec(consistency="none")
RP_ARMS: dict[str, RPArm] = {
    "rp_standard": RPArm(_STANDARD, paper="Standard"),
    "rp_longce": RPArm(_STANDARD.with_(longce=True), paper="LongCE"),
    "rp_pose": RPArm(_STANDARD.with_(standard_clm=False), paper="PoSE (CLM on the skip view)"),
    "rp_cyclic": RPArm(_SD.with_(view="cyclic"), paper="Ours (cyclic shift)"),
    "rp_skip": RPArm(_SD, paper="Ours (skip)", curve=True),
    "rp_skip_longce": RPArm(_SD.with_(longce=True), paper="Ours (skip) + LongCE"),
    "rp_standard_matched": RPArm(_STANDARD, "matched", "Standard, compute-matched (Fig. 4)", curve=True),
    "rp_standard_early": RPArm(_STANDARD, "early", "Baseline"),
    "rp_skip_early": RPArm(_SD, "early", "Ours"),
    "rp_fwd_kl": RPArm(_SD.with_(direction="forward"), "early", "w/ forward KL"),
    "rp_clm": RPArm(_SD.with_(consistency="clm"), "early", "w/ CLM"),
    "rp_fixed_skip": RPArm(_SD.with_(fixed_split=True), "early", "w/o random skip (s = y = L/2)"),
    "rp_dropout": RPArm(SelfDistillSpec(view="none", perturbation="dropout"), "early", "Dropout"),
    "rp_attn_noise": RPArm(SelfDistillSpec(view="none", perturbation="attention_noise"), "early", "Attention noise"),
    "rp_y050": RPArm(_SD.with_(max_skip=0.5), "early", "Y = L/2"),
    "rp_y200": RPArm(_SD.with_(max_skip=2.0), "early", "Y = 2L"),
    "rp_nope": RPArm(_SD.with_(view="nope"), "early", "NoPE"),
    "rp_dilation": RPArm(_SD.with_(view="dilation"), "early", "Random dilation [0.5, 2]"),
    "rp_chunk_perm": RPArm(_SD.with_(view="chunk_permutation"), "early", "Chunked permutation"),
    "rp_lam020": RPArm(_SD.with_(lam=0.2), "early", "lambda = 0.2"),
    "rp_lam050": RPArm(_SD.with_(lam=0.5), "early", "lambda = 0.5"),
    "rp_lam200": RPArm(_SD.with_(lam=2.0), "early", "lambda = 2"),
}
"""The self-distillation comparison (Tables 1-5, 8-11, Fig. 4): every arm trains on full-length rows at the
target with ``selfdistill.rope_theta``; ``rp_standard`` is FLT with that RoPE base (the paper's Standard: plain CE,
also CDT's CE baseline, CD-Tab2) and ``rp_longce`` the same with LongCE's loss (``python -m repro train --method
longce``)."""


def rp_arm(name: str) -> RPArm | None:
    """The :class:`RPArm` of a self-distillation arm name (replicate suffix allowed), else None."""
    return RP_ARMS.get(split_seed(name)[0])


def _rp(name: str) -> RPArm:
    arm = rp_arm(name)
    if arm is None:
        raise ValueError(f"{name!r} is not a self-distillation arm; allowed: {', '.join(RP_ARMS)} "
                         "(optionally @seed<k>)")
    return arm


def rp_schedule(p: Profile, name: str) -> tuple[int, int | None]:
    """``(max_steps, stop_at)`` of a self-distillation arm: the cosine horizon and where it stops (None: at it)."""
    arm = _rp(name)
    steps = p.extend.steps
    if arm.schedule == "early":
        return steps, p.selfdistill.ablation_steps
    if arm.schedule == "matched":
        return max(steps, int(round(steps * p.selfdistill.matched_steps_ratio))), None
    return steps, None


def rp_steps(p: Profile, name: str) -> int:
    """Optimizer steps the arm actually trains."""
    max_steps, stop_at = rp_schedule(p, name)
    return stop_at or max_steps


def longce_config(p: Profile) -> LongCEConfig:
    """The profile's LongCE settings (``selfdistill.longce_window``, ``longce_stride``)."""
    return LongCEConfig(window=p.selfdistill.longce_window, stride=p.selfdistill.longce_stride)


def selfdistill_method(p: Profile, name: str, tokenizer, corpus_rows, seed: int | None = None) -> SelfDistillation:
    """The :class:`SelfDistillation` of a named arm with the profile's settings, on FLT's rows."""
    arm = _rp(name)
    inner = extension_method(p, "flt", tokenizer, corpus_rows, seed=seed)
    return SelfDistillation(name, arm.spec, inner, seed=p.extend.seed if seed is None else seed,
                            pad_id=tokenizer.pad_token_id, bf16=p.selfdistill.bf16,
                            longce=longce_config(p) if arm.spec.longce else None, stop_at=rp_schedule(p, name)[1])


SCHEDULE_FIELDS = {"early": ("ablation_steps",), "matched": ("matched_steps_ratio",)}
"""The ``selfdistill`` field each schedule reads: only an arm of that schedule has it in its key (raising the
matched Standard's steps retrains that arm alone)."""


def rp_cache_fields(p: Profile, arm: RPArm) -> dict:
    """What of the profile a self-distillation arm's weights depend on beyond ``extend`` and the base."""
    sd = p.selfdistill
    used = ("rope_theta", "bf16", "longce_window", "longce_stride", *SCHEDULE_FIELDS.get(arm.schedule, ()))
    return {"rp": asdict(arm.spec), "schedule": arm.schedule, "selfdistill": {k: getattr(sd, k) for k in used}}


def build(p: Profile, name: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """An ``rp_*`` arm: ``selfdistill.rope_theta``, positions up to the view's largest index, the dropout control's
    dropout (switched off for evaluation); cosine over the arm's horizon (:func:`rp_schedule`) at
    ``selfdistill.bf16``; a checkpoint every ``selfdistill.curve_every`` steps for the arms with a curve (RP-Fig4)."""
    stem = split_seed(name)[0]
    arm = _rp(stem)
    need_data(name, "rows", data)
    model = {"rope": rope_parameters("default", p.selfdistill.rope_theta),
             "max_positions": arm.spec.max_index(p.extend.target_window) + 1}
    dropout = arm.spec.perturbation == "dropout"
    if dropout:
        model["overrides"] = {"attention_dropout": arm.spec.dropout}
    max_steps = rp_schedule(p, stem)[0]
    method = None if data is None else selfdistill_method(p, stem, tokenizer, data.corpus_rows)
    return ArmSpec(name, method, model, TrainConfig.from_section(p.extend, max_steps, schedule="cosine",
                                                                 bf16=p.selfdistill.bf16, device=p.run.device),
                   rp_cache_fields(p, arm), steps=rp_steps(p, stem),
                   curve_every=p.selfdistill.curve_every if arm.curve else 0,
                   final_config={"attention_dropout": 0.0} if dropout else {})
