"""The trainer (:class:`Trainer`): AdamW, the schedule, clipping, bf16, gradient accumulation, checkpoints and
resume, single- or multi-process; the final folder's ``train_summary.json`` records :func:`run_environment`."""

from __future__ import annotations

import random
import shutil
import time
from functools import partial
from pathlib import Path
from typing import Any, Callable

import numpy as np
import torch
from safetensors.torch import load_file, save_file
from tqdm.auto import tqdm

from repro import distributed
from repro.accumulation import WEIGHTINGS, accumulation_scales, answer_count, merge_metrics, micro_batches, \
    target_weight
from repro.checkpoint_state import check_trainer_state, load_trainer_state, save_trainer_state
from repro.data.balance import order_by_cost
from repro.devices import model_device, resolve_device
from repro.io import append_jsonl, atomic_dir, atomic_write_json, atomic_write_text, read_json
from repro.lora import is_lora, save_final
from repro.manifest import environment
from repro.methods.protocol import Method, StepState
from repro.parallel.rows import setup
from repro.train.checkpoints import drop_tied, latest_checkpoint, remove_leftovers, step_of, untie
from repro.train.config import ADAMW_IMPLS, TrainConfig, lr_at
from repro.train.failures import Interrupted, NonFiniteLoss
from repro.train.step import clm_step


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
            (lambda m, b, state: clm_step(m, b, cfg.bf16, cfg.chunked_loss))
        """``loss_fn(model, batch, state)``: the objective of one (micro-)batch at :class:`StepState` ``state``."""
        self.lr_scale = getattr(method, "lr_scale", None)
        self.weighting = getattr(method, "micro_batch_weighting", "tokens")
        if self.weighting not in WEIGHTINGS:
            raise ValueError(f"method {method.name!r}: micro_batch_weighting={self.weighting!r}; allowed: "
                             f"{', '.join(WEIGHTINGS)}")
        if self.weighting != "tokens" and accelerator is not None:
            raise ValueError(f"method {method.name!r} weights its micro-batches {self.weighting!r}, which the "
                             "multi-process trainer does not offer; allowed: one process, or micro_batch_weighting "
                             "'tokens'")
        self.progress = progress
        if accelerator is None:  # a multi-process engine places the model itself (repro.distributed.prepare)
            model.to(resolve_device(cfg.device))
        if cfg.gradient_checkpointing:
            if not hasattr(model, "activation_checkpointing_enable"):
                raise ValueError(f"gradient_checkpointing=True needs a transformers model; {type(model).__name__} has "
                                 "no activation_checkpointing_enable (allowed: gradient_checkpointing=False)")
            model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
        self.opt = build_optimizer(model, cfg)
        self.step = 0
        self.accelerator, self.engine = accelerator, None  # multi-process: repro.distributed
        self.rows = None
        """This process's sequence-parallel group (:class:`repro.parallel.rows.RowGroup`; None without)."""
        if cfg.sequence_parallel > 1:
            self.rows = setup(model, accelerator, cfg.sequence_parallel, cfg.sequence_layout)
        if accelerator is not None:
            plugin = accelerator.state.deepspeed_plugin
            if is_lora(model) and plugin is not None and plugin.zero_stage == 3:
                raise ValueError("LoRA adapters with DeepSpeed ZeRO stage 3 are not supported (the merged final "
                                 "model needs whole weights); allowed: LoRA single-process, under DDP, or ZeRO 0-2")

            self.engine, self.opt = distributed.prepare(accelerator, model, self.opt, self.loss_fn, cfg.grad_clip)
        self.main = accelerator is None or accelerator.is_main_process
        """Whether this process writes logs, checkpoints and the final model (rank 0)."""
        self.world_size = 1 if accelerator is None else accelerator.num_processes
        """Training processes (each trains its share of every step's rows)."""
        self.device = model_device(self.model)
        """Where the model's weights are: every batch is built there."""

    # -- checkpoints -----------------------------------------------------------------------
    def save_checkpoint(self) -> Path:
        path = self.out_dir / f"ckpt-{self.step}"
        if self.engine is not None:
            distributed.save_engine_checkpoint(self.accelerator, self.engine, path, self._write_checkpoint_files)
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
        save_file(untie(state), folder / "model.safetensors")
        atomic_write_json(folder / "state.json", {"step": self.step, "method": self.method.state_dict()})

    def load_checkpoint(self, path: Path) -> None:
        if self.engine is not None:
            distributed.load_engine_checkpoint(self.accelerator, path)
        else:
            self._load_weights_and_optimizer(path)
        for g in self.opt.param_groups:  # torch takes the implementation from the checkpoint; this run's config rules
            g.update(adamw_flags(self.cfg.adamw_impl))
        meta = read_json(path / "state.json")
        self.step = int(meta["step"])
        self.method.load_state_dict(meta["method"])
        # drop metric lines logged after this checkpoint (they will be recomputed)
        log = self.out_dir / "metrics.jsonl"
        if self.main and log.exists():
            lines = [ln for ln in log.read_text().splitlines() if ln and step_of(ln) < self.step]
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

    def _gradients(self, batch: dict[str, torch.Tensor], lr: float) -> dict[str, float]:
        """Loss and backward of one step's ``batch`` at learning rate ``lr`` (in micro-batches with
        ``micro_batch_size``, the gradient still the whole batch's); returns the step's metrics."""
        if self.engine is not None:
            return distributed.gradients(self.accelerator, self.engine, batch, self.cfg.micro_batch_size,
                             self.cfg.reorder_microbatches, self.rows, StepState(self.step, lr))
        parts = micro_batches(batch, self.cfg.micro_batch_size)
        state = StepState(self.step, lr, len(parts))
        if len(parts) == 1:
            loss, metrics = self.loss_fn(self.model, batch, state)
            self.opt.zero_grad(set_to_none=True)
            loss.backward()
            return metrics
        if self.cfg.reorder_microbatches:
            parts = [parts[i] for i in order_by_cost(parts)]
        scales = accumulation_scales([target_weight(p) for p in parts], weighting=self.weighting)
        self.opt.zero_grad(set_to_none=True)
        got = []
        for part, scale in zip(parts, scales):
            loss, metrics = self.loss_fn(self.model, part, state)
            (loss * scale).backward()
            got.append(metrics)
        return {**merge_metrics(got, scales, [answer_count(p) for p in parts]), "micro_batches": len(parts)}

    def train(self, resume: bool = True, stop_after: int | None = None) -> Path:
        threads = torch.get_num_threads()
        if self.cfg.threads:
            torch.set_num_threads(self.cfg.threads)
        try:
            return self._train(resume, stop_after)
        except KeyboardInterrupt:
            # Ctrl-C can land between a temporary folder's creation and the cleanup that guards it (inside
            # mkdtemp, or in the context manager's __enter__): whatever half-written folder is left goes now.
            if self.main and self.out_dir.is_dir():
                remove_leftovers(self.out_dir)
            raise
        finally:
            torch.set_num_threads(threads)

    def _train(self, resume: bool, stop_after: int | None) -> Path:
        self.out_dir.mkdir(parents=True, exist_ok=True)
        if self.main:
            remove_leftovers(self.out_dir)
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
            batch = {k: torch.as_tensor(v, device=self.device) for k, v in self.method.batch(self.step).items()}
            lr = self._set_lr()
            metrics = self._gradients(batch, lr)
            NonFiniteLoss.check(self.step, "loss", metrics["loss"], self.out_dir)
            check_norm = partial(NonFiniteLoss.check, self.step, "grad_norm", out_dir=self.out_dir)
            if self.engine is not None:
                gnorm = distributed.optimizer_step(self.accelerator, self.engine, self.opt, self.model,
                                                   self.cfg.grad_clip, check_norm)
            else:
                gnorm = clip_gradients(self.model, self.cfg.grad_clip)
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
            state = distributed.full_state_dict(self.accelerator, self.engine)
        if self.main:
            with atomic_dir(final) as tmp:
                if state is None or is_lora(self.model):  # LoRA (DDP: whole weights on every rank): merged
                    save_final(self.model, tmp)
                else:
                    self.model.save_pretrained(tmp, state_dict=drop_tied(state, self.model))  # tied: saved once
                atomic_write_json(tmp / "train_summary.json", {
                    "steps": self.step, "method": self.method.name, "method_state": self.method.state_dict(),
                    "seconds_this_call": time.perf_counter() - t_start, **run_environment()})
        if self.accelerator is not None:
            self.accelerator.wait_for_everyone()
        return final


