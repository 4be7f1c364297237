"""One trainer for every method: AdamW, warmup + cosine/constant, clipping, bf16, checkpoints.

A *method* (:class:`Method`; the built-in ones are registered in
:mod:`repro.methods`) produces batches as a pure function of the step, may
compute its own loss, and may keep a small state (the base curriculum's phase);
the trainer owns optimisation, logging and checkpoints, and knows no method.
The loss is averaged over valid (weighted) target tokens of the whole batch,
not per sequence (ProLong A.3), also when the batch is run in micro-batches
(gradient accumulation, :mod:`repro.accumulation`).

Checkpoints (every ``checkpoint_every`` steps, written atomically) hold the
weights (safetensors), optimizer and RNG states (safetensors + JSON, never a
pickle: :mod:`repro.checkpoint_state`), the method state and the step (the data
position). A killed run resumed from its last checkpoint ends with the same
weights as an uninterrupted one. A non-finite loss or gradient norm stops the
run before its optimizer step (:class:`NonFiniteLoss`), leaving the last
checkpoint as it was; a full disk while writing a checkpoint or the final folder
leaves nothing half-written (:class:`repro.io.DiskFull`).

Multi-process (``Trainer(accelerator=...)``, :mod:`repro.distributed`): DDP or DeepSpeed through ``accelerate``;
each rank trains on its rows of the global batch with the global token-mean loss, rank 0 logs and writes.
"""

from __future__ import annotations

import json
import math
import random
import shutil
import time
from dataclasses import dataclass, fields
from functools import partial
from pathlib import Path
from typing import Any, Callable, Protocol

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from repro.accumulation import accumulation_scales, answer_count, merge_metrics, micro_batches, target_weight
from repro.checkpoint_state import check_trainer_state, load_trainer_state, save_trainer_state
from repro.data.balance import order_by_cost
from repro.io import append_jsonl, atomic_dir, atomic_write_json, atomic_write_text, read_json
from repro.lora import is_lora, save_final
from repro.loss import chunked_clm_loss, weighted_clm_loss  # noqa: F401  (re-exported)
from repro.models import forward, forward_hidden, plain_head_weight


@dataclass(frozen=True)
class TrainConfig:
    """Optimisation settings shared by every method."""

    max_steps: int
    """Upper bound on optimizer steps (a method may finish earlier)."""
    lr: float
    """Peak learning rate."""
    warmup_steps: int = 0
    """Linear warmup steps."""
    schedule: str = "cosine"
    """``cosine`` (decay to ``min_lr_ratio`` x lr at ``max_steps``) or ``constant``."""
    min_lr_ratio: float = 0.1
    """Floor of the cosine decay."""
    weight_decay: float = 0.0
    """AdamW weight decay."""
    betas: tuple[float, float] = (0.9, 0.95)
    """AdamW betas."""
    grad_clip: float = 1.0
    """Max gradient norm (0 disables clipping)."""
    gradient_checkpointing: bool = False
    """Recompute each decoder layer's activations in the backward instead of keeping them (the model's public
    ``activation_checkpointing_enable``, non-reentrant: also for peft models with frozen embeddings). Same loss
    and gradients; self-distillation's prefix-shared pass then runs as two full passes
    (:mod:`repro.methods.selfdistill`)."""
    bf16: bool = False
    """bf16 autocast for the forward pass."""
    chunked_loss: bool = True
    """Loss from the final hidden states in chunks, never the batch's full logits (:mod:`repro.loss`)."""
    threads: int = 0
    """torch intra-op threads for this run (0: leave the process setting). Pinned and recorded in
    ``train_summary.json``: the same count on the same CPU type gives bit-identical weights."""
    checkpoint_every: int = 100
    """Checkpoint interval in steps (0: only the final weights)."""
    keep_checkpoints: int = 1
    """Intermediate checkpoints kept on disk (older ones are deleted)."""
    seed: int = 0
    """Seed of torch/numpy/python RNGs."""
    micro_batch_size: int = 0
    """Gradient accumulation: rows per forward/backward pass. A step's batch is split into micro-batches of this
    many rows whose gradients add up to the whole batch's (the loss stays the mean over the step's valid weighted
    target tokens, :mod:`repro.accumulation`). 0, or at least the batch's rows: the whole batch in one pass."""
    reorder_microbatches: bool = False
    """With accumulation, run a step's micro-batches in descending order of sum of squared document lengths
    (ProLong's sort, :mod:`repro.data.balance`). The update is the same up to float summation order; the gain is
    for data-parallel workers (:mod:`repro.bench.reorder_sim`)."""

    @classmethod
    def from_section(cls, section: Any, max_steps: int, **overrides: Any) -> "TrainConfig":
        """The one place a profile section becomes a ``TrainConfig``: every field of this class that
        ``section`` (e.g. ``profile.base`` or ``profile.extend``) also has is copied, then ``overrides``."""
        names = {f.name for f in fields(cls)} - {"max_steps"}
        bad = sorted(set(overrides) - names)
        if bad:
            raise ValueError(f"TrainConfig has no field(s) {bad}; allowed: {sorted(names)}")
        kw = {n: getattr(section, n) for n in names if hasattr(section, n)}
        return cls(max_steps=max_steps, **{**kw, **overrides})

    def __post_init__(self):
        if self.threads < 0:
            raise ValueError(f"threads={self.threads}; allowed: 0 (leave as is) or >= 1")
        if self.schedule not in ("cosine", "constant"):
            raise ValueError(f"schedule={self.schedule!r}; allowed: cosine, constant")
        if self.max_steps < 1:
            raise ValueError(f"max_steps={self.max_steps}; allowed: >= 1")
        if not 0 < self.lr <= 1:
            raise ValueError(f"lr={self.lr}; allowed: 0 < lr <= 1")
        if self.micro_batch_size < 0:
            raise ValueError(f"micro_batch_size={self.micro_batch_size}; allowed: 0 (no accumulation) or >= 1 rows")


