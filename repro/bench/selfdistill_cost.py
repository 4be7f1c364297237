"""RP-Cost: wall-clock per training step of the self-distillation objectives against Standard, in one run.

Arms (:data:`COST_ARMS`): Standard (CLM on the standard view), skip with the prefix-shared second pass, skip
with two full passes (naive), cyclic (no prefix to share: two full passes), LongCE and skip + LongCE. Every
arm runs forward, backward and an AdamW step on its own copy of the same model, on batches of the same shape
(random token ids: the time does not depend on the values; each arm draws its own views), in interleaved
rounds (A B C ... A B C ...) so that the machine's noise hits every arm alike, each timed step right after an
untimed one of its own arm (``settle``: on a CPU a step that follows a bigger arm's runs slower); the table reports
medians and ratios to Standard within the run. The paper reports ~1.6x for its method (§3.7); two full passes cost ~2x;
the shared skip pass is expected at ~1.5x with ``s`` uniform, plus the KL's head cost, which a model with a
large vocabulary relative to its width (the tiny one) pays more than an 8B model does. Each step's FLOPs are
counted from the model's shape and that step's views (:mod:`repro.bench.method_flops`): the ``bound`` a ratio
can reach. :data:`POSITION_ARMS` (PoSE's and LongRecipe's position ids on the Standard step) can be added.
"""

from __future__ import annotations

import copy

import numpy as np
import torch

from repro.bench.gpu_arms import POSITION_SPREAD, sentence_starts
from repro.bench.method_flops import Dims, rows_flops, selfdistill_flops
from repro.bench.step_timing import Clock, random_rows, summarize
from repro.methods.selfdistill import SelfDistillSpec, perturb_rows, selfdistill_loss
from repro.positions import PositionSample, longrecipe_alg1, pose
from repro.timing import interleaved_rounds

COST_ARMS: dict[str, dict] = {
    "Standard": {"consistency": "none"},
    "skip, prefix-shared": {},
    "skip, two full passes": {"shared_prefix": False},
    "cyclic (two full passes)": {"view": "cyclic"},
    "LongCE": {"consistency": "none", "longce": True},
    "skip + LongCE": {"longce": True},
}
"""The arms timed, as :class:`repro.methods.selfdistill.SelfDistillSpec` fields (``positions``, not a spec field:
the Standard step on rows whose position ids a transform of :data:`POSITION_TRANSFORMS` replaced)."""
POSITION_ARMS: dict[str, dict] = {
    "PoSE positions": {"consistency": "none", "positions": "pose"},
    "LongRecipe positions": {"consistency": "none", "positions": "longrecipe"},
}
"""The Standard step on PoSE's and LongRecipe's position ids (their transforms change no FLOP: bound 1)."""
POSITION_TRANSFORMS = ("pose", "longrecipe")
PARTS = ("first_pass", "clm", "second_pass", "consistency", "backward", "optimizer")
"""The parts a step is split into (:func:`repro.methods.selfdistill.selfdistill_loss`'s ``clock``)."""


def _positions(kind: str, T: int, rng: np.random.Generator) -> np.ndarray:
    """PoSE's or LongRecipe's position ids of a row of ``T`` tokens, as ``bench gpu`` draws them
    (:data:`repro.bench.gpu_arms.POSITION_SPREAD`, sentences of :func:`repro.bench.gpu_arms.sentence_starts`)."""
    if kind == "pose":
        return pose(PositionSample(n=T), POSITION_SPREAD * T, rng)
    return longrecipe_alg1(PositionSample(n=T, sentence_starts=sentence_starts(T, rng)), POSITION_SPREAD * T, rng)


def _rows(batches, r: int, batch_size: int, length: int, vocab: int, rng: np.random.Generator) -> dict[str, np.ndarray]:
    if batches is not None:
        b = batches[r % len(batches)]
        return {k: np.asarray(b[k]) for k in ("input_ids", "position_ids", "weights", "doc_ids") if k in b}
    return random_rows(batch_size, length, vocab, rng)


def _batch(rows: dict[str, np.ndarray], fields: dict, spec, pad_id: int | None, rng: np.random.Generator,
           device: torch.device) -> dict[str, torch.Tensor]:
    b = dict(rows)
    if fields.get("positions"):
        B, T = b["input_ids"].shape
        if b.get("doc_ids") is not None:
            raise ValueError("position arms need rows of one document each (no doc_ids)")
        b["position_ids"] = np.stack([_positions(fields["positions"], T, rng) for _ in range(B)])
    valid = np.ones(b["input_ids"].shape, bool) if pad_id is None else b["input_ids"] != pad_id
    b.update(perturb_rows(spec, b["position_ids"], rng, valid))
    return {k: torch.as_tensor(v, device=device) for k, v in b.items()}