def adamw_flags(impl: str) -> dict[str, bool | None]:
    """torch ``AdamW``'s ``foreach`` and ``fused`` arguments of :attr:`TrainConfig.adamw_impl` ``impl``; ``for-loop``
    is torch's defaults (None, None: the for-loop on the CPU), exactly the optimizer of earlier versions."""
    if impl not in ADAMW_IMPLS:
        raise ValueError(f"adamw_impl={impl!r}; allowed: {', '.join(ADAMW_IMPLS)}")
    return {"foreach": True if impl == "foreach" else None, "fused": True if impl == "fused" else None}


def build_optimizer(model: torch.nn.Module, cfg: TrainConfig) -> torch.optim.AdamW:
    """The trainer's AdamW over ``model``'s trainable parameters: weight decay ``cfg.weight_decay`` on matrices,
    none on vectors (norms, biases), ``cfg.betas``, ``cfg.lr`` and the implementation ``cfg.adamw_impl`` (fused by
    default, as HF ``Trainer``). Build it after the model is on its device: ``fused`` checks the parameters'."""
    decay, no_decay = [], []
    for p in model.parameters():
        if p.requires_grad:  # frozen weights (LoRA's base, repro.lora) get no optimizer state
            (no_decay if p.ndim < 2 else decay).append(p)
    return torch.optim.AdamW([{"params": decay, "weight_decay": cfg.weight_decay},
                              {"params": no_decay, "weight_decay": 0.0}], lr=cfg.lr, betas=cfg.betas,
                             **adamw_flags(cfg.adamw_impl))


def clip_gradients(model: torch.nn.Module, grad_clip: float) -> torch.Tensor:
    """Clip ``model``'s gradients to total norm ``grad_clip`` (0: no clipping) and return the norm before it, as HF
    ``Trainer`` does (torch's ``clip_grad_norm_`` with its own choice of kernels: per tensor on the CPU, where its
    ``foreach`` norms are no faster, ``foreach`` on CUDA)."""
    return torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip or float("inf"))


def run_environment() -> dict:
    """What a run's bits depend on besides its config: :func:`repro.manifest.environment` (threads, torch version,
    CPU capability and model, library versions) and the number of training processes (``world_size``, 1 without a
    process group)."""
    return {**environment(), "world_size": distributed.world_size()}
