"""The real check of sequence parallelism: ``W`` processes (``torch.distributed``, gloo, CPU) run a forward and
backward of a tiny float64 Llama on the shards of one row and compare with one process on the full row.

:func:`run_check` writes the rows (``cases.npz``) and the settings (``spec.json``; no pickle), starts ``W``
``python -m repro.parallel.check <spec> <rank>`` processes with ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``/
``MASTER_PORT`` set, and reads what each wrote (``rank<r>.npz``: per case the shard's logits, its part of the
loss and the parameter gradients all-reduced over the group). :func:`reference` is the single-process full-row
step through :func:`repro.models.forward` and :func:`repro.loss.weighted_clm_loss`.

Each rank's loss part is ``shard_loss_sum / total target weight`` (the total all-reduced), so the parts sum to
the full-row loss and the summed (all-reduced) gradients are the full-row gradients.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np
import torch
import torch.distributed as dist
from accelerate import Accelerator
from accelerate.utils import DeepSpeedPlugin
from transformers import LlamaConfig, LlamaForCausalLM

from repro.attention.doc_masked import register as register_varlen
from repro.loss import weighted_clm_loss
from repro.models import forward
from repro.parallel.config import parallelism_config
from repro.parallel.sequence import shard_loss_sum, shard_row
from repro.parallel.step import row_attention, shard_forward
from repro.parallel.ulysses import register, sequence_parallel
from repro.parallel.workers import run_workers

TINY = {"vocab_size": 128, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2}
"""The checked Llama: 2 layers, 64 wide, 4 heads, 2 kv heads (float64)."""
CASE_KEYS: tuple[str, ...] = ("input_ids", "position_ids", "doc_ids", "weights")
"""Per-case arrays (rows, T) passed to the workers."""


def tiny_model(seed: int = 0, attn_implementation: str = "sdpa") -> torch.nn.Module:
    """:data:`TINY` in float64, seeded (identical in every process), dropout off."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(**TINY, max_position_embeddings=8192, use_cache=False, attention_dropout=0.0,
                      attn_implementation="sdpa")
    model = LlamaForCausalLM(cfg).to(torch.float64)
    model.set_attn_implementation(attn_implementation)
    return model


def _grads(model: torch.nn.Module) -> np.ndarray:
    return torch.cat([p.grad.reshape(-1) for _, p in model.named_parameters()]).numpy()


def reference(case: Mapping, seed: int = 0) -> dict[str, np.ndarray]:
    """Single-process full-row forward + backward: ``logits`` (rows, T, V), ``loss`` and ``grads`` (the
    parameters' gradients flattened in ``named_parameters`` order)."""
    model = tiny_model(seed, register_varlen())
    t = {k: torch.as_tensor(np.asarray(case[k])) for k in CASE_KEYS if case.get(k) is not None}
    logits = forward(model, t["input_ids"], t["position_ids"], t.get("doc_ids")).logits
    loss, _ = weighted_clm_loss(logits, t["input_ids"], t["weights"].to(torch.float64))
    loss.backward()
    return {"logits": logits.detach().numpy(), "loss": np.asarray(loss.item()), "grads": _grads(model)}


CHECK_MODES: tuple[str, ...] = ("ulysses", "deepspeed")
"""What the workers run: ``ulysses`` (this repo's :data:`~repro.parallel.ulysses.SP_ULYSSES`, forward and
backward) or ``deepspeed`` (the model prepared by ``accelerate.Accelerator`` with
:func:`repro.parallel.config.parallelism_config`, i.e. DeepSpeed's Ulysses around sdpa; forward and loss only,
contiguous layout)."""


def run_check(cases: Sequence[Mapping], world: int = 2, seed: int = 0, timeout: float = 120.0,
              threads: int = 1, mode: str = "ulysses") -> list[list[dict[str, np.ndarray]]]:
    """Run every case (full rows ``input_ids``, ``position_ids``, ``weights``, optional ``doc_ids``, and
    ``layout``) sequence-parallel over ``world`` gloo processes of ``threads`` torch threads each; returns per
    case the per-rank results (``logits`` of the shard, ``loss`` part, all-reduced ``grads``, ``token_index``, and
    ``alone``: the shard's logits with its attention restricted to the shard itself, a control).
    RuntimeError with the workers' output when a worker wrote no results within ``timeout`` seconds. ``mode``: one
    of :data:`CHECK_MODES` (``deepspeed`` gives ``logits``, ``loss`` and ``token_index`` only)."""
    if mode not in CHECK_MODES:
        raise ValueError(f"mode={mode!r}; allowed: {', '.join(repr(m) for m in CHECK_MODES)}")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        arrays = {f"{i}/{k}": np.asarray(c[k]) for i, c in enumerate(cases) for k in CASE_KEYS
                  if c.get(k) is not None}
        np.savez(folder / "cases.npz", **arrays)
        spec = folder / "spec.json"
        spec.write_text(json.dumps({"world": world, "seed": seed, "threads": threads, "out": str(folder), "mode": mode,
                                    "layouts": [c.get("layout", "contiguous") for c in cases],
                                    "arrays": str(folder / "cases.npz")}))
        files = run_workers("repro.parallel.check", spec, world, timeout, "sequence-parallel workers")
        out = []
        loaded = []
        for f in files:
            with np.load(f, allow_pickle=False) as z:
                loaded.append({k: z[k] for k in z.files})
        for i in range(len(cases)):
            out.append([_case(z, i) for z in loaded])
        return out


