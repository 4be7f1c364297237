"""CD-Cost: wall-clock per training step of Context Denoising Training against a CE step, in one run.

Arms (:data:`CD_COST_ARMS`):

- ``ce``: the CE step, :func:`repro.train.clm_step` (one forward) and its backward;
- ``cdt``: the CDT step as implemented, :func:`repro.methods.cdt.cdt_loss` and its backward: the detection is a
  forward and a backward to the input embeddings with the weights frozen (no weight gradient computed), then the
  CE forward and full backward on the denoised embeddings (timed as :func:`cdt_step`, the same step composed from
  :mod:`repro.methods.cdt`'s public pieces with a clocked detection; equal to :func:`~repro.methods.cdt.cdt_loss`,
  tested);
- ``cdt_authors``: the authors' trainer's step (LCM-Lab/LOOM-Train at 8e27da7, ``trainer/cdt.py``): first a clean
  forward and full backward on the token ids whose gradients are discarded (its lines 110-114, zeroed at line 139;
  :func:`discarded_clean_pass`), then the detection with a full backward that also computes every weight's
  gradient (:func:`full_backward_gradients`: the same ``dL/dE``, the weight gradients thrown away), then the
  forward and full backward on the denoised embeddings: three forwards and three full backwards.

Every arm runs forward, backward and an AdamW step on its own copy of the model, all on the same batch in a round,
in interleaved rounds (A B C A B C ...) so that the machine's noise hits every arm alike, each timed step right
after an untimed one of its own arm (``settle``: on a CPU a step that follows a bigger arm's runs slower); the table
reports medians and ratios to ``ce`` within the run. A clock between the parts (the GPU synchronized at each lap)
splits each step into the detection forward, the detection backward, the forward (for CDT: the embedding lookup, the
noise mask, Eq. 3 and the CE forward on ``E'``), the backward and the optimizer step.

Expected (a backward costs about two forwards, an activation-only backward about one): CDT ~ (3 + 1 + 1) / 3 =
1.67x CE, the goal :data:`repro.reports.cdt_training.GOAL_RATIO`; the authors' step ~ (3 + 3 + 3) / 3 = 3x.
"""

from __future__ import annotations

import copy
import math
from typing import Callable, Mapping, Sequence

import numpy as np
import torch

from repro.bench.method_flops import Dims, cdt_flops, rows_flops
from repro.bench.step_timing import Clock, random_rows, summarize
from repro.methods.cdt import CDTSpec, ce_from_embeds, denoised, frozen
from repro.methods.metrics import finish_metrics
from repro.methods.prepared import PreparedBatches
from repro.timing import interleaved_rounds
from repro.train import clm_step

CD_COST_ARMS: dict[str, str | None] = {"ce": None, "cdt": "frozen", "cdt_authors": "authors"}
"""Arm -> its detection pass (None: the CE step, no detection)."""
DETECTIONS = ("frozen", "full_backward", "authors")
"""Detection passes: weights frozen (as implemented), a full backward, or the authors' trainer's (a discarded clean
forward and full backward first, then the full-backward detection)."""
PARTS = ("discarded_pass", "detect_forward", "detect_backward", "forward", "backward", "optimizer")
"""The parts a step is split into (the CE step has no detection parts; only the authors' has a discarded pass)."""


