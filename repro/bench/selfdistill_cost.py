"""RP-Cost: wall-clock per training step of the self-distillation objectives against Standard, in one run.

Arms (:data:`COST_ARMS`): Standard (CLM on the standard view), skip with the prefix-shared second pass, skip
with two full passes (naive), cyclic (no prefix to share: two full passes), LongCE and skip + LongCE. Every
arm runs forward, backward and an AdamW step on its own copy of the same model, on batches of the same shape
(random token ids: the time does not depend on the values; each arm draws its own views), in interleaved
rounds (A B C ... A B C ...) so that the machine's noise hits every arm alike; the table reports medians and
ratios to Standard within the run. The paper reports ~1.6x for its method (§3.7); two full passes cost ~2x;
the shared skip pass is expected at ~1.5x with ``s`` uniform, plus the KL's head cost, which a model with a
large vocabulary relative to its width (the tiny one) pays more than an 8B model does.
"""

from __future__ import annotations

import copy
import statistics
import time

import numpy as np
import torch

COST_ARMS: dict[str, dict] = {
    "Standard": {"consistency": "none"},
    "skip, prefix-shared": {},
    "skip, two full passes": {"shared_prefix": False},
    "cyclic (two full passes)": {"view": "cyclic"},
    "LongCE": {"consistency": "none", "longce": True},
    "skip + LongCE": {"longce": True},
}
"""The arms timed, as :class:`repro.methods.selfdistill.SelfDistillSpec` fields."""


def _batch(spec, batch_size: int, length: int, vocab: int, rng: np.random.Generator) -> dict[str, torch.Tensor]:
    from repro.methods.selfdistill import selfdistill_batch

    return selfdistill_batch(torch.as_tensor(rng.integers(0, vocab, (batch_size, length))), spec, rng)


def measure_rp_step_costs(model: torch.nn.Module, batch_size: int, length: int, steps: int = 6, warmup: int = 1,
                          bf16: bool = False, longce=None, arms: dict[str, dict] | None = None, seed: int = 0,
                          progress: bool = True) -> dict[str, dict]:
    """Seconds per optimizer step of each arm (``arms``, default :data:`COST_ARMS`) on copies of ``model``.

    ``longce``: the :class:`repro.methods.longce.LongCEConfig` of the LongCE arms (they are skipped without it).
    Returns ``{arm: {"seconds": [...], "seconds_per_step": median, "ratio": median / Standard's median,
    "tokens_per_step": ...}}``, timed in ``steps`` interleaved rounds after ``warmup`` untimed ones.
    """
    from repro.methods.selfdistill import SelfDistillSpec, selfdistill_loss
    from repro.timing import interleaved_rounds

    if steps < 1 or warmup < 0 or batch_size < 1 or length < 2:
        raise ValueError(f"steps={steps}, warmup={warmup}, batch_size={batch_size}, length={length}; allowed: "
                         "steps >= 1, warmup >= 0, batch_size >= 1, length >= 2")
    arms = {k: v for k, v in (arms or COST_ARMS).items() if longce is not None or not v.get("longce")}
    if "Standard" not in arms:
        raise ValueError(f"arms {sorted(arms)} must include 'Standard' (the reference of the ratios)")
    rng = np.random.default_rng(seed)
    vocab = model.get_input_embeddings().weight.shape[0]
    setups = {}
    for name, fields in arms.items():
        m = copy.deepcopy(model).train()
        setups[name] = (SelfDistillSpec(**fields), m, torch.optim.AdamW(m.parameters(), lr=1e-4))
    def step(name: str, r: int) -> float:
        spec, m, opt = setups[name]
        b = _batch(spec, batch_size, length, vocab, rng)
        t0 = time.perf_counter()
        loss, _ = selfdistill_loss(m, b, spec, bf16, longce if spec.longce else None)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return time.perf_counter() - t0

    times = interleaved_rounds(list(setups), steps, warmup, step, "RP-Cost steps", progress)
    ref = statistics.median(times["Standard"])
    return {n: {"seconds": t, "seconds_per_step": statistics.median(t), "ratio": statistics.median(t) / ref,
                "tokens_per_step": batch_size * length} for n, t in times.items()}
