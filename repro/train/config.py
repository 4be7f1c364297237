"""The optimisation settings every method trains under (:class:`TrainConfig`) and the learning-rate schedule
(:func:`lr_at`: linear warmup, then cosine or constant)."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from repro.parallel.sequence import LAYOUTS
from repro.profiles.run import check_device
from repro.schedules import cosine_decay


ADAMW_IMPLS: tuple[str, ...] = ("fused", "foreach", "for-loop")
"""The values of :attr:`TrainConfig.adamw_impl` (torch's ``fused=True``, ``foreach=True``, its defaults)."""


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
    adamw_impl: str = "fused"
    """torch's implementation of AdamW (:data:`ADAMW_IMPLS`): ``fused`` (default; one kernel pass over all of a
    device's tensors, on the CPU and CUDA: HF ``Trainer``'s default ``adamw_torch_fused``; at SmolLM2-135M on
    2 CPU threads its step took ~1/8 of the for-loop's), ``foreach`` or ``for-loop`` (torch's defaults, exactly
    this project's earlier versions: its per-tensor loop on the CPU; on CUDA torch then picks ``foreach``). The
    update is the same up to float rounding (~1e-7 relative; ``foreach`` and ``for-loop`` are bit-identical on the
    CPU), so the choice is part of a run's bits: the stage cache keys hold it unless ``for-loop``
    (:mod:`repro.stages.keys`; keys of earlier runs stay valid for that one), and a resumed run continues with this
    setting, not the checkpoint's."""
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
    device: str = "auto"
    """Where the model trains (:func:`repro.devices.resolve_device`): ``auto`` (the first CUDA device when there
    is one, else the CPU), ``cpu``, ``cuda`` or ``cuda:N``. The trainer moves the model there before building the
    optimizer and every batch with it; under a multi-process engine (:mod:`repro.distributed`) the engine places
    the model and this field is not used."""
    reorder_microbatches: bool = False
    """With accumulation, run a step's micro-batches in descending order of sum of squared document lengths
    (ProLong's sort, :mod:`repro.data.balance`). The update is the same up to float summation order; the gain is
    for data-parallel workers (:mod:`repro.bench.reorder_sim`)."""
    sequence_parallel: int = 1
    """Processes that share every row (sequence parallelism, :mod:`repro.parallel.rows`; 1: none). Needs a
    launcher that starts a multiple of it (``accelerate launch --num_processes DP x N``); each row is cut into
    ``N`` shards of ``T / N`` tokens (``T`` must divide evenly), the decoder runs on a rank's shard with
    ``sp_ulysses`` attention, and the objective is the method's own on the full rows."""
    sequence_layout: str = "contiguous"
    """How a row is cut over the ``sequence_parallel`` ranks: ``contiguous`` or ``zigzag``
    (:data:`repro.parallel.sequence.LAYOUTS`; zigzag balances causal attention's work)."""

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
        check_device(self.device)
        if self.adamw_impl not in ADAMW_IMPLS:
            raise ValueError(f"adamw_impl={self.adamw_impl!r}; allowed: {', '.join(ADAMW_IMPLS)}")
        if isinstance(self.sequence_parallel, bool) or not isinstance(self.sequence_parallel, int) \
                or self.sequence_parallel < 1:
            raise ValueError(f"sequence_parallel={self.sequence_parallel!r}; allowed: an integer >= 1")
        if self.sequence_layout not in LAYOUTS:
            raise ValueError(f"sequence_layout={self.sequence_layout!r}; allowed: {', '.join(LAYOUTS)}")
        if self.micro_batch_size < 0:
            raise ValueError(f"micro_batch_size={self.micro_batch_size}; allowed: 0 (no accumulation) or >= 1 rows")


def lr_at(cfg: TrainConfig, step: int) -> float:
    """Learning rate multiplier for ``step`` (0-based)."""
    if cfg.warmup_steps and step < cfg.warmup_steps:
        return (step + 1) / cfg.warmup_steps
    if cfg.schedule == "constant":
        return 1.0
    span = max(cfg.max_steps - cfg.warmup_steps, 1)
    t = min((step - cfg.warmup_steps) / span, 1.0)
    return cosine_decay(t, cfg.min_lr_ratio)


def adamw_impl_of(section: Any) -> str:
    """The AdamW implementation a profile section trains with: its own ``adamw_impl`` field when it has one
    (:meth:`TrainConfig.from_section` copies it), else :class:`TrainConfig`'s default."""
    return getattr(section, "adamw_impl", TrainConfig.adamw_impl)
