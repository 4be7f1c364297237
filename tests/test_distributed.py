"""Multi-process training (:mod:`repro.distributed`): 2 CPU processes on gloo, DDP and DeepSpeed ZeRO-3, against the
single-process trainer on the same global batches (rows of very uneven valid-token counts, so the rank weighting
matters), and a run killed after a checkpoint then resumed by the same command."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro import distributed
from repro.accumulation import accumulation_scales
from repro.pipeline import REPO
from repro.profiles import get_profile
from repro.train import Trainer, clm_step
from tests.dist_worker import UnevenRows, tiny_model, train_config

ZERO3_CPU = Path(__file__).parents[1] / "configs" / "deepspeed_zero3_cpu.json"
SPEC = {"steps": 4, "checkpoint_every": 2}
TIMEOUT = 240


def _launch(spec: dict, folder: Path, env_extra: dict | None = None, world: int = 2) -> list[subprocess.Popen]:
    """``world`` worker processes of ``spec`` (written as JSON) with the rank variables a launcher sets."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder.parent / f"{folder.name}.spec.json"
    path.write_text(json.dumps({**spec, "out": str(folder)}))
    port = distributed.free_port()
    procs = []
    for rank in range(world):
        env = {**os.environ, "PYTHONPATH": str(REPO), "RANK": str(rank), "LOCAL_RANK": str(rank),
               "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
               "MASTER_PORT": str(port), "OMP_NUM_THREADS": "1", **(env_extra or {})}
        log = open(folder.parent / f"{folder.name}.rank{rank}.log", "a")
        procs.append(subprocess.Popen([sys.executable, "-m", "tests.dist_worker", str(path)], cwd=REPO, env=env,
                                      stdout=log, stderr=subprocess.STDOUT, start_new_session=True))
    return procs


def _logs(folder: Path) -> str:
    return "\n".join(p.read_text()[-3000:] for p in sorted(folder.parent.glob(f"{folder.name}.rank*.log")))


def _run(spec: dict, folder: Path) -> None:
    """Train to the end; success is judged by every rank's result file (not the exit status)."""
    procs = _launch(spec, folder)
    try:
        for p in procs:
            p.wait(timeout=TIMEOUT)
    finally:
        _kill(procs)
    results = [folder / f"result-{r}.json" for r in range(len(procs))]
    assert all(r.exists() for r in results), _logs(folder)
    assert {json.loads(r.read_text())["world"] for r in results} == {2}