def detection(mode: str = "frozen", clock: Clock | None = None) -> Callable[..., tuple[torch.Tensor, torch.Tensor]]:
    """A detection pass for :func:`cdt_step`: ``(model, batch, bf16, chunk, embeds) -> (dL/dE, loss)``. ``mode``
    ``frozen``: as :func:`repro.methods.cdt.embedding_gradients` (weights frozen, the backward to the embeddings
    only); ``full_backward``: the backward also computes every trainable weight's gradient (thrown away), as the
    authors' trainer does; ``authors``: :func:`discarded_clean_pass` first,
    then as ``full_backward`` (the authors' trainer's whole detection). With a ``clock``, the time before the pass
    goes to ``forward`` and the pass's own to ``discarded_pass``, ``detect_forward`` and ``detect_backward``."""
    if mode not in DETECTIONS:
        raise ValueError(f"mode={mode!r}; allowed: {', '.join(DETECTIONS)}")

    def detect(model, batch: dict[str, torch.Tensor], bf16: bool = False, chunk: int = 2048,
               embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        if clock is not None:
            clock.lap("forward")
        if mode == "authors":
            discarded_clean_pass(model, batch, bf16, chunk)
            if clock is not None:
                clock.lap("discarded_pass")
        if embeds is None:
            with torch.no_grad():
                embeds = model.get_input_embeddings()(batch["input_ids"])
        e = embeds.detach().requires_grad_(True)
        if mode == "frozen":
            with frozen(model):
                loss = ce_from_embeds(model, e, batch, bf16, chunk)[0]
                if clock is not None:
                    clock.lap("detect_forward")
                (grad,) = torch.autograd.grad(loss, e)
        else:
            params = [p for p in model.parameters() if p.requires_grad]
            loss = ce_from_embeds(model, e, batch, bf16, chunk)[0]
            if clock is not None:
                clock.lap("detect_forward")
            # allow_unused: an untied input-embedding table is not on the path from the detached E
            grad = torch.autograd.grad(loss, [e, *params], allow_unused=True)[0]
        if clock is not None:
            clock.lap("detect_backward")
        return grad, loss.detach()

    return detect


def discarded_clean_pass(model, batch: dict[str, torch.Tensor], bf16: bool = False, chunk: int = 2048) -> None:
    """The authors' trainer's first pass of a step (``trainer/cdt.py`` lines 110-114 at 8e27da7): the CE forward on
    the token ids and a full backward to every trainable weight, whose gradients are then discarded (their line 139
    zeroes them before the denoised pass). Nothing is kept; it costs a CE step's forward and backward."""
    params = [p for p in model.parameters() if p.requires_grad]
    loss, _ = clm_step(model, batch, bf16, chunk=chunk)
    torch.autograd.grad(loss, params, allow_unused=True)


def full_backward_gradients(model, batch: dict[str, torch.Tensor], bf16: bool = False, chunk: int = 2048,
                            embeds: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """The authors' trainer's detection pass: ``(dL/dE, loss)`` as :func:`repro.methods.cdt.embedding_gradients`
    gives, from a full backward that also computes every weight's gradient (not kept)."""
    return detection("full_backward")(model, batch, bf16, chunk, embeds)


def cdt_step(model, batch: dict[str, torch.Tensor], spec: CDTSpec, lr: float, pad_id: int | None = None,
             bf16: bool = False, chunk: int = 2048,
             detect: Callable[..., tuple[torch.Tensor, torch.Tensor]] | None = None) -> tuple[torch.Tensor, dict]:
    """:func:`repro.methods.cdt.cdt_loss` composed from its public pieces (the embedding lookup, the detection,
    :func:`repro.methods.cdt.denoised`, :func:`repro.methods.cdt.ce_from_embeds`) with the detection pass
    ``detect`` (:func:`detection`; default ``detection("frozen")``) in place of
    :func:`repro.methods.cdt.embedding_gradients`, so the benchmark times its parts. For ``lr > 0`` and a spec that
    moves embeddings."""
    detect = detect or detection("frozen")
    embeds = model.get_input_embeddings()(batch["input_ids"])
    grad, detect_loss = detect(model, batch, bf16, chunk, embeds)
    embeds, moved = denoised(embeds, grad, batch, spec, lr, pad_id)
    loss, out = ce_from_embeds(model, embeds, batch, bf16, chunk)
    return finish_metrics(loss, {"detect_loss": float(detect_loss), **moved}, out, batch)


def prepared_rows(path, n: int) -> list[dict[str, np.ndarray]]:
    """The first ``n`` batches of a prepared-batches folder (:class:`repro.methods.prepared.PreparedBatches`)."""
    data = PreparedBatches(path)
    if not 1 <= n <= data.steps:
        raise ValueError(f"n={n}; allowed: 1..{data.steps} (the folder's batches)")
    return [data.batch(i) for i in range(n)]


def _to_torch(batch: Mapping[str, np.ndarray | torch.Tensor], device: torch.device) -> dict[str, torch.Tensor]:
    out = {}
    for k, v in batch.items():
        t = torch.as_tensor(np.asarray(v)) if not isinstance(v, torch.Tensor) else v
        out[k] = (t.long() if k != "weights" else t.float()).to(device)
    if "position_ids" not in out:
        B, T = out["input_ids"].shape
        out["position_ids"] = torch.arange(T, device=device).expand(B, T)
    return out


def measure_cd_step_costs(model: torch.nn.Module, lr: float, beta: float,
                          batches: Sequence[Mapping[str, np.ndarray | torch.Tensor]] | None = None,
                          batch_size: int = 8, length: int = 1024, steps: int = 6, warmup: int = 1,
                          bf16: bool = False, threshold: str = "document", pad_id: int | None = None,
                          chunk: int = 2048, threads: int | None = None, arms: Sequence[str] | None = None,
                          seed: int = 0, progress: bool = True, settle: int = 1) -> dict[str, dict]:
    """Seconds per optimizer step of each arm (``arms``, default every arm of :data:`CD_COST_ARMS`; ``ce`` is
    required) on copies of ``model``, CDT at learning rate ``lr`` (Eq. 3's, and AdamW's) and strength ``beta``.

    ``batches``: the rows (dicts of ``input_ids``, ``weights``, optional ``position_ids``, ``doc_ids``,
    ``answer_group``), used in turn, every arm on the same batch in a round; default: random token ids of
    ``batch_size`` x ``length`` (the time does not depend on the values). ``threads``: torch's CPU threads during
    the run (restored after). ``settle``: untimed steps of each arm right before its timed one in every timed round
    (:func:`repro.timing.interleaved_rounds`), so that a timed step follows a step of its own arm. Returns ``{arm:
    {"seconds": [...], "seconds_per_step": median, "ratio" (to ce, paired within rounds), "parts": {part: median
    seconds}, "flops", "bound", "vs_bound" (as :func:`repro.bench.step_timing.summarize`: FLOPs of
    :func:`repro.bench.method_flops.cdt_flops`), "batch": [B, T], "tokens_per_step": B * T, "lr", "beta", "bf16",
    "threads"}}``, timed in ``steps`` interleaved rounds after ``warmup`` untimed ones. The parts' medians need not
    add up to the step's median.
    """
    if steps < 1 or warmup < 0 or batch_size < 1 or length < 2 or (threads is not None and threads < 1) or settle < 0:
        raise ValueError(f"steps={steps}, warmup={warmup}, batch_size={batch_size}, length={length}, "
                         f"threads={threads}, settle={settle}; allowed: steps >= 1, warmup >= 0, batch_size >= 1, "
                         "length >= 2, threads >= 1 or None, settle >= 0")
    if not (math.isfinite(lr) and lr > 0):
        raise ValueError(f"lr={lr!r}; allowed: a finite value > 0 (at 0 CDT skips its detection)")
    if beta <= 0:
        raise ValueError(f"beta={beta!r}; allowed: a finite value > 0 (at 0 CDT skips its detection)")
    spec = CDTSpec(beta=beta, threshold=threshold)
    arms = list(arms or CD_COST_ARMS)
    if unknown := [a for a in arms if a not in CD_COST_ARMS]:
        raise ValueError(f"arms {unknown}; allowed: {', '.join(CD_COST_ARMS)}")
    if "ce" not in arms:
        raise ValueError(f"arms {arms} must include 'ce' (the reference of the ratios)")
    if batches is not None and not len(batches):
        raise ValueError("batches is empty; allowed: at least one batch, or None for random rows")
    device = next(model.parameters()).device
    rng = np.random.default_rng(seed)
    vocab = model.get_input_embeddings().weight.shape[0]
    rows = [_to_torch(batches[r % len(batches)] if batches is not None
                      else random_rows(batch_size, length, vocab, rng), device) for r in range(warmup + steps)]
    clock = Clock(cuda=device.type == "cuda")
    dims = Dims.of(model.config)
    setups = {}
    for name in arms:
        m = copy.deepcopy(model).train()
        detect = None if CD_COST_ARMS[name] is None else detection(CD_COST_ARMS[name], clock)
        setups[name] = (m, torch.optim.AdamW(m.parameters(), lr=lr), detect)

    def step(name: str, r: int) -> tuple[float, dict[str, float]]:
        m, opt, detect = setups[name]
        b = rows[r]
        clock.start()
        if detect is None:
            loss, _ = clm_step(m, b, bf16, chunk=chunk)
        else:
            loss, _ = cdt_step(m, b, spec, lr, pad_id, bf16, chunk, detect)
        clock.lap("forward")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clock.lap("backward")
        opt.step()
        clock.lap("optimizer")
        B, T = b["input_ids"].shape
        flops = rows_flops(lambda n, _: cdt_flops(dims, n, CD_COST_ARMS[name]), [T] * B)
        return sum(clock.parts.values()), dict(clock.parts), flops

    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        times = interleaved_rounds(arms, steps, warmup, step, "CD-Cost steps", progress, settle)
    finally:
        torch.set_num_threads(previous)
    B, T = rows[0]["input_ids"].shape
    return summarize(times, "ce", PARTS, {"batch": [int(B), int(T)], "tokens_per_step": int(B * T), "lr": lr,
                                          "beta": beta, "bf16": bf16, "threads": threads})
