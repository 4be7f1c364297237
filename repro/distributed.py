"""The process-group view of a training run: which rank this is, its rows of the batch, its loss scale.

A launcher (``torchrun``, ``accelerate launch --multi_gpu``, or any that sets ``RANK``/``WORLD_SIZE``/
``MASTER_ADDR``/``MASTER_PORT``) starts one process per worker; each builds an ``accelerate.Accelerator``
(:func:`make_accelerator`: DDP, or DeepSpeed from a JSON config such as ``configs/deepspeed_zero3.json``; gloo on
CPU, nccl on CUDA) and hands it to :class:`repro.train.Trainer`, which calls the helpers here:

* every rank builds the step's *global* batch (a pure function of the step) and keeps its contiguous share of the
  rows (:func:`shard_rows`);
* the loss stays ProLong's mean over the valid weighted target tokens of the whole global batch (App. A.3): a rank
  with local weight ``W_r`` (:func:`repro.accumulation.target_weight`) of the all-reduced total ``W`` scales its
  local token-mean loss by ``W_r / W x world`` (:func:`rank_scales`, also over its micro-batches), so the engine's
  gradient average over ranks is the gradient of the global token mean; the logged loss is the global one
  (:func:`global_metrics`);
* the engine runs the whole objective inside its forward (:class:`LossModule`), so DDP's gradient hooks and ZeRO-3's
  parameter gathering see every method's loss, whatever part of the model it calls.

Checkpoints (:func:`save_engine_checkpoint`): rank 0 writes the consolidated weights, every rank the engine's own
state (optimizer, ZeRO shards, RNG) through ``accelerator.save_state`` into ``engine/``, all into a hidden
``.ckpt-<step>.partial`` folder that rank 0 renames to ``ckpt-<step>`` only after every rank has finished writing
(and removes when its own files fail, e.g. a full disk: :class:`repro.io.DiskFull`). The engine's state is in
the engine's own format (accelerate reads it with ``torch.load(weights_only=True)``; DeepSpeed's ZeRO files are
torch pickles that DeepSpeed reads with a full unpickle: resume only multi-process checkpoints you wrote), unlike
the single-process trainer's safetensors + JSON (:mod:`repro.checkpoint_state`).
One node (or a shared file system) is assumed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import shutil
import socket
import warnings
from pathlib import Path
from typing import Any, Callable, Sequence

import torch
from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin, InitProcessGroupKwargs

from repro.accel import load_deepspeed_config
from repro.accumulation import accumulation_scales, answer_count, merge_metrics, micro_batches, target_weight
from repro.data.balance import order_by_cost
from repro.io import DiskFull, is_disk_full
from repro.parallel.rows import split_rows

ENGINE_DIR = "engine"
"""Sub-folder of a multi-process checkpoint holding the engine's own state (``accelerator.save_state``)."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 that is free now (for ``MASTER_PORT`` of processes started on this machine)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launched_world_size() -> int:
    """The process count a launcher announced in ``WORLD_SIZE`` (1 when not launched)."""
    raw = os.environ.get("WORLD_SIZE", "1")
    if not raw.isdigit() or int(raw) < 1:
        raise ValueError(f"WORLD_SIZE={raw!r}; allowed: an integer >= 1")
    return int(raw)


def launched_rank() -> int:
    """This process's ``RANK`` in a launched run (0 when not launched, or when the variable is not a number)."""
    raw = os.environ.get("RANK", "0").strip()
    return int(raw) if raw.isdigit() else 0


def is_launched() -> bool:
    """True when this process is one of several started by a launcher (``WORLD_SIZE`` > 1)."""
    return launched_world_size() > 1


