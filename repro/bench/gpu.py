"""``python -m repro bench gpu``: the one-GPU benchmark (its help, shapes and tables: :mod:`repro.bench.gpu_cli`).

:func:`run` builds each shape's model on the device with random weights, times the Standard step at every length
and every method's arm beside it (:func:`train_parts`, :func:`run_block`: arms of :mod:`repro.bench.gpu_arms`
interleaved round-robin, :func:`repro.timing.interleaved_rounds`), then the IG scores and generation on the shapes
that run them (:mod:`repro.bench.gpu_parts`), every arm guarded and the whole bounded by a time budget;
:func:`write_tables` writes the four tables through :class:`repro.figures.Recorder`.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import torch

from repro.attention.doc_masked import check_attn_implementation
from repro.bench.gpu_arms import method_arms
from repro.bench.gpu_cli import DEFAULT_BUDGET_S
from repro.bench.gpu_parts import Budget, doubling, free_memory, generation_rows, guarded, ig_rows
from repro.bench.gpu_shapes import (FLOP_FORMULA, QUICK_SHAPES, SHAPES, Shape, build_model, datasheet_peak,
                                    device_info, matmul_tflops, sync, train_flops)
from repro.devices import resolve_device, resolve_dtype
from repro.figures import Recorder
from repro.methods.cdt import cdt_spec
from repro.methods.longce import LongCEConfig
from repro.methods.selfdistill import longce_config
from repro.profiles import get_profile
from repro.timing import interleaved_rounds

TARGET = "TB-GPU"
TABLES = {"throughput": "GPU-Throughput", "methods": "GPU-Methods", "ig": "GPU-IG", "generation": "GPU-Generation"}
COLUMNS = {
    "throughput": ["model", "tokens/row", "rows", "checkpointing", "dtype", "seconds/step", "tokens/s", "FLOPs/step",
                   "TFLOP/s", "MFU (datasheet peak)", "MFU (measured matmul)", "datasheet TFLOP/s",
                   "matmul TFLOP/s", "FLOP formula", "status"],
    "methods": ["model", "tokens/row", "checkpointing", "arm", "paper", "seconds/step", "vs Standard", "timed steps",
                "note", "status"],
    "ig": ["model", "method", "length", "peak MiB", "rise MiB", "seconds", "memory", "status"],
    "generation": ["model", "prompt tokens", "batch", "new tokens", "generator", "seconds", "prompt tokens/s",
                   "generated tokens/s", "vs HF generate", "same tokens", "status"],
}
ARM_COST = {"self-distillation, skip, prefix-shared": 1.6, "self-distillation, skip, two full passes": 2.1,
            "LongCE": 2.5, "CDT": 1.8, "ProLong rows, dense mask (sdpa)": 1.3}
"""Rough step time of an arm in Standard steps, for the budget's estimate of a block (others: 1)."""


@dataclass(frozen=True)
class GPUBenchConfig:
    """What the run does (:data:`FULL` and :data:`QUICK`)."""

    shapes: tuple[Shape, ...] = SHAPES
    warmup: int = 1
    """Untimed rounds of every block (allocator and kernel warm-up)."""
    rounds: int = 2
    """Timed round-robin rounds of a block with the methods."""
    standard_steps: int = 3
    """Timed steps of a block with Standard alone."""
    lr: float = 1e-5
    """AdamW's learning rate (and CDT's Eq. 3 step); the values do not change the time."""
    longce: Any = None
    """A :class:`repro.methods.longce.LongCEConfig`; None: the paper profile's (windows of 4096 every 1024)."""
    ig_start: int = 4096
    ig_max: int = 131072
    ig_answer_tokens: int = 8
    gen_lengths: tuple[int, ...] = (8192, 32768)
    gen_batch: int = 1
    gen_new_tokens: int = 32
    gen_reps: int = 3
    matmul_n: int = 8192
    first_pass_max: int = 32768
    """Every shape runs its lengths up to this first, its longer ones after (:func:`plan`)."""
    budget_s: float = DEFAULT_BUDGET_S
    seed: int = 0


