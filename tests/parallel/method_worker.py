"""Every method's step, sequence-parallel against one process, in float64 (``tests/parallel/test_rows.py``).

:func:`run_method_check` starts ``world`` gloo processes (``python -m tests.parallel.method_worker SPEC RANK``).
Each builds every method of the spec exactly as ``python -m repro train`` does (:func:`repro.cli.train.build_parts`
on a local model folder and data), casts the model to float64, and runs step 0 through the trainer's own
multi-process path: DDP (accelerate, gloo), the data-parallel share of the rows, ``sequence_parallel`` ranks per
row (:func:`repro.parallel.rows.setup`, :func:`repro.distributed.gradients`). It writes the step's global loss
and the parameter gradients after the engine's all-reduce. :func:`reference` runs the same step in one process on
the whole batch (the plain trainer path: the method's loss and one backward).
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from repro.methods.protocol import StepState
from repro.parallel.workers import run_workers
from repro.pipeline import REPO


def train_args(method: str, model: str | Path, data: str | Path, target: int, batch_size: int,
               profile: str = "smoke", extra: Sequence[str] = ()) -> list[str]:
    """The ``train`` command line of one checked method (nothing is trained from it here)."""
    return ["train", "--model", str(model), "--method", method, "--target", str(target), "--data", f"folder:{data}",
            "--steps", "2", "--batch-size", str(batch_size), "--lr", "3e-3", "--profile", profile, "--no-progress",
            "--out", str(Path(tempfile.gettempdir()) / "unused"), *extra]


def _parts(argv: list[str]):
    import argparse

    from repro.cli.train import add_parser, build_parts

    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="cmd"))
    parts = build_parts(parser.parse_args(argv))
    parts.model.to(torch.float64)
    if hasattr(parts.method, "bf16"):  # float64 throughout: no autocast
        parts.method.bf16 = False
    return parts


def _loss_fn(parts):
    from repro.train.step import clm_step

    return getattr(parts.method, "loss", None) or (lambda m, b, state: clm_step(m, b, False, parts.cfg.chunked_loss))


def _batch(parts) -> dict[str, torch.Tensor]:
    """Step 0's batch with every floating array (the token weights) in float64."""
    out = {}
    for k, v in parts.method.batch(0).items():
        t = torch.as_tensor(v)
        out[k] = t.to(torch.float64) if t.is_floating_point() else t
    return out


def _grads(model: torch.nn.Module) -> np.ndarray:
    return torch.cat([(p.grad if p.grad is not None else torch.zeros_like(p)).reshape(-1)
                      for p in model.parameters() if p.requires_grad]).detach().numpy()


def reference(argv: list[str], data_parallel: int = 1, two_pass: bool = False) -> dict[str, np.ndarray]:
    """Step 0 of the method of ``argv`` in one process: ``loss`` and ``grads`` of the whole batch, or with
    ``data_parallel`` > 1 of its rows in that many micro-batches (the single-process trainer's accumulation, which
    is what data parallelism computes: the same for objectives that are sums over rows, the documented weighted
    sum of the shares' objectives otherwise). ``two_pass``: self-distillation without the prefix-shared pass."""
    from dataclasses import replace

    from repro.accumulation import accumulation_scales, merge_metrics, micro_batches, target_weight

    torch.manual_seed(0)
    parts = _parts(argv)
    if two_pass and hasattr(getattr(parts.method, "spec", None), "shared_prefix"):
        parts.method.spec = replace(parts.method.spec, shared_prefix=False)
    parts.model.train()
    batch = _batch(parts)
    shares = micro_batches(batch, int(batch["input_ids"].shape[0]) // data_parallel)
    scales = accumulation_scales([target_weight(p) for p in shares])
    got = []
    for part, scale in zip(shares, scales):
        loss, metrics = _loss_fn(parts)(parts.model, part, StepState(0, parts.cfg.lr, len(shares)))
        (loss * scale).backward()
        got.append(metrics)
    loss = got[0]["loss"] if len(got) == 1 else merge_metrics(got, scales, [0] * len(got))["loss"]
    return {"loss": np.asarray(loss), "grads": _grads(parts.model)}


def run_method_check(cases: dict[str, list[str]], world: int, sequence_parallel: int, layout: str = "contiguous",
                     timeout: float = 600.0, threads: int = 1) -> dict[str, list[dict[str, np.ndarray]]]:
    """Per case (a name -> :func:`train_args`), each rank's ``loss`` and ``grads`` from ``world`` processes with
    ``sequence_parallel`` ranks per row. RuntimeError with the workers' output when one fails."""
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        spec = folder / "spec.json"
        spec.write_text(json.dumps({"cases": cases, "sp": sequence_parallel, "layout": layout, "out": tmp,
                                    "threads": threads}))
        files = run_workers("tests.parallel.method_worker", spec, world, timeout, "method-check workers", cwd=REPO)
        out: dict[str, list[dict[str, np.ndarray]]] = {name: [] for name in cases}
        for f in files:
            with np.load(f, allow_pickle=False) as z:
                for name in cases:
                    out[name].append({k: z[f"{name}/{k}"] for k in ("loss", "grads", "decoder_tokens",
                                                                             "row_length")})
        return out


def _worker(spec_path: str, rank: int) -> None:
    from repro.distributed import gradients, make_accelerator, prepare
    from repro.parallel.rows import setup

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    acc = make_accelerator(None, cpu=True)
    results: dict[str, np.ndarray] = {}
    for name, argv in spec["cases"].items():
        torch.manual_seed(0)
        parts = _parts(argv)
        rows = setup(parts.model, acc, spec["sp"], spec["layout"]) if spec["sp"] > 1 else None
        opt = torch.optim.SGD(parts.model.parameters(), lr=0.0)
        engine, _ = prepare(acc, parts.model, opt, _loss_fn(parts), 0.0)
        engine.train()
        seen: list[int] = []  # the decoder's input lengths: a rank's shard of each row, not the row
        hook = parts.model.get_decoder().register_forward_pre_hook(
            lambda m, a, kw: seen.append(int((kw.get("inputs_embeds") if kw.get("input_ids") is None
                                              else kw["input_ids"]).shape[1])), with_kwargs=True)
        batch = _batch(parts)
        metrics = gradients(acc, engine, batch, 0, False, rows, StepState(0, parts.cfg.lr))
        hook.remove()
        results[f"{name}/row_length"] = np.asarray(batch["input_ids"].shape[1])
        results[f"{name}/decoder_tokens"] = np.asarray(seen, dtype=np.int64)
        results[f"{name}/loss"] = np.asarray(metrics["loss"])
        results[f"{name}/grads"] = _grads(parts.model)
    tmp = Path(spec["out"]) / f"rank{rank}.tmp.npz"
    np.savez(tmp, **results)
    os.replace(tmp, Path(spec["out"]) / f"rank{rank}.npz")
    acc.wait_for_everyone()


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)  # gloo's threads can abort the interpreter's teardown after the results are written
