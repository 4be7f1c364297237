"""Training cost per extension arm, measured in one run (LongRecipe's efficiency claim).

LongRecipe claims ~30% of the tokens of full-length training (FLT) and >85% less
compute. :func:`measure_step_costs` times optimizer steps of every arm in the
same process, interleaved round-robin (A B C A B C ...) so that machine noise
hits every arm alike, each timed step right after an untimed one of its own arm
(a step that follows another arm's runs slower on a CPU);
:func:`repro.reports.longrecipe.cost_rows` turns the
numbers into ratios to FLT. FLOPs are estimated analytically
(:func:`repro.reports.longrecipe.step_flops`).
"""

from __future__ import annotations

import copy
import statistics
import tempfile
import time
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from repro import stages
from repro.methods import extension_spec
from repro.methods.prepared import PreparedBatches, prepare_batches
from repro.models import load_model, n_params
from repro.profiles import get_profile
from repro.timing import interleaved_rounds
from repro.train import clm_step


def measure_step_costs(profile, arms: Sequence[str], run_dir: str | Path = "runs", steps: int = 8,
                       warmup: int = 2, progress: bool = True, settle: int = 1) -> dict[str, dict]:
    """Seconds, sample tokens and estimated FLOPs per optimizer step of each arm, from the base model.

    Each arm trains its own copy of the base model with its own data for ``warmup + steps``
    steps; the steps of all arms are interleaved, each timed step right after ``settle`` untimed ones of its own arm
    on the same batch (:func:`repro.timing.interleaved_rounds`: on a CPU a step that follows another arm's, with
    other sample lengths, runs slower). Compute (forward, backward, optimizer) and
    data are timed apart: each arm's batches are prepared before training (as the extension stage
    does; LongRecipe's sentence selection is offline preprocessing in the paper), so the data time
    of a step is the read of its prepared batch. Returns ``{arm: {"seconds_per_step" (median
    compute), "seconds" (list, one per round), "data_seconds_per_step" (median read), "data_seconds" (list, one
    per round), "prepare_seconds_per_step"
    (one-time preparation, per step), "tokens_per_step", "flops_per_step", "sample_len"}}``.
    """
    p = get_profile(profile) if isinstance(profile, str) else profile
    if steps < 1 or warmup < 0 or settle < 0:
        raise ValueError(f"steps={steps}, warmup={warmup}, settle={settle}; allowed: steps >= 1, warmup >= 0, "
                         "settle >= 0")
    e = p.extend
    base = load_model(stages.train_base(p, run_dir, progress=progress), attn_implementation=p.model.attn_implementation)
    tok = stages.get_tokenizer(p, run_dir)
    rows = stages.build_corpus(p, run_dir).rows()
    anchors = stages.impactful_tokens(p, run_dir, progress=progress)["anchors"] \
        if any(extension_spec(a).selection == "anchors" for a in arms) else None
    setups = {}
    for arm in arms:
        # another data seed than training's, so the timed steps are not the trained ones replayed
        m = stages.extension_method(p, arm, tok, rows, anchors, seed=e.seed + 99)
        model = copy.deepcopy(base).train()
        opt = torch.optim.AdamW(model.parameters(), lr=e.lr)
        setups[arm] = (m, model, opt)

    prep: dict[str, float] = {}
    tmp = tempfile.TemporaryDirectory(prefix="cost-")
    for arm in arms:  # the batches are prepared before training, as the extension stage does
        m, model, opt = setups[arm]
        t0 = time.perf_counter()
        path = prepare_batches(m, warmup + steps, Path(tmp.name) / arm)
        prep[arm] = (time.perf_counter() - t0) / (warmup + steps)
        setups[arm] = (PreparedBatches(path, inner=m), model, opt)
    def step(arm: str, r: int) -> tuple[float, float, int]:
        m, model, opt = setups[arm]
        t0 = time.perf_counter()
        batch = {k: torch.as_tensor(v) for k, v in m.batch(r).items()}
        t1 = time.perf_counter()
        loss, _ = clm_step(model, batch, e.bf16)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        # the sample tokens of batch r from the prepared states (the same however often round r's step runs)
        return time.perf_counter() - t1, t1 - t0, m.states[r]["tokens"] - (m.states[r - 1]["tokens"] if r else 0)

    kept = interleaved_rounds(arms, steps, warmup, step, "cost", progress, settle)
    times = {a: [k[0] for k in kept[a]] for a in arms}
    data = {a: [k[1] for k in kept[a]] for a in arms}
    tokens = {a: [k[2] for k in kept[a]] for a in arms}
    tmp.cleanup()
    params = n_params(base)
    out = {}
    for arm in arms:
        n = setups[arm][0].inner.sample_len
        tps = float(np.mean(tokens[arm]))
        out[arm] = {"seconds_per_step": statistics.median(times[arm]), "seconds": times[arm],
                    "data_seconds_per_step": statistics.median(data[arm]), "data_seconds": data[arm],
                    "prepare_seconds_per_step": prep[arm],
                    "tokens_per_step": tps, "sample_len": n,
                    "flops_per_step": step_flops(params, p.model.num_layers, p.model.hidden_size, int(tps), n)}
    return out


def step_flops(n_params: int, layers: int, hidden: int, tokens: int, sample_len: int) -> float:
    """Training FLOPs of one step: 6 x params x tokens plus causal attention scores and values
    (6 x layers x hidden x sample_len^2 per sample, forward and backward)."""
    samples = tokens / max(sample_len, 1)
    return 6.0 * n_params * tokens + 6.0 * layers * hidden * sample_len ** 2 * samples