def _kill(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait(timeout=30)


def _run_killed_after_checkpoint(spec: dict, folder: Path, step: int) -> None:
    """Start the run, SIGKILL every process while it trains step ``step`` (after checkpoint ``ckpt-<step>``)."""
    procs = _launch(spec, folder, {"HANG_AT_STEP": str(step)})
    deadline = time.monotonic() + TIMEOUT
    try:
        while not all((folder / f"hanging-{r}").exists() for r in range(len(procs))):
            assert time.monotonic() < deadline and all(p.poll() is None for p in procs), _logs(folder)
            time.sleep(0.2)
    finally:
        _kill(procs)
    assert (folder / f"ckpt-{step}" / "state.json").exists() and not (folder / "final").exists()


def _metrics(folder: Path) -> list[dict]:
    return [json.loads(ln) for ln in (folder / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture(scope="module")
def single(tmp_path_factory):
    """The single-process run of the same global batches: (final weights, per-step losses). The weighting matters
    here: at step 0 the mean of the two ranks' token means is far from the global token mean."""
    batch = {k: torch.as_tensor(v) for k, v in UnevenRows().batch(0).items()}
    with torch.no_grad():
        local = [clm_step(tiny_model(), distributed.shard_rows(batch, r, 2), bf16=False)[1]["loss"] for r in (0, 1)]
    out = tmp_path_factory.mktemp("single")
    Trainer(tiny_model(), UnevenRows(), train_config(SPEC), out, progress=False).train()
    losses = [m["loss"] for m in _metrics(out)]
    assert abs(sum(local) / 2 - losses[0]) > 0.05, (local, losses[0])
    return load_file(out / "final" / "model.safetensors"), losses


def _max_diff(a: dict, b: dict) -> float:
    assert a.keys() == b.keys()
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _check_against_single(folder: Path, single) -> float:
    weights, losses = single
    got = _metrics(folder)
    assert [m["step"] for m in got] == list(range(SPEC["steps"]))
    np.testing.assert_allclose([m["loss"] for m in got], losses, rtol=1e-5, atol=0)
    final = load_file(folder / "final" / "model.safetensors")
    init = {k: v.detach() for k, v in tiny_model().state_dict().items() if k in weights}
    moved = torch.cat([(weights[k] - init[k]).ravel() for k in weights])
    apart = torch.cat([(final[k] - weights[k]).ravel() for k in weights])
    # the updates as a whole, not element by element: Adam turns a last-bit difference of a near-zero gradient's
    # reduction order into a visible step on that one weight, by an amount that depends on the CPU's rounding
    diff = float(apart.norm() / moved.norm())
    assert float(moved.abs().max()) > 1e-3 and diff < 1e-3, diff
    summary = json.loads((folder / "final" / "train_summary.json").read_text())
    assert summary["world_size"] == 2 and summary["steps"] == SPEC["steps"]
    return diff


def _engine_state_files(ckpt: Path) -> set[str]:
    return {p.name for p in (ckpt / distributed.ENGINE_DIR).rglob("*") if p.is_file()}


@pytest.mark.slow
def test_ddp_two_processes_match_one_and_resume_bitwise_after_a_kill(tmp_path, single):
    _run(SPEC, tmp_path / "full")
    _check_against_single(tmp_path / "full", single)
    ckpt = tmp_path / "full" / "ckpt-4"
    assert {p.name for p in ckpt.iterdir()} == {"model.safetensors", "state.json", distributed.ENGINE_DIR}
    assert "optimizer.bin" in _engine_state_files(ckpt)
    assert not list((tmp_path / "full").glob(".*"))  # no partial folder left
    # killed after ckpt-2 while training step 2, resumed by the same command: the same bits
    _run_killed_after_checkpoint(SPEC, tmp_path / "run", 2)
    _run(SPEC, tmp_path / "run")
    a, b = load_file(tmp_path / "full" / "final" / "model.safetensors"), \
        load_file(tmp_path / "run" / "final" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert [m["loss"] for m in _metrics(tmp_path / "run")] == [m["loss"] for m in _metrics(tmp_path / "full")]


@pytest.mark.slow
def test_zero3_two_processes_match_one_and_resume_after_a_kill(tmp_path, single):
    spec = {**SPEC, "deepspeed_config": str(ZERO3_CPU)}
    _run(spec, tmp_path / "full")
    _check_against_single(tmp_path / "full", single)
    ckpt = tmp_path / "full" / "ckpt-4"
    files = _engine_state_files(ckpt)
    assert {f"zero_pp_rank_{r}_mp_rank_00_optim_states.pt" for r in range(2)} <= files, files
    full = load_file(ckpt / "model.safetensors")
    assert full["model.embed_tokens.weight"].shape == (64, 64)  # consolidated, not a shard
    _run_killed_after_checkpoint(spec, tmp_path / "run", 2)
    _run(spec, tmp_path / "run")
    a, b = load_file(tmp_path / "full" / "final" / "model.safetensors"), \
        load_file(tmp_path / "run" / "final" / "model.safetensors")
    assert _max_diff(a, b) == 0.0


@pytest.mark.slow
def test_a_tied_head_is_saved_once_by_two_processes_as_by_one(tmp_path):
    """Tied embeddings (SmolLM2's: the output head is the input embeddings): one DDP step on two processes saves the
    tensor names one process saves (the head once, as the embeddings) in final/ and in its checkpoint, and the same
    update; before, the consolidated state dict held a copy under each name and final/ got both."""
    spec = {"steps": 1, "checkpoint_every": 1, "tied": True}
    Trainer(tiny_model(tied=True), UnevenRows(), train_config(spec), tmp_path / "one", progress=False).train()
    _run(spec, tmp_path / "two")
    one, two = (load_file(tmp_path / f / "final" / "model.safetensors") for f in ("one", "two"))
    assert set(two) == set(one) and "lm_head.weight" not in two and "model.embed_tokens.weight" in two
    assert set(load_file(tmp_path / "two" / "ckpt-1" / "model.safetensors")) == set(one)
    init = tiny_model(tied=True).state_dict()
    moved = torch.cat([(one[k] - init[k]).ravel() for k in one])
    apart = torch.cat([(two[k] - one[k]).ravel() for k in one])
    assert float(moved.abs().max()) > 1e-3 and float(apart.norm() / moved.norm()) < 1e-3


def test_shard_rows_takes_equal_contiguous_blocks_and_refuses_uneven_splits():
    b = {"input_ids": torch.arange(12).reshape(6, 2), "weights": torch.ones(6, 2), "s": torch.tensor(1)}
    parts = [distributed.shard_rows(b, r, 3) for r in range(3)]
    assert torch.equal(torch.cat([p["input_ids"] for p in parts]), b["input_ids"])
    assert [p["input_ids"].shape[0] for p in parts] == [2, 2, 2] and all(p["s"] == 1 for p in parts)
    with pytest.raises(ValueError, match="6 rows cannot be split over world size 4"):
        distributed.shard_rows(b, 0, 4)
    with pytest.raises(ValueError, match="rank=2, world=2"):
        distributed.shard_rows(b, 2, 2)


def test_rank_scales_turn_local_means_into_the_global_mean():
    """Two ranks of valid weights 54 and 2: scaled by w_r / W x 2 and averaged by the engine, the local means give
    the global token mean (one process here: the all-reduce is the identity)."""
    scales, total = distributed.rank_scales([30.0, 10.0], world=2)
    assert total == 40.0 and scales == [1.5, 0.5]
    w, sums = [54.0, 2.0], [54.0 * 3.0, 2.0 * 7.0]  # token sums of the two ranks
    averaged = sum(s / wi * wi / sum(w) * 2 for s, wi in zip(sums, w)) / 2
    assert averaged == pytest.approx(sum(sums) / sum(w))
    assert accumulation_scales([54.0], total=56.0) == [54.0 / 56.0]


def test_launched_world_size_reads_the_launcher(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert distributed.launched_world_size() == 2 and distributed.is_launched()
    monkeypatch.delenv("WORLD_SIZE")
    assert distributed.launched_world_size() == 1 and not distributed.is_launched()
    monkeypatch.setenv("WORLD_SIZE", "two")
    with pytest.raises(ValueError, match="WORLD_SIZE='two'"):
        distributed.launched_world_size()


def test_paper_deepspeed_config_becomes_the_trainers_engine_config():
    p = get_profile("paper")
    cfg = distributed.deepspeed_plugin_config(REPO / p.extend.deepspeed_config, world_size=8,
                                              global_batch=p.extend.batch_size)
    assert cfg["train_batch_size"] == 96 and cfg["train_micro_batch_size_per_gpu"] == 12
    assert cfg["gradient_accumulation_steps"] == 1 and cfg["zero_allow_untested_optimizer"]
    assert cfg["zero_optimization"]["stage"] == 3 and cfg["zero_optimization"]["offload_optimizer"]["device"] == "cpu"
    cpu = distributed.deepspeed_plugin_config(ZERO3_CPU, world_size=2, global_batch=4)
    assert cpu["train_micro_batch_size_per_gpu"] == 2 and "offload_optimizer" not in cpu["zero_optimization"]
    with pytest.raises(ValueError, match="not divisible"):
        distributed.deepspeed_plugin_config(ZERO3_CPU, world_size=3, global_batch=4)


@pytest.mark.slow
@pytest.mark.parametrize("engine", ["ddp", "zero3"])
def test_micro_batches_on_each_rank_keep_the_global_token_mean(tmp_path, single, engine):
    """Each rank runs its 2 rows as 2 micro-batches (scales w_i / W x world): the single process's losses and
    weights (measured: 3e-7 DDP, 7e-6 ZeRO-3)."""
    spec = {**SPEC, "micro_batch_size": 1, **({"deepspeed_config": str(ZERO3_CPU)} if engine == "zero3" else {})}
    _run(spec, tmp_path / "run")
    _check_against_single(tmp_path / "run", single)
    assert _metrics(tmp_path / "run")[0]["micro_batches"] == 2


def test_deepspeeds_deprecated_collectives_are_silenced_and_nothing_else():
    import warnings

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        distributed.quiet_deepspeed_collectives()
        warnings.warn("`torch.distributed.all_gather_into_tensor` is deprecated. Please use `all_gather_single`.",
                      FutureWarning)
        warnings.warn("`torch.distributed.reduce_scatter_tensor` is deprecated.", FutureWarning)
        warnings.warn("something else is deprecated", FutureWarning)
    assert [str(w.message) for w in seen] == ["something else is deprecated"]