FULL = GPUBenchConfig()
QUICK = GPUBenchConfig(shapes=QUICK_SHAPES, rounds=1, standard_steps=2, ig_start=64, ig_max=512, gen_lengths=(256,),
                       gen_batch=2, gen_new_tokens=32, gen_reps=3, matmul_n=256, first_pass_max=256,
                       budget_s=600.0)


def set_checkpointing(model, on: bool) -> None:
    """Gradient checkpointing on or off (non-reentrant, as :class:`repro.train.Trainer` enables it)."""
    if on and not model.is_activation_checkpointing:
        model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    elif not on and model.is_activation_checkpointing:
        model.activation_checkpointing_disable()


def _use_attention(model, name: str) -> None:
    if getattr(model.config, "_attn_implementation", None) != name:
        model.set_attn_implementation(check_attn_implementation(name))


def train_step(model, opt, arm, batch: dict, step: int, device: torch.device) -> float:
    """Seconds of one optimizer step of ``arm`` on ``batch``: loss, backward, clipping, AdamW (synchronized)."""
    _use_attention(model, arm.attn)
    sync(device)
    t0 = time.perf_counter()
    loss = arm.loss(model, batch, step)
    loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
    sync(device)
    return time.perf_counter() - t0


def run_block(model, opt, arms: dict, cfg: GPUBenchConfig, device: torch.device, budget: Budget,
              progress: bool = False, desc: str = "steps") -> dict[str, dict]:
    """Time ``arms`` (a dict of :class:`repro.bench.gpu_arms.Arm`) round-robin on one model and optimizer
    (:func:`repro.timing.interleaved_rounds`); per arm ``{"seconds": [...], "status": ...}``. An arm that fails
    drops out with its error; when the budget runs out the block stops (arms not yet timed: skipped)."""
    res = {n: {"seconds": [], "status": a.skip or "ok", "done": a.skip is not None} for n, a in arms.items()}
    runnable = [n for n, a in arms.items() if a.skip is None]
    rng = np.random.default_rng(cfg.seed)
    model.train()

    def step(name: str, r: int):
        out = res[name]
        if out["done"]:
            return None
        if budget.left() <= 0:
            out["done"] = True
            if not out["seconds"]:
                out["status"] = budget.skip(f"{desc}: {name}", "spent")
            return None
        batch, status = guarded(arms[name].batch, rng)
        sec, status = (guarded(train_step, model, opt, arms[name], batch, r, device) if status == "ok" else
                       (None, status))
        del batch
        if status != "ok":
            out.update(status=status, done=True, seconds=[])
            opt.zero_grad(set_to_none=True)
            free_memory()
            return None
        if r >= cfg.warmup:
            out["seconds"].append(sec)
        return sec

    rounds = cfg.rounds if len(runnable) > 1 else cfg.standard_steps
    interleaved_rounds(runnable, rounds, cfg.warmup, step, desc, progress)
    _use_attention(model, "sdpa")
    return res


def _sig(x: float, digits: int = 4) -> float:
    """``x`` to ``digits`` significant digits (a tiny CPU step's TFLOP/s is not rounded to 0)."""
    return float(f"{x:.{digits}g}")


def _estimate(rate: float | None, shape: Shape, T: int, names, cfg: GPUBenchConfig) -> float | None:
    if rate is None:
        return None
    rounds = cfg.warmup + (cfg.rounds if len(names) > 1 else cfg.standard_steps)
    units = sum(ARM_COST.get(n, 1.0) for n in names)
    return rate * train_flops(shape, T) * units * rounds * (4 / 3 if shape.checkpointing(T) else 1.0)


def _throughput_row(shape: Shape, T: int, r: dict, dtype: torch.dtype, peak: float | None) -> dict:
    flops = train_flops(shape, T)
    row = {"model": shape.name, "tokens/row": T, "rows": 1, "checkpointing": "yes" if shape.checkpointing(T) else "no",
           "dtype": str(dtype).replace("torch.", ""), "FLOPs/step": float(flops),
           "datasheet TFLOP/s": peak or "unknown", "FLOP formula": "6·N·T + 6·L·d·T²", "status": r["status"]}
    if r["seconds"]:
        sec = statistics.median(r["seconds"])
        tflops = flops / sec / 1e12
        row.update({"seconds/step": _sig(sec), "tokens/s": round(T / sec), "TFLOP/s": _sig(tflops),
                    "MFU (datasheet peak)": _sig(tflops / peak) if peak else ""})
    return row


