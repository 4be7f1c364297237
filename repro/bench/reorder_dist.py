"""The real check of :mod:`repro.bench.reorder_sim`: data-parallel processes (``torch.distributed``, gloo, on this
machine) run each step's dealt micro-batches under every order and time it.

Each process gets, per step and order, its micro-batches (:func:`repro.bench.reorder_sim.deal`); in accumulation
round ``r`` it runs its ``r``-th one, then all-reduces (as FSDP's per-micro-batch gradient reduction): with
``work="compute"`` a real forward + backward of the benchmark's tiny Llama with ``sdpa_varlen``
(:func:`repro.bench.reorder_model.train_pass`) and the all-reduce of its flattened gradients; with ``work="sleep"`` a
sleep of the micro-batch's modelled cost (:class:`~repro.bench.reorder_sim.CostModel`) and the all-reduce of a small
buffer (a clean check of the model where real compute on shared cores is too noisy). The wall time of a step runs
from a barrier to the end of its last all-reduce. Orders are interleaved in the same processes (every order on a
step, then the next step; the orders' sequence reversed every repeat).

What each work measures: ``sleep`` stands for workers on dedicated devices (a worker waiting for the slowest one
loses its time). With ``compute`` on CPU cores shared by the workers (and by other jobs), a waiting worker's core
serves the others, so the total CPU work, not the slowest worker, sets the step time and ordering gains little
(measured: ratios 0.95-1.0 on 2 loaded cores where the model predicts 0.84-0.91).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist

from repro.bench.reorder_model import tiny_model, train_pass
from repro.bench.reorder_sim import ORDERS, CostModel, deal, step_time
from repro.data.balance import sum_sq_lengths
from repro.distributed import free_port


def _write_spec(folder: Path, steps: Sequence[Sequence[Mapping]], **fields) -> Path:
    """The workers' inputs without pickle: the micro-batches' arrays in ``steps.npz`` (key ``step/micro/name``),
    everything else (numbers, strings, the cost model's fields) in ``spec.json``. Returns the JSON's path."""
    arrays = {f"{s}/{m}/{k}": np.asarray(v) for s, step in enumerate(steps) for m, mb in enumerate(step)
              for k, v in mb.items()}
    np.savez(folder / "steps.npz", **arrays)
    shape = [[sorted(mb) for mb in step] for step in steps]
    spec = folder / "spec.json"
    spec.write_text(json.dumps({**fields, "shape": shape, "arrays": str(folder / "steps.npz")}))
    return spec


def _read_spec(path: str) -> dict:
    """:func:`_write_spec`'s fields with ``steps`` rebuilt (``allow_pickle=False``) and ``cost`` a CostModel."""
    spec = json.loads(Path(path).read_text())
    with np.load(spec.pop("arrays"), allow_pickle=False) as z:
        spec["steps"] = [[{k: z[f"{s}/{m}/{k}"] for k in names} for m, names in enumerate(step)]
                         for s, step in enumerate(spec.pop("shape"))]
    spec["cost"] = CostModel(**spec["cost"])
    spec["orders"] = tuple(spec["orders"])
    return spec


def _sync_buffer(model) -> torch.Tensor:
    if model is None:
        return torch.zeros(1024)
    grads = [p.grad.reshape(-1) if p.grad is not None else torch.zeros(p.numel()) for p in model.parameters()]
    model.zero_grad(set_to_none=True)
    return torch.cat(grads)


def _worker(rank: int, world: int, port: int, steps, work: str, cost: CostModel, orders: Sequence[str],
            repeats: int, warmup: int, seed: int, threads: int, out_path: str) -> None:
    os.environ["MASTER_ADDR"], os.environ["MASTER_PORT"] = "127.0.0.1", str(port)
    torch.set_num_threads(threads)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    try:
        model = None
        if work == "compute":
            model = tiny_model(seed, max_positions=max(s[0]["input_ids"].shape[1] for s in steps))
        keys = [[sum_sq_lengths(m) for m in step] for step in steps]
        records: list[dict] = []
        for r in range(warmup + repeats):
            for s, step in enumerate(steps):
                for order in (orders if r % 2 == 0 else orders[::-1]):
                    dealt = deal(keys[s], world, order)
                    mine, rounds = dealt[rank], max(len(d) for d in dealt)
                    busy = []
                    dist.barrier()
                    t0 = time.perf_counter()
                    for i in range(rounds):
                        t1 = time.perf_counter()
                        if i < len(mine):
                            if model is not None:
                                train_pass(model, step[mine[i]])
                            else:
                                time.sleep(cost.of(step[mine[i]]))
                        busy.append(time.perf_counter() - t1)
                        dist.all_reduce(_sync_buffer(model))
                    wall = time.perf_counter() - t0
                    if r >= warmup:
                        records.append({"repeat": r - warmup, "step": s, "order": order, "wall": wall,
                                        "busy": busy})
        gathered: list = [None] * world
        dist.all_gather_object(gathered, records)
        if rank == 0:
            tmp = Path(out_path).with_suffix(".tmp")
            tmp.write_text(json.dumps(gathered))
            os.replace(tmp, out_path)
        dist.barrier()
    finally:
        dist.destroy_process_group()


def run_distributed(steps: Sequence[Sequence[Mapping]], workers: int = 2, work: str = "compute",
                    cost: CostModel | None = None, orders: Sequence[str] = ORDERS, repeats: int = 3,
                    warmup: int = 1, seed: int = 0, threads: int = 1, timeout: float = 600) -> dict:
    """Wall seconds per step of ``steps`` (lists of micro-batches) on ``workers`` gloo processes of ``threads``
    torch threads (each a ``python -m repro.bench.reorder_dist`` subprocess, ``timeout`` seconds at most), for
    every order (``unsorted`` required), ``repeats`` timed repeats after ``warmup``.

    Returns ``{"work", "workers", "steps", "micro_batches", "repeats", "arms": {order: {"seconds": [wall of each
    (repeat, step), the max over processes], "median_seconds", "total", "ratio": total / unsorted's total,
    "round_max_total": sum over rounds of the slowest process's work time (all-reduces excluded),
    "predicted_total": the cost model's step times (:func:`repro.bench.reorder_sim.step_time`) x repeats}},
    "ideal_ratio": the cost model's perfect balance / unsorted}``."""
    if work not in ("compute", "sleep"):
        raise ValueError(f"work={work!r}; allowed: compute, sleep")
    if "unsorted" not in orders or any(o not in ORDERS for o in orders):
        raise ValueError(f"orders={list(orders)}; allowed: a subset of {', '.join(ORDERS)} with unsorted")
    if work == "sleep" and cost is None:
        raise ValueError("work='sleep' needs a cost model (the seconds to sleep)")
    cost = cost or CostModel()
    steps = [list(s) for s in steps]
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "records.json"
        spec = _write_spec(Path(tmp), steps, world=workers, port=free_port(), work=work, cost=vars(cost),
                           orders=list(orders), repeats=repeats, warmup=warmup, seed=seed, threads=threads,
                           out_path=str(out))
        procs = [subprocess.Popen([sys.executable, "-m", "repro.bench.reorder_dist", str(spec), str(rank)],
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for rank in range(workers)]
        logs = [p.communicate(timeout=timeout)[0] for p in procs]
        if any(p.returncode for p in procs) or not out.exists():
            raise RuntimeError("a worker failed:\n" + "\n".join(f"rank {r} (exit {p.returncode}):\n{log[-3000:]}"
                                                              for r, (p, log) in enumerate(zip(procs, logs))))
        per_rank = json.loads(out.read_text())
    keys = [[sum_sq_lengths(m) for m in step] for step in steps]
    costs = [[cost.of(m) for m in step] for step in steps]
    arms = {}
    for order in orders:
        recs = [[r for r in rank if r["order"] == order] for rank in per_rank]
        walls = [max(rank[i]["wall"] for rank in recs) for i in range(len(recs[0]))]
        round_max = [sum(max(rank[i]["busy"][j] for rank in recs) for j in range(len(recs[0][i]["busy"])))
                     for i in range(len(recs[0]))]
        predicted = sum(step_time(c, deal(k, workers, order)) for k, c in zip(keys, costs)) * repeats
        arms[order] = {"seconds": walls, "median_seconds": statistics.median(walls), "total": sum(walls),
                       "round_max_total": sum(round_max), "predicted_total": predicted}
    for a in arms.values():
        a["ratio"] = a["total"] / arms["unsorted"]["total"]
        a["paired_median_ratio"] = statistics.median(x / u for x, u in zip(a["seconds"], arms["unsorted"]["seconds"]))
        a["round_max_ratio"] = a["round_max_total"] / arms["unsorted"]["round_max_total"]
        a["predicted_ratio"] = a["predicted_total"] / arms["unsorted"]["predicted_total"] \
            if arms["unsorted"]["predicted_total"] > 0 else float("nan")
    ideal = sum(sum(c) / workers for c in costs) * repeats
    unsorted = arms["unsorted"]["predicted_total"]
    return {"work": work, "workers": workers, "steps": len(steps), "micro_batches": [len(s) for s in steps],
            "repeats": repeats, "cost_model": vars(cost), "arms": arms,
            "ideal_ratio": ideal / unsorted if unsorted > 0 else float("nan")}


if __name__ == "__main__":  # a worker: python -m repro.bench.reorder_dist SPEC_JSON RANK
    _worker(int(sys.argv[2]), **_read_spec(sys.argv[1]))
    # Leave without the interpreter's teardown: gloo's threads, still alive after destroy_process_group, can abort
    # the process there ("terminate called without an active exception", measured in ~1 run of 7 on torch 2.13)
    # although every result is already written.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