def cosine_decay(t: float, floor: float) -> float:
    """Cosine from 1 at ``t = 0`` down to ``floor`` at ``t = 1``."""
    return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * t))


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Learning rate multiplier for ``step`` (0-based)."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    span = max(cfg.max_steps - cfg.warmup_steps, 1)
    t = min((step - cfg.warmup_steps) / span, 1.0)
    return cosine_decay(t, cfg.min_lr_ratio)


class Method(Protocol):
    """What the trainer needs from a method (every member is called by :class:`Trainer`)."""

    name: str
    """Shown in the progress bar and written to the final folder's ``train_summary.json``."""

    def batch(self, step: int) -> dict[str, np.ndarray]:
        """The batch of ``step`` (``input_ids``, ``position_ids``, ``weights``, optional ``doc_ids``,
        ``answer_group``): a pure function of the step and the state, so a resumed run sees the same data."""
        ...

    def observe(self, step: int, metrics: dict[str, float]) -> None:
        """Called after each optimizer step with that step's metrics (curricula advance here)."""
        ...

    def finished(self, step: int) -> bool:
        """True to stop before ``step`` (a curriculum that decides its own length)."""
        ...

    def state_dict(self) -> dict:
        """JSON-able state saved in every checkpoint; scalar entries are logged as ``method_<key>``."""
        ...

    def load_state_dict(self, state: dict) -> None:
        """Restore :meth:`state_dict` on resume."""
        ...