def deepspeed_plugin_config(path: str | Path, world_size: int, global_batch: int | None = None) -> dict:
    """The DeepSpeed config of ``path`` made ready for the trainer: the trainer runs its own micro-batches
    (``TrainConfig.micro_batch_size``) and sets the accumulation boundary itself, so DeepSpeed's accumulation is 1;
    ``train_micro_batch_size_per_gpu`` is each rank's share of ``global_batch`` rows (1 when not given), and the
    trainer's torch AdamW is used (``zero_allow_untested_optimizer``). Gradient clipping is set from
    ``TrainConfig.grad_clip`` by the trainer (:func:`prepare`)."""
    rows = global_batch if global_batch is not None else world_size
    cfg = load_deepspeed_config(path, rows, world_size)
    if cfg["train_micro_batch_size_per_gpu"] * cfg["gradient_accumulation_steps"] != rows // world_size:
        raise ValueError(f"DeepSpeed config {str(path)!r}: micro batch x accumulation must be the rows per rank")
    cfg.update(train_micro_batch_size_per_gpu=rows // world_size, gradient_accumulation_steps=1,
               train_batch_size=rows, zero_allow_untested_optimizer=True)
    cfg.pop("optimizer", None)
    cfg.pop("scheduler", None)
    return cfg


def make_accelerator(deepspeed_config: str | Path | None = None, global_batch: int | None = None,
                     cpu: bool | None = None):
    """An ``accelerate.Accelerator`` for this process: DDP, or DeepSpeed with the JSON config ``deepspeed_config``
    (:func:`deepspeed_plugin_config`; ``global_batch`` rows per step when known). ``cpu`` (default: no CUDA
    device) selects gloo and DeepSpeed's CPU accelerator; otherwise nccl. Call it once per process, after the
    launcher has set the rank variables; a launcher that sets only ``RANK`` gets ``LOCAL_RANK = RANK`` (one node)."""
    cpu = (not torch.cuda.is_available()) if cpu is None else cpu
    world = launched_world_size()
    if world > 1 and "LOCAL_RANK" not in os.environ:
        os.environ["LOCAL_RANK"] = os.environ.get("RANK", "0")

    backend = "gloo" if cpu else "nccl"
    handlers = [InitProcessGroupKwargs(backend=backend)]
    if deepspeed_config is None:
        return Accelerator(cpu=cpu, kwargs_handlers=handlers)
    if cpu:
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # before deepspeed is imported: its CPU accelerator
    quiet_deepspeed_collectives()
    try:
        import deepspeed  # noqa: F401  (optional; imported after DS_ACCELERATOR is set, which it reads)
    except ImportError as e:
        raise ImportError(f"deepspeed_config={str(deepspeed_config)!r} needs DeepSpeed: "
                          "pip install deepspeed==0.19.8 (pinned in requirements.txt)") from e

    if world > 1 and not torch.distributed.is_initialized():
        import deepspeed.comm  # optional, as above

        deepspeed.comm.init_distributed(dist_backend=backend, auto_mpi_discovery=False)
    plugin = DeepSpeedPlugin(hf_ds_config=deepspeed_plugin_config(deepspeed_config, world, global_batch))
    return Accelerator(deepspeed_plugin=plugin, kwargs_handlers=handlers)


DEPRECATED_COLLECTIVES = r"`torch\.distributed\.(all_gather_into_tensor|reduce_scatter_tensor)` is deprecated"
"""torch 2.13's FutureWarning for the collectives DeepSpeed 0.19's ZeRO calls on every step (about 40 lines per
4-step two-process run); DeepSpeed's code, not ours, so it is silenced where the engine is made."""


def quiet_deepspeed_collectives() -> None:
    """Silence :data:`DEPRECATED_COLLECTIVES` (only those warnings) in this process."""
    warnings.filterwarnings("ignore", message=DEPRECATED_COLLECTIVES, category=FutureWarning)


def is_deepspeed(accelerator) -> bool:
    """True when ``accelerator`` trains through a DeepSpeed engine."""
    return accelerator.state.deepspeed_plugin is not None


