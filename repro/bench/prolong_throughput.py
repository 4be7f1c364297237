"""PL-Tab15: training throughput of ProLong's recipe rows with full attention, document-masked attention and
minibatch reordering (ProLong App. A.3: 2770 / 2780 / 3095 tokens/s/GPU on 8 H100s with FSDP).

On the recipe arm's own training rows (its prepared batches: windows of long documents, packed ShortMix documents,
task rows):

1. **one process, measured**: tokens/s of a training step (forward + backward, :func:`repro.train.clm_step`) and
   of a forward pass alone, with full attention (each row one document: ProLong's "no document masks"), with
   document masks as transformers builds them for sdpa (a dense block-diagonal mask), with ``sdpa_varlen`` (each
   document alone: :mod:`repro.attention.doc_masked`), with ``flex_doc`` (flex attention's block mask:
   :mod:`repro.attention.flex`; forward only on the CPU, where torch has no flex backward) and, on CUDA with
   flash-attn, its varlen kernel, interleaved in one run (:func:`repro.bench.doc_attention.measure_rows`);
2. **k data-parallel workers, simulated**: the rows of ``group`` consecutive steps form one step of one-row
   micro-batches (ProLong accumulates many per device), dealt round-robin to k workers that wait for each other
   after every round; the step time with the micro-batches unsorted and sorted by the sum of squared document
   lengths (:mod:`repro.bench.reorder_sim`), under the cost model fitted on this CPU with ``sdpa_varlen``
   (:func:`repro.bench.reorder.fit_costs`), kept per step, and again under the model fitted on each timed round
   alone (the spread of those ratios is the fit's timing noise). One process cannot wait for another, so
   reordering changes nothing there; its gain exists only across workers, as the paper says.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from repro.attention.doc_masked import check_attn_implementation
from repro.bench.doc_attention import measure_rows
from repro.bench.reorder import fit_costs
from repro.bench.reorder_sim import CostModel, simulate
from repro.methods.prepared import PreparedBatches


def recipe_rows(prepared: str | Path, steps: int | None = None) -> list[dict[str, np.ndarray]]:
    """The first ``steps`` batches of a prepared-batches folder (:mod:`repro.methods.prepared`), each a dict of
    ``input_ids``, ``position_ids``, ``doc_ids``, ``weights``."""
    pb = PreparedBatches(prepared)
    n = pb.steps if steps is None else min(steps, pb.steps)
    return [{k: v for k, v in pb.batch(s).items() if k in ("input_ids", "position_ids", "doc_ids", "weights")}
            for s in range(n)]


def measure_pl_throughput(model: torch.nn.Module, batches: Sequence[dict[str, np.ndarray]], rounds: int = 4,
                          workers: Sequence[int] = (2, 4, 8), group: int = 8, fit: bool = True,
                          threads: int | None = 1, progress: bool = True) -> dict:
    """PL-Tab15's measurements (module docstring): ``{"single": {arm: {"tokens_per_s", "ratio", "seconds" (per
    interleaved round), ...}}, "simulated": {k: {order: {"seconds" (per step), "total", "ratio", "round_ratios"}}},
    "fit": {..., "rounds"}, "rows": [B, T], "docs_per_row"}`` (:func:`_simulated` says what ``round_ratios`` are).
    ``batches``: the recipe's steps (the first is timed in the single-process arms)."""
    if not batches or rounds < 1 or group < 1 or any(k < 1 for k in workers):
        raise ValueError(f"{len(batches)} batches, rounds={rounds}, group={group}, workers={workers}; allowed: at "
                         "least one batch, rounds >= 1, group >= 1, workers >= 1")
    first = {k: torch.as_tensor(v) for k, v in batches[0].items()}
    single = measure_rows(model, first, steps=rounds, threads=threads, progress=progress, desc="PL-Tab15")
    out: dict = {"single": single, "rows": list(first["input_ids"].shape),
                 "docs_per_row": float((first["position_ids"] == 0).sum()) / first["input_ids"].shape[0]}
    micro = [{k: v[r:r + 1] for k, v in b.items()} for b in batches for r in range(len(b["input_ids"]))]
    steps = [micro[i:i + group * len(batches[0]["input_ids"])]
             for i in range(0, len(micro), group * len(batches[0]["input_ids"]))]
    if fit:
        m = copy.deepcopy(model).train()
        m.set_attn_implementation(check_attn_implementation("sdpa_varlen"))
        prev = torch.get_num_threads()
        if threads:
            torch.set_num_threads(threads)
        try:
            got = fit_costs(m, int(first["input_ids"].shape[1]))
        finally:
            torch.set_num_threads(prev)
        cost: CostModel = got["model"]
        out["fit"] = {"a": cost.a, "b": cost.b, "c": cost.c, "r2": got["r2"], "rounds": got["rounds"]}
    else:
        cost = CostModel.attention_share(int(first["input_ids"].shape[1]), 0.5)
        out["fit"] = {"a": cost.a, "b": cost.b, "c": cost.c, "r2": None, "paper_like": True, "rounds": []}
    out["simulated"] = {k: _simulated(steps, k, cost, [CostModel(**r) for r in out["fit"]["rounds"]])
                        for k in workers}
    out["micro_batches_per_step"] = len(steps[0])
    return out


def _simulated(steps, workers: int, cost, round_costs: Sequence) -> dict:
    """:func:`repro.bench.reorder_sim.simulate` of ``steps`` on ``workers`` under ``cost`` (per order: ``seconds``
    per step, ``total``, ``ratio`` to unsorted), each order also with ``round_ratios``: its ratio under each of
    ``round_costs`` (the cost model fitted on one timed round alone; empty without a fit), the spread that says how
    much the fit's timing noise moves the ratio."""
    out = {o: dict(r) for o, r in simulate(steps, workers, cost).items() if isinstance(r, dict)}
    for o in out:
        out[o]["round_ratios"] = []
    for c in round_costs:
        sim = simulate(steps, workers, c)
        for o in out:
            if "ratio" in sim.get(o, {}):
                out[o]["round_ratios"].append(sim[o]["ratio"])
    return out