class MethodHooks(Protocol):
    """Optional hooks of a method (:data:`OPTIONAL_HOOKS`); the trainer calls each one a method defines."""

    def lr_scale(self, step: int) -> float:
        """Multiplies the schedule's learning rate for ``step`` (default 1): a method whose phases are
        decided during training, e.g. the base curriculum's anneal."""
        ...

    def loss(self, model: torch.nn.Module, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
        """The training objective of one batch: ``(scalar loss, metrics with a "loss" entry)`` (default:
        :func:`clm_step`, the weighted CLM loss). Objectives that are not plain CLM (self-distillation's
        KL term, LongCE, CDT) define it.

        With gradient accumulation (``TrainConfig.micro_batch_size``) ``batch`` is one micro-batch, and the loss,
        taken to be a token mean over it, is scaled by the micro-batch's share of the step's valid weight (sum of
        ``weights[:, 1:]``, :func:`repro.accumulation.accumulation_scales`). That gives the whole batch's gradient
        when the loss is ``sum of per-token terms / sum of weights`` with terms that do not depend on other rows
        (CLM, LongCE's official ``mean``). Otherwise the step's objective is this weighted sum of the micro-batches'
        objectives, close to but not the whole batch's: LongCE's ``weighted_mean``, self-distillation's KL term (a
        mean over rows), and CDT, whose embedding shift ``lr * beta * dL/dE`` comes from the micro-batch's own mean
        loss (``W / W_i`` times the whole batch's)."""
        ...

    def before_step(self, step: int, lr: float) -> None:
        """Called before the loss of ``step`` with that step's learning rate (CDT's denoising, Eq. 3, uses it)."""
        ...


OPTIONAL_HOOKS: tuple[str, ...] = ("lr_scale", "loss", "before_step")
"""The names of :class:`MethodHooks`."""


def _whole_answers(correct: torch.Tensor, groups: torch.Tensor) -> tuple[int, int]:
    """(answers whose every token is correct, answers) from per-token ``correct`` and answer ``groups`` (>= 0)."""
    n = int(groups.max()) + 1
    wrong = torch.zeros(n, dtype=torch.long).index_add_(0, groups, (~correct).long())
    present = torch.zeros(n, dtype=torch.long).index_add_(0, groups, torch.ones_like(groups))
    return int(((wrong == 0) & (present > 0)).sum()), int((present > 0).sum())


def answer_exact_match(logits: torch.Tensor, input_ids: torch.Tensor, answer_group: torch.Tensor) -> tuple[int, int]:
    """Teacher-forced exact match of answers: (answers fully correct, answers)."""
    groups = answer_group[:, 1:]
    sel = groups >= 0
    if not sel.any():
        return 0, 0
    return _whole_answers(logits[:, :-1].argmax(-1)[sel] == input_ids[:, 1:][sel], groups[sel])


def answer_exact_match_hidden(hidden: torch.Tensor, head: torch.Tensor, input_ids: torch.Tensor,
                              answer_group: torch.Tensor) -> tuple[int, int]:
    """:func:`answer_exact_match` from final hidden states: logits only at the answer tokens."""
    groups = answer_group[:, 1:]
    sel = groups >= 0
    if not sel.any():
        return 0, 0
    pred = (hidden[:, :-1][sel].to(head.dtype) @ head.T).argmax(-1)
    return _whole_answers(pred == input_ids[:, 1:][sel], groups[sel])


def finish_metrics(loss: torch.Tensor, metrics: dict[str, float], hidden: torch.Tensor | None,
                   head: torch.Tensor | None, batch: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, float]]:
    """``(loss, metrics)`` of an objective, with ``loss`` and (when the batch has answers and the model a plain
    head) the teacher-forced ``train_em`` added to ``metrics``."""
    if "answer_group" in batch and head is not None and hidden is not None:
        with torch.no_grad():
            hit, total = answer_exact_match_hidden(hidden.detach(), head.detach(), batch["input_ids"],
                                                   batch["answer_group"])
        if total:
            metrics["train_em"] = hit / total
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def clm_step(model, batch: dict[str, torch.Tensor], bf16: bool, chunked: bool = True,
             chunk: int = 2048) -> tuple[torch.Tensor, dict[str, float]]:
    """Forward + weighted CLM loss + training metrics for one batch.

    ``chunked`` (default) computes the loss with :func:`repro.loss.chunked_clm_loss` from the final
    hidden states, for models whose head is a plain matrix (:func:`repro.models.plain_head_weight`);
    otherwise, or with ``chunked=False``, from the model's logits (:func:`weighted_clm_loss`).
    """
    device = "cpu" if batch["input_ids"].device.type == "cpu" else "cuda"
    head = plain_head_weight(model) if chunked else None
    metrics: dict[str, float] = {}
    if head is not None:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            hidden = forward_hidden(model, batch["input_ids"], batch["position_ids"], batch.get("doc_ids"))
        loss = chunked_clm_loss(hidden, head, batch["input_ids"], batch["weights"], chunk,
                                torch.bfloat16 if bf16 else None)
        if "answer_group" in batch:
            with torch.no_grad():
                hit, total = answer_exact_match_hidden(hidden.detach(), head.detach(), batch["input_ids"],
                                                       batch["answer_group"])
            if total:
                metrics["train_em"] = hit / total
    else:
        with torch.autocast(device, dtype=torch.bfloat16, enabled=bf16):
            out = forward(model, batch["input_ids"], batch["position_ids"], batch.get("doc_ids"))
        loss, _ = weighted_clm_loss(out.logits, batch["input_ids"], batch["weights"])
        if "answer_group" in batch:
            hit, total = answer_exact_match(out.logits.detach(), batch["input_ids"], batch["answer_group"])
            if total:
                metrics["train_em"] = hit / total
    metrics["loss"] = float(loss.detach())
    return loss, metrics


