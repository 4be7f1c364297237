"""Failures mid-training: a non-finite loss or gradient norm stops the stage before the bad step's update, and a full
disk while writing a checkpoint or the final folder leaves nothing half-written; either way the last good
checkpoint stays intact and a rerun resumes from it bit-exactly."""

from __future__ import annotations

import errno
import json

import pytest
import torch

import repro.checkpoint_state
import repro.io
from repro.checkpoint_state import STATE_FILES
from repro.io import DiskFull, append_jsonl
from repro.train import Interrupted, NonFiniteLoss, Trainer, TrainConfig, clm_step, latest_checkpoint
from tests.test_train import ToyMethod, _weights

CKPT_FILES = {"model.safetensors", "state.json", *STATE_FILES}


class PoisonedMethod(ToyMethod):
    """The toy method whose objective turns non-finite at step ``bad``: the loss itself (``"loss"``) or only its
    gradient (``"grad"``: ``sqrt(0 * w)`` adds 0 to the loss and NaN to the gradient)."""

    name = "poisoned"

    def __init__(self, bad: int | None = None, kind: str = "loss"):
        super().__init__()
        self.bad, self.kind = bad, kind

    def loss(self, model, batch, state):
        loss, metrics = clm_step(model, batch, False)
        if state.step == self.bad:
            if self.kind == "loss":
                loss = loss * float("nan")
            else:
                loss = loss + torch.sqrt(next(model.parameters()).sum() * 0.0)
            metrics["loss"] = float(loss.detach())
        return loss, metrics


def _same(a, b) -> bool:
    a, b = _weights(a), _weights(b)
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _no_leftovers(out_dir) -> None:
    """No temporary file or folder and no final folder in ``out_dir``."""
    assert not list(out_dir.glob(".*")), list(out_dir.glob(".*"))
    assert not (out_dir / "final").exists()


@pytest.mark.parametrize("kind, what", [("loss", "loss"), ("grad", "grad_norm")])
def test_non_finite_step_stops_before_its_update_and_the_last_checkpoint_resumes(tiny_llama, tmp_path, kind, what):
    cfg = TrainConfig(max_steps=8, lr=3e-3, warmup_steps=2, checkpoint_every=2, seed=0)
    bad = 5
    m = tiny_llama()
    with pytest.raises(NonFiniteLoss, match=rf"non-finite {what} nan at step {bad} \(0-based\)") as info:
        Trainer(m, PoisonedMethod(bad, kind), cfg, tmp_path / "run", progress=False).train()
    assert (info.value.step, info.value.what) == (bad, what) and info.value.value != info.value.value
    run = tmp_path / "run"
    assert latest_checkpoint(run).name == "ckpt-4" and sorted(p.name for p in run.glob("ckpt-*")) == ["ckpt-4"]
    assert {p.name for p in (run / "ckpt-4").iterdir()} == CKPT_FILES
    lines = [json.loads(ln) for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in lines] == list(range(bad))
    _no_leftovers(run)
    # the update of the bad step never happened: the weights are those after `bad` clean steps
    ref5 = tiny_llama()
    short = TrainConfig(**{**cfg.__dict__, "checkpoint_every": 0})
    with pytest.raises(Interrupted):
        Trainer(ref5, PoisonedMethod(), short, tmp_path / "ref5", progress=False).train(stop_after=bad)
    assert _same(m, ref5)
    # the checkpoint before the bad step resumes bit-exactly into the uninterrupted run
    ref = tiny_llama()
    Trainer(ref, PoisonedMethod(), cfg, tmp_path / "ref", progress=False).train()
    fresh = tiny_llama(seed=123)
    Trainer(fresh, PoisonedMethod(), cfg, run, progress=False).train()
    assert _same(ref, fresh)
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 8


def _enospc():
    return OSError(errno.ENOSPC, "No space left on device")


def test_full_disk_mid_checkpoint_leaves_the_previous_one_and_nothing_half_written(tiny_llama, tmp_path,
                                                                                   monkeypatch):
    cfg = TrainConfig(max_steps=6, lr=3e-3, warmup_steps=2, checkpoint_every=2, seed=0)
    run = tmp_path / "run"
    real = repro.checkpoint_state.save_file

    def full_at_ckpt4(tensors, path, *a, **k):
        if path.parent.name.startswith(".ckpt-4.") and path.name == "rng.safetensors":
            with open(path, "wb") as f:  # the writer got part of the file out before the disk filled up
                f.write(b"partial")
            raise _enospc()
        return real(tensors, path, *a, **k)

    monkeypatch.setattr(repro.checkpoint_state, "save_file", full_at_ckpt4)
    with pytest.raises(DiskFull, match=r"disk full while writing '.*/run/ckpt-4' \(\[Errno 28\] No space left on "
                                       r"device\); nothing half-written was left there") as info:
        Trainer(tiny_llama(), ToyMethod(), cfg, run, progress=False).train()
    assert isinstance(info.value, OSError) and info.value.errno == errno.ENOSPC
    assert isinstance(info.value.__cause__, OSError) and info.value.__cause__.errno == errno.ENOSPC
    assert sorted(p.name for p in run.glob("ckpt-*")) == ["ckpt-2"]
    assert {p.name for p in (run / "ckpt-2").iterdir()} == CKPT_FILES
    _no_leftovers(run)
    monkeypatch.undo()  # space freed: the rerun resumes from ckpt-2 into the uninterrupted run's bits
    ref = tiny_llama()
    Trainer(ref, ToyMethod(), cfg, tmp_path / "ref", progress=False).train()
    fresh = tiny_llama(seed=123)
    Trainer(fresh, ToyMethod(), cfg, run, progress=False).train()
    assert _same(ref, fresh)
    assert len((run / "metrics.jsonl").read_text().splitlines()) == 6


