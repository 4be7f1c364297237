"""One trainer for every method: AdamW, warmup + cosine/constant, clipping, bf16, checkpoints.

A *method* (:class:`repro.methods.protocol.Method`; the built-in ones are in
:mod:`repro.methods`) produces batches as a pure function of the step, may
compute its own loss (``loss(model, batch, state)``, told the step and its learning
rate by :class:`StepState`), and may keep a small state of its data (the base
curriculum's phase); the trainer owns optimisation, logging and checkpoints, and
knows no method.
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

Modules: :mod:`repro.train.config` (:class:`TrainConfig`, the learning-rate schedule :func:`lr_at`),
:mod:`repro.train.step` (:func:`clm_step`, the default objective), :mod:`repro.train.trainer` (:class:`Trainer`),
:mod:`repro.train.checkpoints` (a run folder's checkpoint files), :mod:`repro.train.failures`
(:class:`NonFiniteLoss`, :class:`Interrupted`). The method protocol and the objectives' metrics live in the methods
layer (:mod:`repro.methods.protocol`, :mod:`repro.methods.metrics`) and are re-exported here.
"""

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.methods.metrics import answer_exact_match, answer_exact_match_hidden, finish_metrics
from repro.methods.protocol import OPTIONAL_HOOKS, Method, MethodHooks, StepState
from repro.schedules import cosine_decay
from repro.train.checkpoints import latest_checkpoint
from repro.train.config import TrainConfig, lr_at
from repro.train.failures import Interrupted, NonFiniteLoss
from repro.train.step import clm_step
from repro.train.trainer import Trainer, run_environment

__all__ = ["Trainer", "TrainConfig", "lr_at", "clm_step", "latest_checkpoint", "run_environment", "NonFiniteLoss",
           "Interrupted", "Method", "MethodHooks", "OPTIONAL_HOOKS", "StepState", "finish_metrics",
           "answer_exact_match", "answer_exact_match_hidden", "cosine_decay", "chunked_clm_loss", "weighted_clm_loss"]