def latest_checkpoint(out_dir: Path) -> Path | None:
    ckpts = sorted(out_dir.glob("ckpt-*"), key=lambda p: int(p.name.split("-")[1]))
    ckpts = [c for c in ckpts if (c / "state.json").exists()]
    return ckpts[-1] if ckpts else None


class Trainer:
    """Trains ``model`` with ``method`` under ``cfg``, writing into ``out_dir``.

    ``out_dir/metrics.jsonl`` gets one line per step; ``out_dir/ckpt-<step>/`` the
    checkpoints; ``out_dir/final/`` the final model (``save_pretrained``) once done; for a LoRA model
    (:mod:`repro.lora`) the merged model, with the adapters in ``final/adapter/``.
    ``stop_after`` (tests) raises :class:`Interrupted` after that many steps of this call,
    as if the process had been killed.
    """

    def __init__(self, model: torch.nn.Module, method: Method, cfg: TrainConfig, out_dir: str | Path,
                 loss_fn: Callable | None = None, progress: bool = True, accelerator: Any = None):
        self.model, self.method, self.cfg = model, method, cfg
        self.out_dir = Path(out_dir)
        self.loss_fn = loss_fn or getattr(method, "loss", None) or \
            (lambda m, b: clm_step(m, b, cfg.bf16, cfg.chunked_loss))
        self.lr_scale = getattr(method, "lr_scale", None)
        self.before_step = getattr(method, "before_step", None)
        self.progress = progress
        if cfg.gradient_checkpointing:
            if not hasattr(model, "activation_checkpointing_enable"):
                raise ValueError(f"gradient_checkpointing=True needs a transformers model; {type(model).__name__} has "
                                 "no activation_checkpointing_enable (allowed: gradient_checkpointing=False)")
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        decay, no_decay = [], []
        for n, p in model.named_parameters():
            if p.requires_grad:  # frozen weights (LoRA's base, repro.lora) get no optimizer state
                (no_decay if p.ndim < 2 else decay).append(p)
        self.opt = torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                                      {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=cfg.betas)
        self.step = 0
        self.accelerator, self.engine = accelerator, None  # multi-process: repro.distributed
        if accelerator is not None:
            from repro import distributed

            plugin = accelerator.state.deepspeed_plugin
            if is_lora(model) and plugin is not None and plugin.zero_stage == 3:
                raise ValueError("LoRA adapters with DeepSpeed ZeRO stage 3 are not supported (the merged final "
                                 "model needs whole weights); allowed: LoRA single-process, under DDP, or ZeRO 0-2")

            self.engine, self.opt = distributed.prepare(accelerator, model, self.opt, self.loss_fn, cfg.grad_clip)
        self.main = accelerator is None or accelerator.is_main_process
        """Whether this process writes logs, checkpoints and the final model (rank 0)."""
        self.world_size = 1 if accelerator is None else accelerator.num_processes
        """Training processes (each trains its share of every step's rows)."""

    # -- checkpoints -----------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        path = self.out_dir / f"ckpt-{self.step}"
        if self.engine is not None:
            from repro.distributed import save_engine_checkpoint

            save_engine_checkpoint(self.accelerator, self.engine, path, self._write_checkpoint_files)
            if not self.main:
                return path
        else:
            with atomic_dir(path) as tmp:
                self._write_checkpoint_files(tmp, {k: v.detach().contiguous().clone()
                                                   for k, v in self.model.state_dict().items()})
                save_trainer_state(tmp, self.opt)
        old = sorted((c for c in self.out_dir.glob("ckpt-*") if c != path), key=lambda p: int(p.name.split("-")[1]))
        for c in old[:max(len(old) - self.cfg.keep_checkpoints + 1, 0)]:
            shutil.rmtree(c, ignore_errors=True)
        return path

    def _write_checkpoint_files(self, folder: Path, state: dict[str, torch.Tensor]) -> None:
        """The weights and the step/method state of a checkpoint (rank 0's files of a multi-process one)."""
        save_file(_untie(state), folder / "model.safetensors")
        atomic_write_json(folder / "state.json", {"step": self.step, "method": self.method.state_dict()})

    def load_checkpoint(self, path: Path) -> None:
        if self.engine is not None:
            from repro.distributed import load_engine_checkpoint

            load_engine_checkpoint(self.accelerator, path)
        else:
            self._load_weights_and_optimizer(path)
        meta = read_json(path / "state.json")
        self.step = int(meta["step"])
        self.method.load_state_dict(meta["method"])
        # drop metric lines logged after this checkpoint (they will be recomputed)
        log = self.out_dir / "metrics.jsonl"
        if self.main and log.exists():
            lines = [ln for ln in log.read_text().splitlines() if ln and _step_of(ln) < self.step]
            atomic_write_text(log, "".join(ln + "\n" for ln in lines))

    def _load_weights_and_optimizer(self, path: Path) -> None:
        check_trainer_state(path)  # before anything is changed
        state = load_file(path / "model.safetensors")
        own = self.model.state_dict()
        missing = [k for k in own if k not in state and "lm_head" not in k]
        unexpected = [k for k in state if k not in own]
        if missing or unexpected:
            raise ValueError(f"checkpoint {path} does not match the model: missing {missing}, unexpected {unexpected}; "
                             "allowed: a checkpoint of this model's architecture")
        shapes = [f"{k} {tuple(state[k].shape)} vs {tuple(own[k].shape)}" for k in state
                  if tuple(state[k].shape) != tuple(own[k].shape)]
        if shapes:
            raise ValueError(f"checkpoint {path} does not match the model: {len(shapes)} tensor(s) of another shape "
                             f"(checkpoint vs model), first {shapes[:3]}; allowed: a checkpoint of this model's "
                             "architecture")
        self.model.load_state_dict(state, strict=False)  # checked above: only a tied head may be absent
        load_trainer_state(path, self.opt)

    # -- loop ------------------------------------------------------------------------------
    def _set_lr(self) -> float:
        """The learning rate of this step: the schedule's, times the method's ``lr_scale`` if it has one."""
        lr = self.cfg.lr * lr_at(self.cfg, self.step)
        if self.lr_scale is not None:
            lr *= float(self.lr_scale(self.step))
        for g in self.opt.param_groups:
            g["lr"] = lr
        return lr

    def _gradients(self, batch: dict[str, torch.Tensor]) -> dict[str, float]:
        """Loss and backward of one step's ``batch`` (in micro-batches with ``micro_batch_size``, the gradient
        still the whole batch's); returns the step's metrics."""
        if self.engine is not None:
            from repro.distributed import gradients

            return gradients(self.accelerator, self.engine, batch, self.cfg.micro_batch_size,
                             self.cfg.reorder_microbatches)
        parts = micro_batches(batch, self.cfg.micro_batch_size)
        if len(parts) == 1:
            loss, metrics = self.loss_fn(self.model, batch)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            return metrics
        if self.cfg.reorder_microbatches:
            parts = [parts[i] for i in order_by_cost(parts)]
        scales = accumulation_scales([target_weight(p) for p in parts])
        self.opt.zero_grad(set_to_none=True)
        got = []
        for part, scale in zip(parts, scales):
            loss, metrics = self.loss_fn(self.model, part)
            (loss * scale).backward()
            got.append(metrics)
        return {**merge_metrics(got, scales, [answer_count(p) for p in parts]), "micro_batches": len(parts)}

    def train(self, resume: bool = True, stop_after: int | None = None) -> Path:
        threads = torch.get_num_threads()
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        try:
            return self._train(resume, stop_after)
        finally:
            torch.set_num_threads(threads)

    def _train(self, resume: bool, stop_after: int | None) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.main:
            _remove_leftovers(self.out_dir)
        final = self.out_dir / "final"
        if resume and (ckpt := latest_checkpoint(self.out_dir)) is not None:
            self.load_checkpoint(ckpt)
        else:
            torch.manual_seed(self.cfg.seed)
            np.random.seed(self.cfg.seed)
            random.seed(self.cfg.seed)
            if self.main:
                (self.out_dir / "metrics.jsonl").unlink(missing_ok=True)
        self.model.train()
        bar = tqdm(total=self.cfg.max_steps, initial=self.step, desc=f"train {self.method.name}",
                   disable=not (self.progress and self.main), mininterval=2.0)
        done_this_call = 0
        t_start = time.perf_counter()
        while self.step < self.cfg.max_steps and not self.method.finished(self.step):
            if stop_after is not None and done_this_call >= stop_after:
                raise Interrupted(self.step)
            t0 = time.perf_counter()
            batch = {k: torch.as_tensor(v) for k, v in self.method.batch(self.step).items()}
            lr = self._set_lr()
            if self.before_step is not None:
                self.before_step(self.step, lr)
            metrics = self._gradients(batch)
            NonFiniteLoss.check(self.step, "loss", metrics["loss"], self.out_dir)
            check_norm = partial(NonFiniteLoss.check, self.step, "grad_norm", out_dir=self.out_dir)
            if self.engine is not None:
                from repro.distributed import optimizer_step

                gnorm = optimizer_step(self.accelerator, self.engine, self.opt, self.model, self.cfg.grad_clip,
                                       check_norm)
            else:
                gnorm = torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.grad_clip or float("inf"))
                check_norm(gnorm)
                self.opt.step()
            dt = time.perf_counter() - t0
            n_tok = int(batch["input_ids"].numel())
            metrics.update(step=self.step, lr=lr, grad_norm=float(gnorm), seconds=dt,
                           tokens=n_tok, tokens_per_s=n_tok / max(dt, 1e-9))
            self.method.observe(self.step, metrics)
            metrics.update({f"method_{k}": v for k, v in self.method.state_dict().items()
                            if isinstance(v, (int, float, str))})
            if self.main:
                append_jsonl(self.out_dir / "metrics.jsonl", metrics)
            self.step += 1
            done_this_call += 1
            bar.update(1)
            bar.set_postfix(loss=f"{metrics['loss']:.3f}",
                            **({"em": f"{metrics['train_em']:.2f}"} if "train_em" in metrics else {}))
            if self.cfg.checkpoint_every and self.step % self.cfg.checkpoint_every == 0:
                self.save_checkpoint()
        bar.close()
        self.model.eval()
        state = None
        if self.engine is not None:
            from repro.distributed import full_state_dict

            state = full_state_dict(self.accelerator, self.engine)
        if self.main:
            with atomic_dir(final) as tmp:
                if state is None or is_lora(self.model):  # LoRA (DDP: whole weights on every rank): merged
                    save_final(self.model, tmp)
                else:
                    self.model.save_pretrained(tmp, state_dict=state)
                atomic_write_json(tmp / "train_summary.json", {
                    "steps": self.step, "method": self.method.name, "method_state": self.method.state_dict(),
                    "seconds_this_call": time.perf_counter() - t_start, **run_environment()})
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()
        return final