def _worker(spec_path: str, rank: int) -> None:
    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(spec["threads"])
    world = spec["world"]
    with np.load(spec["arrays"], allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    if spec["mode"] == "deepspeed":
        return _finish(spec, rank, _deepspeed_results(spec, arrays, rank, world))
    dist.init_process_group("gloo", rank=rank, world_size=world)
    results: dict[str, np.ndarray] = {}
    for i, layout in enumerate(spec["layouts"]):
        case = _case(arrays, i)
        model = tiny_model(spec["seed"], register())
        shard = shard_row(case, rank, world, layout)
        with sequence_parallel(layout=layout):
            logits = shard_forward(model, shard, row_attention(case)).logits
            tw = torch.as_tensor(shard["target_weights"], dtype=torch.float64)
            total = tw.sum()
            dist.all_reduce(total)
            part = shard_loss_sum(logits, torch.as_tensor(shard["targets"]), tw) / total
            part.backward()
        grads = torch.as_tensor(_grads(model))
        dist.all_reduce(grads)
        with torch.no_grad():  # the control: the shard attended alone (no group), as without sequence parallelism
            alone = shard_forward(model, shard, "causal").logits
        results.update({f"{i}/logits": logits.detach().numpy(), f"{i}/loss": np.asarray(part.item()),
                        f"{i}/grads": grads.numpy(), f"{i}/token_index": shard["token_index"],
                        f"{i}/alone": alone.numpy()})
    _finish(spec, rank, results)


def _case(arrays: Mapping[str, np.ndarray], i: int) -> dict[str, np.ndarray]:
    return {k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(f"{i}/")}


def _finish(spec: Mapping, rank: int, results: Mapping[str, np.ndarray]) -> None:
    """Write the results (atomically), wait for the group and leave it."""
    tmp = Path(spec["out"]) / f"rank{rank}.tmp.npz"
    np.savez(tmp, **results)
    os.replace(tmp, Path(spec["out"]) / f"rank{rank}.npz")
    dist.barrier()
    dist.destroy_process_group()


def _deepspeed_results(spec: Mapping, arrays: Mapping[str, np.ndarray], rank: int, world: int) -> dict:
    """Every case through a model prepared by accelerate with DeepSpeed's Ulysses (``sp_size = world``, core
    attention sdpa, ZeRO stage 0): the shard's logits and loss part. DeepSpeed's wrapper drops the attention mask
    and attends causally over the gathered row, so only one-document rows are meaningful here."""
    os.environ.setdefault("LOCAL_RANK", str(rank))
    os.environ.setdefault("LOCAL_WORLD_SIZE", str(world))
    ds = {"train_micro_batch_size_per_gpu": 1, "gradient_accumulation_steps": 1, "zero_optimization": {"stage": 0}}
    acc = Accelerator(deepspeed_plugin=DeepSpeedPlugin(hf_ds_config=ds),
                      parallelism_config=parallelism_config(world, world, attn_implementation="sdpa"))
    model = tiny_model(spec["seed"], "sdpa")
    model, _ = acc.prepare(model, torch.optim.SGD(model.parameters(), lr=0.0))
    results = {}
    for i, layout in enumerate(spec["layouts"]):
        if layout != "contiguous":
            raise ValueError(f"mode='deepspeed' shards rows contiguously; got layout={layout!r}")
        shard = shard_row(_case(arrays, i), rank, world, layout)
        with torch.no_grad():
            logits = model(input_ids=torch.as_tensor(shard["input_ids"]),
                           position_ids=torch.as_tensor(shard["position_ids"]), use_cache=False).logits
        tw = torch.as_tensor(shard["target_weights"], dtype=torch.float64)
        total = tw.sum()
        torch.distributed.all_reduce(total)
        part = shard_loss_sum(logits, torch.as_tensor(shard["targets"]), tw) / total
        results.update({f"{i}/logits": logits.numpy(), f"{i}/loss": np.asarray(part.item()),
                        f"{i}/token_index": shard["token_index"]})
    return results


if __name__ == "__main__":
    _worker(sys.argv[1], int(sys.argv[2]))
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave without the interpreter's teardown: gloo's threads, still alive after destroy_process_group, can abort
    # the process after its results are written.
    os._exit(0)