def _method_rows(shape: Shape, T: int, arms: dict, res: dict) -> list[dict]:
    std = res["Standard"]["seconds"]
    ref = statistics.median(std) if std else None
    rows = []
    for name, arm in arms.items():
        r = res[name]
        row = {"model": shape.name, "tokens/row": T, "checkpointing": "yes" if shape.checkpointing(T) else "no",
               "arm": name, "paper": arm.paper, "timed steps": len(r["seconds"]), "note": arm.note,
               "status": r["status"]}
        if r["seconds"]:
            sec = statistics.median(r["seconds"])
            row.update({"seconds/step": _sig(sec), "vs Standard": _sig(sec / ref) if ref else ""})
        rows.append(row)
    return rows


def train_parts(model, shape: Shape, lengths: tuple[int, ...], cfg: GPUBenchConfig, device: torch.device,
                dtype: torch.dtype, budget: Budget, state: dict, tables: dict, log=print) -> None:
    """Each of ``lengths`` on ``shape``: Standard alone, or with every method (``shape.method_lengths``); rows appended
    to ``tables["throughput"]`` and ``tables["methods"]``. ``state``: ``rate`` (seconds per model FLOP of the
    last Standard step, for the budget's estimates), ``peak``, ``matmul`` (the best measured rate), ``progress``."""
    paper = get_profile("paper")
    longce, spec = cfg.longce or longce_config(paper), cdt_spec(paper)
    bf16 = dtype == torch.bfloat16
    opt = torch.optim.AdamW(model.parameters(), lr=cfg.lr, betas=(0.9, 0.95), weight_decay=0.1,
                            fused=device.type == "cuda")
    for T in lengths:
        set_checkpointing(model, shape.checkpointing(T))
        lc = longce if longce.window < T else LongCEConfig(window=max(2, T // 2), stride=max(1, T // 8))
        arms, status = guarded(method_arms, T, shape.vocab, device, bf16, cfg.lr, lc, spec, shape.checkpointing(T),
                               np.random.default_rng(cfg.seed))
        if arms is None:
            tables["throughput"].append(_throughput_row(shape, T, {"seconds": [], "status": status}, dtype,
                                                        state["peak"]))
            continue
        if T not in shape.method_lengths:
            arms = {"Standard": arms["Standard"]}
        est = _estimate(state["rate"], shape, T, [n for n, a in arms.items() if a.skip is None], cfg)
        if est is not None and est > budget.left():
            std = _estimate(state["rate"], shape, T, ["Standard"], cfg)
            why = f"est. {est:.0f} s, {budget.left():.0f} s left"
            for name, arm in arms.items():
                if arm.skip is None and (name != "Standard" or std > budget.left()):
                    arm.skip = budget.skip(f"{shape.name} {T}: {name}", why)
        res = run_block(model, opt, arms, cfg, device, budget, state["progress"], f"{shape.name} {T}")
        row = _throughput_row(shape, T, res["Standard"], dtype, state["peak"])
        tables["throughput"].append(row)
        if res["Standard"]["seconds"]:
            state["rate"] = row["seconds/step"] / train_flops(shape, T) / (4 / 3 if shape.checkpointing(T) else 1.0)
        if len(arms) > 1:
            tables["methods"].extend(_method_rows(shape, T, arms, res))
        log(f"{shape.name} {T}: Standard {row.get('tokens/s', row['status'])} tokens/s, {row.get('TFLOP/s')} "
            f"TFLOP/s, MFU {row.get('MFU (datasheet peak)') or '(peak unknown)'}; "
            + ", ".join(f"{n} {statistics.median(r['seconds']) / statistics.median(res['Standard']['seconds']):.2f}x"
                        for n, r in res.items() if n != "Standard" and r["seconds"] and res["Standard"]["seconds"]))
        free_memory()
        state["matmul"] = _ceiling(state["matmul"], device, dtype, cfg.matmul_n)
    set_checkpointing(model, False)
    opt.zero_grad(set_to_none=True)
    del opt
    free_memory()


def _ceiling(best: float | None, device: torch.device, dtype: torch.dtype, n: int) -> float | None:
    """The matmul rate measured again, the best so far kept: measured before, between the blocks and after, so
    that a busy moment (a shared machine) does not lower the ceiling and inflate the MFU."""
    now, _ = guarded(matmul_tflops, device, dtype, n)
    return max((m for m in (best, now) if m is not None), default=None)


def plan(cfg: GPUBenchConfig) -> list[tuple[Shape, tuple[int, ...], bool]]:
    """``(shape, lengths, analyses)`` in the order they run: every shape up to ``cfg.first_pass_max`` tokens (with
    the IG and generation parts of the shapes that have them), then every shape's longer rows, so that a budget
    that runs short cuts the longest rows rather than a whole model."""
    first = [(s, tuple(T for T in s.lengths if T <= cfg.first_pass_max), s.analyses) for s in cfg.shapes]
    later = [(s, tuple(T for T in s.lengths if T > cfg.first_pass_max), False) for s in cfg.shapes]
    return [p for p in first + later if p[1] or p[2]]


def run(cfg: GPUBenchConfig, device: torch.device, log=print, progress: bool = True) -> tuple[dict, dict]:
    """Every part on every shape: ``(tables, meta)``; tables by :data:`TABLES` key, meta: ``device`` (its
    :func:`repro.bench.gpu_shapes.device_info`), ``dtype``, ``peak``, ``matmul``, ``seconds``, ``skipped``."""
    budget = Budget(cfg.budget_s)
    dtype = resolve_dtype("auto", device)
    info = device_info(device)
    peak = datasheet_peak(info["name"]) if device.type == "cuda" else None
    matmul, status = guarded(matmul_tflops, device, dtype, cfg.matmul_n)
    log(f"{info['line']}: datasheet bf16 peak {peak or 'unknown'} TFLOP/s, measured {dtype} matmul "
        f"{f'{matmul:.2f}' if matmul else status} TFLOP/s")
    state = {"rate": None, "peak": peak, "progress": progress, "matmul": matmul}
    tables: dict[str, list] = {k: [] for k in TABLES}
    for shape, lengths, analyses in plan(cfg):
        if budget.left() <= 0:
            tables["throughput"] += [_throughput_row(shape, T, {"seconds": [], "status": budget.skip(
                f"{shape.name} {T}", "spent")}, dtype, peak) for T in lengths]
            continue
        model, status = guarded(build_model, shape, device, dtype, cfg.seed)
        if model is None:
            tables["throughput"] += [_throughput_row(shape, T, {"seconds": [], "status": status}, dtype, peak)
                                     for T in lengths]
            continue
        train_parts(model, shape, lengths, cfg, device, dtype, budget, state, tables, log)
        if analyses:
            tables["ig"] += ig_rows(model, shape, doubling(cfg.ig_start, cfg.ig_max), cfg.ig_answer_tokens, device,
                                    budget, cfg.seed, log)
            tables["generation"] += generation_rows(model, shape, cfg.gen_lengths, cfg.gen_batch, cfg.gen_new_tokens,
                                                    cfg.gen_reps, device, budget, cfg.seed, log)
        del model
        free_memory()
    order = {s.name: i for i, s in enumerate(cfg.shapes)}
    for key in ("throughput", "methods"):  # by shape and length (the plan ran the long rows last); arms in order
        tables[key].sort(key=lambda r: (order[r["model"]], r["tokens/row"]))
    matmul = _ceiling(state["matmul"], device, dtype, cfg.matmul_n)
    for row in tables["throughput"]:
        row["matmul TFLOP/s"] = _sig(matmul) if matmul else ""
        if row.get("TFLOP/s") and matmul:
            row["MFU (measured matmul)"] = _sig(row["TFLOP/s"] / matmul)
    meta = {"device": info, "dtype": str(dtype).replace("torch.", ""), "peak": peak, "matmul": matmul,
            "seconds": budget.elapsed(), "skipped": budget.skipped}
    return tables, meta


def write_tables(tables: dict, meta: dict, figures_dir: str, quick: bool) -> list[str]:
    """The four tables (:data:`TABLES`) under ``figures_dir`` through :class:`repro.figures.Recorder`; returns
    their csv paths."""
    rec = Recorder(figures_dir, "gpu-quick" if quick else "gpu")
    run_line = (f"On {meta['device']['line']}; random weights, {meta['dtype']}, batch 1 row; "
                f"{'--quick (tiny shapes: a check, not a benchmark); ' if quick else ''}"
                f"the run took {meta['seconds']:.0f} s")
    skipped = f"; skipped by the time budget: {', '.join(meta['skipped'])}" if meta["skipped"] else ""
    matmul = f"{meta['matmul']:.2f}" if meta["matmul"] else "not measured"
    peak = f"{meta['peak']:g} TFLOP/s" if meta["peak"] else "unknown for this device"
    captions = {
        "throughput": f"Standard training step (forward, backward, AdamW). {run_line}{skipped}. FLOPs per step: "
                      f"{FLOP_FORMULA}; recomputation under gradient checkpointing not counted. MFU: model FLOP/s "
                      f"over the datasheet's dense bf16 peak ({peak}) "
                      f"and over the {meta['dtype']} matmul rate measured here ({matmul} TFLOP/s).",
        "methods": f"Step time of each method as a ratio to Standard at the same shape, every arm of a block "
                   f"timed round-robin in one process (median of its timed steps). {run_line}{skipped}.",
        "ig": f"IG scores of one random sequence (8 answer tokens): memory-linear vs the direct Eq. 1, each until its "
              f"first failure. {run_line}{skipped}.",
        "generation": f"Greedy generation on random prompts, ours vs HF generate (EOS off; prompt tokens/s from a "
                      f"1-token call, generated tokens/s from the difference; best of the repetitions). "
                      f"{run_line}{skipped}.",
    }
    paths = [str(rec.table(tables[k], TARGET, name=name, columns=COLUMNS[k], caption=captions[k]))
             for k, name in TABLES.items()]
    first = next((r for r in tables["throughput"] if r.get("tokens/s")), None)
    ours = (f"{first['model']} at {first['tokens/row']}: {first['tokens/s']:,.0f} tokens/s, MFU "
            f"{first.get('MFU (datasheet peak)') or first.get('MFU (measured matmul)')}" if first else "no step ran")
    rec.result(TARGET, ours=ours, agrees="n/a", note=meta["device"]["name"])
    return paths


def gpu_main(quick: bool = False, figures_dir: str = "figures/gpu", budget_s: float | None = None,
             device: str = "auto") -> int:
    """``python -m repro bench gpu``: run (:func:`run`) and write the tables (:func:`write_tables`)."""
    os.environ.setdefault("PYTORCH_CUDA_ALLOC_CONF", "expandable_segments:True")  # long rows fragment the cache
    try:
        dev = resolve_device(device)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if dev.type != "cuda" and not quick:
        print(f"error: bench gpu trains the 1B and 8B shapes and needs a CUDA GPU (device {str(dev)!r}); use --quick "
              "for the tiny shapes on the CPU", file=sys.stderr)
        return 2
    if budget_s is not None and not budget_s > 0:
        print(f"error: --budget-s {budget_s!r}; allowed: > 0 seconds", file=sys.stderr)
        return 2
    cfg = QUICK if quick else FULL
    if budget_s is not None:
        cfg = replace(cfg, budget_s=float(budget_s))
    tables, meta = run(cfg, dev, progress=not quick)
    for path in write_tables(tables, meta, figures_dir, quick):
        print(f"wrote {path} and .md")
    if meta["skipped"]:
        print(f"skipped by the time budget ({cfg.budget_s:.0f} s): {', '.join(meta['skipped'])}")
    return 0