def run_environment() -> dict:
    """What a run's bits depend on besides its config: :func:`repro.manifest.environment` (threads, torch version,
    CPU capability and model, library versions) and the number of training processes (``world_size``, 1 without a
    process group)."""
    from repro.distributed import world_size
    from repro.manifest import environment

    return {**environment(), "world_size": world_size()}


class NonFiniteLoss(FloatingPointError):
    """A step's loss or gradient norm is NaN or infinite: training stops before that step's optimizer update, with
    nothing written for the step (no metrics line, checkpoint or final folder); the last checkpoint is untouched."""

    def __init__(self, step: int, value: float, what: str = "loss", out_dir: str | Path | None = None):
        where = f" in {str(out_dir)!r}" if out_dir is not None else ""
        super().__init__(f"non-finite {what} {value} at step {step} (0-based): training stopped before the "
                         f"optimizer update of that step and wrote nothing for it; allowed: finite values. The last "
                         f"checkpoint{where} is intact; resuming restarts from it (the same data and settings "
                         "reach the same step again: change the data, learning rate or clipping first)")
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


def _untie(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses shared storage: drop the tied output head (rebuilt on load); also under a prefix
    (a peft model's ``base_model.model.``)."""
    for head in [k for k in state if k == "lm_head.weight" or k.endswith(".lm_head.weight")]:
        embed = head[: -len("lm_head.weight")] + "model.embed_tokens.weight"
        if embed in state and torch.equal(state[head], state[embed]):
            state = {k: v for k, v in state.items() if k != head}
    return state


def _step_of(line: str) -> int:
    """The step of a metrics line; a line cut by a kill mid-write (not JSON) reads as after every step, so resuming
    drops it."""
    try:
        return int(json.loads(line).get("step", -1))
    except (ValueError, AttributeError):
        return 1 << 62


def _remove_leftovers(out_dir: Path) -> None:
    """Delete the temporary folders of checkpoint and final writes that a killed run left behind (``atomic_dir``'s
    ``.<name>.<random>.tmp``, a multi-process save's ``.ckpt-<step>.partial``): never read, they would pile up."""
    for p in [*out_dir.glob(".ckpt-*.tmp"), *out_dir.glob(".ckpt-*.partial"), *out_dir.glob(".final.*.tmp")]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