class _FullFile:
    """A file whose writes fail with ENOSPC after some bytes got out."""

    def __init__(self, f):
        self.f = f

    def write(self, data):
        self.f.write(data[: len(data) // 2])
        raise _enospc()

    def __getattr__(self, name):
        return getattr(self.f, name)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.f.close()


def test_full_disk_during_the_final_save_leaves_no_final_folder(tiny_llama, tmp_path, monkeypatch):
    cfg = TrainConfig(max_steps=4, lr=3e-3, checkpoint_every=2, seed=0)
    run = tmp_path / "run"

    def full_in_final(path, mode="r", *a, **k):
        f = open(path, mode, *a, **k)
        return _FullFile(f) if "w" in mode and ".final." in str(path) else f

    monkeypatch.setattr(repro.io, "open", full_in_final, raising=False)
    with pytest.raises(DiskFull, match=r"disk full while writing '.*/run/final' \(\[Errno 28\]") as info:
        Trainer(tiny_llama(), ToyMethod(), cfg, run, progress=False).train()
    assert info.value.__cause__.errno == errno.ENOSPC
    _no_leftovers(run)
    assert {p.name for p in (run / "ckpt-4").iterdir()} == CKPT_FILES
    monkeypatch.undo()
    ref = tiny_llama()
    Trainer(ref, ToyMethod(), cfg, tmp_path / "ref", progress=False).train()
    fresh = tiny_llama(seed=123)
    final = Trainer(fresh, ToyMethod(), cfg, run, progress=False).train()  # nothing left to train: only the save
    assert _same(ref, fresh) and (final / "model.safetensors").exists()


def test_a_metrics_line_is_never_left_half_written(tmp_path, monkeypatch):
    log = tmp_path / "metrics.jsonl"
    append_jsonl(log, {"step": 0})
    before = log.read_bytes()
    real = repro.io.os.write

    def half_then_full(fd, data):
        real(fd, bytes(data[: len(data) // 2]))
        raise _enospc()

    monkeypatch.setattr(repro.io.os, "write", half_then_full)
    with pytest.raises(DiskFull, match=r"metrics.jsonl"):
        append_jsonl(log, {"step": 1, "loss": 1.5})
    monkeypatch.undo()
    assert log.read_bytes() == before


def test_a_killed_runs_cut_metrics_line_and_temporary_folders_do_not_block_resuming(tiny_llama, tmp_path):
    """What a SIGKILL can leave: a metrics line cut mid-write and the temporary folders of a checkpoint and a final
    write. Resuming drops the cut line, removes the leftovers and ends bitwise equal to an uninterrupted run."""
    cfg = TrainConfig(max_steps=6, lr=3e-3, warmup_steps=2, checkpoint_every=2, seed=0)
    run = tmp_path / "run"
    with pytest.raises(Interrupted):
        Trainer(tiny_llama(), ToyMethod(), cfg, run, progress=False).train(stop_after=5)
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"grad_norm": 0.5, "lo')  # the kill came in the middle of step 5's line
    for leftover in (".ckpt-6.a1b2.tmp", ".final.c3d4.tmp", ".ckpt-6.partial"):
        (run / leftover).mkdir()
        (run / leftover / "model.safetensors").write_bytes(b"half")
    resumed = tiny_llama(seed=7)
    Trainer(resumed, ToyMethod(), cfg, run, progress=False).train()
    ref = tiny_llama()
    Trainer(ref, ToyMethod(), cfg, tmp_path / "ref", progress=False).train()
    assert _same(ref, resumed)
    steps = [json.loads(ln)["step"] for ln in (run / "metrics.jsonl").read_text().splitlines()]
    assert steps == list(range(6))
    assert not list(run.glob(".*"))


def test_ctrl_c_between_a_temporary_folders_creation_and_its_guard_leaves_nothing_half_written(tiny_llama, tmp_path,
                                                                                             monkeypatch):
    """The window a real Ctrl-C once hit: the checkpoint's temporary folder exists, the cleanup that guards it is not
    yet armed. The interrupted trainer removes it; the last whole checkpoint stays and the rerun resumes from it."""
    import contextlib
    import tempfile

    cfg = TrainConfig(max_steps=6, lr=3e-3, warmup_steps=2, checkpoint_every=2, seed=0)
    run = tmp_path / "run"
    real = repro.train.trainer.atomic_dir

    @contextlib.contextmanager
    def interrupted_at_ckpt4(path):
        if path.name == "ckpt-4":
            tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
            raise KeyboardInterrupt
        with real(path) as tmp:
            yield tmp

    monkeypatch.setattr(repro.train.trainer, "atomic_dir", interrupted_at_ckpt4)
    with pytest.raises(KeyboardInterrupt):
        Trainer(tiny_llama(), ToyMethod(), cfg, run, progress=False).train()
    assert sorted(p.name for p in run.glob("ckpt-*")) == ["ckpt-2"]
    assert not list(run.glob(".*")), list(run.glob(".*"))
    monkeypatch.undo()
    ref = tiny_llama()
    Trainer(ref, ToyMethod(), cfg, tmp_path / "ref", progress=False).train()
    fresh = tiny_llama(seed=123)
    Trainer(fresh, ToyMethod(), cfg, run, progress=False).train()
    assert _same(ref, fresh)