def measure_rp_step_costs(model: torch.nn.Module, batch_size: int, length: int, steps: int = 6, warmup: int = 1,
                          bf16: bool = False, longce=None, arms: dict[str, dict] | None = None, seed: int = 0,
                          progress: bool = True, batches=None, pad_id: int | None = None,
                          threads: int | None = None, settle: int = 1) -> dict[str, dict]:
    """Seconds per optimizer step of each arm (``arms``, default :data:`COST_ARMS`) on copies of ``model``.

    ``batches``: rows to time on (dicts of ``input_ids``, ``position_ids``, ``weights``, optional ``doc_ids``, e.g.
    an arm's prepared batches), used in turn, each arm drawing its own view of them; default: random token ids of
    ``batch_size`` x ``length``. ``pad_id``: tokens left out of the KL. ``longce``: the
    :class:`repro.methods.longce.LongCEConfig` of the LongCE arms (they are skipped without it). ``threads``:
    torch's CPU threads during the run (restored after). ``settle``: untimed steps of each arm right before its
    timed one in every timed round (:func:`repro.timing.interleaved_rounds`), so that a timed step follows a step
    of its own arm, as in training, not a bigger arm's (which slows a cheap arm on a CPU).

    Returns ``{arm: {"seconds": [...], "seconds_per_step": median, "ratio", "flops": [...], "bound", "vs_bound",
    "parts": {part: median seconds} (:data:`PARTS`), "tokens_per_step": ...}}``, timed in ``steps`` interleaved
    rounds after ``warmup`` untimed ones (:func:`repro.bench.step_timing.summarize`: ratios paired within rounds;
    each timed step after ``settle`` untimed ones of its arm, on the round's rows and its own draw of the views).
    FLOPs are counted per step from the model's shape and the step's own views (:mod:`repro.bench.method_flops`).
    """
    if steps < 1 or warmup < 0 or batch_size < 1 or length < 2 or (threads is not None and threads < 1) or settle < 0:
        raise ValueError(f"steps={steps}, warmup={warmup}, batch_size={batch_size}, length={length}, "
                         f"threads={threads}, settle={settle}; allowed: steps >= 1, warmup >= 0, batch_size >= 1, "
                         "length >= 2, threads >= 1 or None, settle >= 0")
    if batches is not None and not len(batches):
        raise ValueError("batches is empty; allowed: at least one batch, or None for random rows")
    arms = {k: v for k, v in (arms or COST_ARMS).items() if longce is not None or not v.get("longce")}
    if "Standard" not in arms:
        raise ValueError(f"arms {sorted(arms)} must include 'Standard' (the reference of the ratios)")
    if bad := [k for k, v in arms.items() if v.get("positions") not in (None, *POSITION_TRANSFORMS)]:
        raise ValueError(f"arm {bad[0]!r} positions={arms[bad[0]]['positions']!r}; allowed: "
                         f"{', '.join(POSITION_TRANSFORMS)}")
    rng = np.random.default_rng(seed)
    device = next(model.parameters()).device
    vocab = model.get_input_embeddings().weight.shape[0]
    dims = Dims.of(model.config)
    window = None if longce is None else (longce.window, longce.stride)
    rows = [_rows(batches, r, batch_size, length, vocab, rng) for r in range(warmup + steps)]
    clock = Clock(cuda=device.type == "cuda")
    setups = {}
    for name, fields in arms.items():
        m = copy.deepcopy(model).train()
        spec = SelfDistillSpec(**{k: v for k, v in fields.items() if k != "positions"})
        setups[name] = (fields, spec, m, torch.optim.AdamW(m.parameters(), lr=1e-4))

    def step(name: str, r: int) -> tuple[float, dict[str, float], float]:
        fields, spec, m, opt = setups[name]
        b = _batch(rows[r], fields, spec, pad_id, rng, device)
        T = b["input_ids"].shape[1]
        flops = rows_flops(lambda n, s: selfdistill_flops(dims, n, s, fields, window), [T] * len(b["input_ids"]),
                           b["split"].tolist())
        clock.start()
        loss, _ = selfdistill_loss(m, b, spec, bf16, longce if spec.longce else None, clock=clock)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        clock.lap("backward")
        opt.step()
        clock.lap("optimizer")
        return sum(clock.parts.values()), dict(clock.parts), flops

    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        times = interleaved_rounds(list(setups), steps, warmup, step, "RP-Cost steps", progress, settle)
    finally:
        torch.set_num_threads(previous)
    return summarize(times, "Standard", PARTS, {"tokens_per_step": int(rows[0]["input_ids"].size), "threads": threads})