def shard_rows(batch: dict[str, Any], rank: int, world: int) -> dict[str, Any]:
    """Rank ``rank``'s share of a global batch: the ``rank``-th of ``world`` equal contiguous blocks of rows. The
    rows must divide evenly (every rank then runs the same number of forward passes, which DDP's buffer broadcast
    and ZeRO-3's parameter gathering need); a 0-d entry is shared."""
    rows = int(batch["input_ids"].shape[0])
    if world < 1 or not 0 <= rank < world:
        raise ValueError(f"rank={rank}, world={world}; allowed: world >= 1 and 0 <= rank < world")
    if rows % world:
        raise ValueError(f"a global batch of {rows} rows cannot be split over world size {world}; allowed: a "
                         f"multiple of {world} rows")
    return micro_batches(batch, rows // world)[rank]


def all_reduce_sum(values: Sequence[float]) -> list[float]:
    """The element-wise sum of ``values`` over every rank (float64; the values themselves on one process)."""
    if not (torch.distributed.is_available() and torch.distributed.is_initialized()):
        return [float(v) for v in values]
    t = torch.tensor([float(v) for v in values], dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return t.tolist()


def rank_scales(weights: Sequence[float], world: int) -> tuple[list[float], float]:
    """``(scales, total)``: the factor of each of this rank's micro-batch token-mean losses, ``w_i / W x world``
    with ``W`` the all-reduced valid weight of the global batch (collective: every rank calls it), and ``W``."""
    total = all_reduce_sum([sum(weights)])[0]
    return [s * world for s in accumulation_scales(weights, total)], total


def global_metrics(metrics: dict[str, float], local_weight: float, total_weight: float,
                   answers: int) -> dict[str, float]:
    """This rank's step metrics with ``loss`` made the global batch's token mean (each rank's local mean weighted by
    its valid weight) and ``train_em`` the share over every rank's answers (collective)."""
    em = metrics.get("train_em", 0.0)
    loss_sum, hits, n = all_reduce_sum([metrics["loss"] * local_weight, em * answers, answers])
    out = dict(metrics)
    out["loss"] = loss_sum / total_weight if total_weight > 0 else 0.0  # no valid target: every token mean is 0
    if n:
        out["train_em"] = hits / n
    else:
        out.pop("train_em", None)
    return out


def gradients(accelerator, engine, batch: dict[str, torch.Tensor], micro_batch_size: int,
              reorder: bool, rows, state) -> dict[str, float]:
    """Loss and backward of this rank's share of a step's global ``batch`` (:func:`shard_rows`), in micro-batches
    of ``micro_batch_size`` rows (optionally ``reorder``-ed by cost) scaled by :func:`rank_scales`; returns the
    step's global metrics (collective).

    ``rows``: this process's sequence-parallel group (:class:`repro.parallel.rows.RowGroup`): the ``N`` ranks of a
    group take the same rows (data-parallel rank ``process_index // N``), each step runs inside
    :func:`repro.parallel.rows.split_rows`, and each rank's scale is ``N`` times its data-parallel one (the
    engine's average over ``DP x N`` processes is then the group's sum, averaged over the data-parallel ranks).
    ``state``: the step's :class:`repro.methods.protocol.StepState`, given to the objective with this rank's
    micro-batch count."""
    world = accelerator.num_processes
    n = 1 if rows is None else rows.world
    local = shard_rows(batch, accelerator.process_index // n, world // n)
    parts = micro_batches(local, micro_batch_size)
    if reorder and len(parts) > 1:
        parts = [parts[i] for i in order_by_cost(parts)]
    weights = [target_weight(p) for p in parts]
    scales, total = rank_scales(weights, world)  # total: n x the global weight; each scale: 1 / n of its due
    got = []
    for i, (part, scale) in enumerate(zip(parts, scales)):
        with split_rows(rows) if rows is not None else contextlib.nullcontext():
            loss, metrics = engine(part, dataclasses.replace(state, micro_batches=len(parts)))
            backward(accelerator, engine, loss * (scale * n), last=i == len(parts) - 1)
        got.append(metrics)
    answers = [answer_count(p) for p in parts]
    merged = got[0] if len(parts) == 1 else {**merge_metrics(got, scales, answers), "micro_batches": len(parts)}
    return global_metrics(merged, sum(weights), total, sum(answers))


class LossModule(torch.nn.Module):
    """The model and its objective as one module, so the engine's forward runs the whole loss: ``forward(batch)``
    returns ``loss_fn(model, batch, state)`` (a scalar loss and a metrics dict; ``state``: the step's
    :class:`repro.methods.protocol.StepState`). Its parameters are the model's."""

    def __init__(self, model: torch.nn.Module, loss_fn: Callable):
        super().__init__()
        self.model = model
        self.loss_fn = loss_fn

    def forward(self, batch: dict[str, torch.Tensor], state):
        return self.loss_fn(self.model, batch, state)


def prepare(accelerator, model: torch.nn.Module, optimizer: torch.optim.Optimizer, loss_fn: Callable,
            grad_clip: float):
    """``(engine, optimizer)``: :class:`LossModule` of ``model`` and ``loss_fn`` and the trainer's optimizer
    wrapped by ``accelerator`` (DDP or a DeepSpeed engine, whose gradient clipping becomes ``grad_clip``)."""
    if is_deepspeed(accelerator):
        accelerator.state.deepspeed_plugin.deepspeed_config["gradient_clipping"] = float(grad_clip)
    return accelerator.prepare(LossModule(model, loss_fn), optimizer)


def backward(accelerator, engine, loss: torch.Tensor, last: bool) -> None:
    """Backward of one micro-batch's scaled loss; gradients are averaged over ranks at the ``last`` one."""
    if is_deepspeed(accelerator):
        engine.set_gradient_accumulation_boundary(last)
        engine.backward(loss)
    elif last:
        loss.backward()
    else:
        with accelerator.no_sync(engine):
            loss.backward()


def optimizer_step(accelerator, engine, optimizer, model: torch.nn.Module, grad_clip: float,
                   check: Callable[[float], None] | None = None) -> float:
    """Clip (``grad_clip``, 0: no clipping) and step; returns the global gradient norm before clipping. ``check``
    (e.g. raising on a non-finite norm) sees the norm before the update under DDP; a DeepSpeed engine computes it
    inside its step, so there ``check`` runs after the update."""
    if is_deepspeed(accelerator):
        engine.step()  # clips with the config's gradient_clipping, steps and zeroes the gradients
        norm = engine.get_global_grad_norm()
        if norm is not None and check is not None:
            check(float(norm))
        return float(norm) if norm is not None else float("nan")
    norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip or float("inf"))
    if check is not None:
        check(float(norm))
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return float(norm)


def full_state_dict(accelerator, engine) -> dict[str, torch.Tensor]:
    """The model's unsharded weights (collective: every rank calls it; complete on rank 0 under ZeRO-3)."""
    state = accelerator.get_state_dict(engine) or {}  # ZeRO-3 gathers on rank 0 only
    prefix = "model."
    return {k[len(prefix):] if k.startswith(prefix) else k: v.detach().cpu().contiguous().clone()
            for k, v in state.items()}


def save_engine_checkpoint(accelerator, engine, path: Path, write_main: Callable[[Path, dict], None]) -> Path:
    """Write checkpoint ``path`` from every rank: the folder is built as ``.<name>.partial`` next to it, rank 0
    calls ``write_main(folder, full_state_dict)`` (weights, method state), every rank writes the engine's state
    into ``folder/engine``; rank 0 renames the folder into place once all are done (collective)."""
    partial = path.parent / f".{path.name}.partial"
    main = accelerator.is_main_process
    if main:
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
    accelerator.wait_for_everyone()
    state = full_state_dict(accelerator, engine)
    accelerator.save_state(str(partial / ENGINE_DIR))
    accelerator.wait_for_everyone()
    if main:
        try:
            write_main(partial, state)
            if path.exists():
                shutil.rmtree(path)
            os.replace(partial, path)
        except BaseException as e:  # nothing half-written stays behind (the next checkpoint rebuilds it anyway)
            shutil.rmtree(partial, ignore_errors=True)
            if is_disk_full(e):
                raise DiskFull(path, e) from e
            raise
    accelerator.wait_for_everyone()
    return path


def load_engine_checkpoint(accelerator, path: Path) -> None:
    """Restore the engine's state (weights, optimizer, ZeRO shards, each rank's RNG) from checkpoint ``path``."""
    accelerator.load_state(str(path / ENGINE_DIR))


def world_size() -> int:
    """The size of the initialised process group (1 without one)."""
    if torch.distributed.is_available() and torch.distributed.is_initialized():
        return torch.distributed.get_world_size()
    return 1
