"""``python -m repro train`` as real processes: two on one ``--out`` (the second waits for the run's lock, then finds
the run finished; with ``REPRO_LOCK_WAIT=0`` it is refused naming the holder), and Ctrl-C mid-run (exit 130, one
line naming the checkpoint kept; re-running the command resumes and finishes)."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time

from repro.io import read_jsonl
from repro.pipeline import REPO


def _argv(model, data, out, steps, *extra):
    return [sys.executable, "-m", "repro", "train", "--model", str(model), "--method", "flt", "--target", "128",
            "--data", f"folder:{data}", "--steps", str(steps), "--batch-size", "2", "--lr", "3e-3", "--out", str(out),
            "--profile", "smoke", "--no-progress", *extra]


def _start(argv, **env):
    """The command as a child process that Ctrl-C stops, whatever pytest inherited: a shell's background job starts
    with SIGINT ignored, a child inherits that, and its Python then installs no KeyboardInterrupt handler. While
    the child starts, this process handles SIGINT (a handled signal is reset to its default action across exec)."""
    ignored = signal.getsignal(signal.SIGINT) == signal.SIG_IGN
    if ignored:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        return subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                env={**os.environ, "OMP_NUM_THREADS": "1", **env})
    finally:
        if ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)


def _wait_for_metrics(out, proc, timeout=240.0, checkpoint: bool = False) -> None:
    """Until ``out/metrics.jsonl`` holds a line (the run is mid-way) and, with ``checkpoint``, a checkpoint folder
    is complete, or fail with the process's output."""
    t0 = time.monotonic()
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().strip()
               and (not checkpoint or any(out.glob("ckpt-*")))):
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "no metrics line"
        time.sleep(0.05)


def test_second_train_on_one_out_waits_or_is_refused(tiny_model_dir, text_folder, tmp_path):
    """While a run trains, a second ``train`` on its folder with ``REPRO_LOCK_WAIT=0`` is refused at once naming
    the holder's pid; one that waits finds the run finished and refuses to train it again. The folder keeps one
    clean ``metrics.jsonl`` (steps 0..N-1 once).

    No race: the first run is frozen with SIGSTOP as soon as its lock file names it (it keeps the lock and cannot
    finish) until the refusal has returned and the waiting run has said that it waits, then released with SIGCONT;
    the loading and 60 steps between taking the lock and finishing are the margin for the poll."""
    out, steps = tmp_path / "run", 60
    first = _start(_argv(tiny_model_dir, text_folder, out, steps))
    refused = waiting = None
    try:
        _wait_for_lock(out.parent / f".{out.name}.lock", first)
        os.kill(first.pid, signal.SIGSTOP)
        assert not (out / "final").exists(), "the first run finished before it was held: raise the step count"
        # both start while the first is held (each start-up on a core of its own): neither depends on the other
        refused = _start(_argv(tiny_model_dir, text_folder, out, steps), REPRO_LOCK_WAIT="0")
        waiting = _start(_argv(tiny_model_dir, text_folder, out, steps))
        r_out, r_err = refused.communicate(timeout=300)
        w_head = _read_until(waiting, f"waiting for run {out}: computed by pid {first.pid}")
        assert first.poll() is None
        os.kill(first.pid, signal.SIGCONT)
        _check_both(out, steps, first, refused, r_err, waiting, w_head)
    finally:
        for p in (first, refused, waiting):
            if p is not None and p.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(p.pid, signal.SIGCONT)
                p.kill()
                p.communicate()


def _wait_for_lock(lock, proc, timeout: float = 240.0) -> None:
    """Until the run lock file ``lock`` names ``proc`` as its holder (the run has taken its lock), or fail with the
    process's output."""
    t0 = time.monotonic()
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError, TypeError):
            if json.loads(lock.read_text())["pid"] == proc.pid:
                return
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < timeout, "the run never took its lock"
        time.sleep(0.01)


def _read_until(proc, text: str, timeout: float = 300.0) -> str:
    """``proc``'s standard error up to and including the first line holding ``text`` (fails with what it printed
    if the process ends or ``timeout`` passes first)."""
    lines: list[str] = []
    t0 = time.monotonic()
    while not lines or text not in lines[-1]:
        line = proc.stderr.readline()
        assert line or proc.poll() is None, "".join(lines) + proc.communicate()[1]
        assert time.monotonic() - t0 < timeout, "".join(lines)
        lines.append(line)
    return "".join(lines)


def _check_both(out, steps, first, refused, r_err, waiting, w_head) -> None:
    """The refusal naming ``first``'s pid, then ``first`` finishing and ``waiting`` refusing the finished run."""
    assert refused.returncode == 2, r_err
    line = r_err.strip().splitlines()[-1]
    assert "Traceback" not in r_err and [ln for ln in r_err.splitlines() if "error" in ln] == [line], r_err
    assert line.startswith(f"error: --out {str(out)!r} is in use: run {out} is being computed by pid {first.pid}")
    assert "REPRO_LOCK_WAIT=0" in line and "allowed: another --out, or wait for it" in line
    f_out, f_err = first.communicate(timeout=600)
    assert first.returncode == 0, f_err[-3000:]
    w_out, w_rest = waiting.communicate(timeout=300)
    w_err = w_head + w_rest
    assert waiting.returncode == 2, w_err[-3000:]
    assert w_err.strip().splitlines()[-1] == (f"error: --out {str(out)!r} already holds a finished run (final/); "
                                              "allowed: a new folder")
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == list(range(steps))
    assert (out / "final" / "tokenizer_config.json").exists() and not (out.parent / ".run.lock").exists()


def test_ctrl_c_keeps_the_last_checkpoint_and_the_same_command_resumes(tiny_model_dir, text_folder, tmp_path):
    """SIGINT mid-run: exit 130, one stderr line naming the checkpoint kept and how to resume, no traceback;
    re-running the command resumes from that checkpoint and finishes with every step logged once.

    No race: the run is frozen with SIGSTOP as soon as its first checkpoint is complete, the SIGINT is queued while
    it is held and lands when SIGCONT releases it; the 99 steps after the first checkpoint are the margin for the
    poll (not 400 steps raced against the signal, which the re-run then had to train)."""
    out, steps = tmp_path / "run", 100
    argv = _argv(tiny_model_dir, text_folder, out, steps, "--checkpoint-every", "1")
    proc = _start(argv)
    try:
        _wait_for_metrics(out, proc, checkpoint=True)  # after the first checkpoint (renamed whole)
        os.kill(proc.pid, signal.SIGSTOP)
        assert not (out / "final").exists(), "the run finished before it was held: raise the step count"
        proc.send_signal(signal.SIGINT)
        os.kill(proc.pid, signal.SIGCONT)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(proc.pid, signal.SIGCONT)
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err[-3000:]
    line = err.strip().splitlines()[-1]
    assert "Traceback" not in err and [ln for ln in err.splitlines() if "interrupt" in ln.lower()] == [line], err
    assert line.startswith("interrupted (Ctrl-C); kept checkpoint ") and line.endswith(
        "re-running the same command resumes from it"), line
    kept = int(line.split("(step ")[1].split(")")[0])
    assert 1 <= kept < steps and (out / f"ckpt-{kept}" / "state.json").exists()
    assert not (out / "final").exists() and not list(out.glob(".*.tmp"))
    again = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, timeout=600,
                           env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert again.returncode == 0, again.stderr[-3000:]
    assert f"for {steps} steps" in again.stdout
    assert [r["step"] for r in read_jsonl(out / "metrics.jsonl")] == list(range(steps))


def test_ctrl_c_of_another_command_says_nothing_half_written_is_kept(capsys):
    """Any other command stopped by Ctrl-C ends with exit 130 and the generic line, no traceback."""
    from unittest import mock

    from repro.__main__ import INTERRUPTED, main

    with mock.patch("repro.cli.misc.main", side_effect=KeyboardInterrupt):
        assert main(["profiles"]) == 130
    assert capsys.readouterr().err == INTERRUPTED + "\n"
    assert "nothing half-written is kept" in INTERRUPTED


def test_a_launched_run_on_a_locked_out_is_refused_by_every_rank(tiny_model_dir, text_folder, tmp_path, monkeypatch):
    """Two ranks (``torchrun``'s variables) on an ``--out`` another process holds, ``REPRO_LOCK_WAIT=0``: rank 0
    finds the lock taken and broadcasts the refusal, so both ranks exit 2 and only rank 0 prints it."""
    import pytest

    from tests.test_bad_inputs import HOLDER, UsageExit, Workspace, two_ranks

    out = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        monkeypatch.setenv("REPRO_LOCK_WAIT", "0")
        with pytest.raises(UsageExit) as got:
            two_ranks(Workspace(tmp_path, tiny_model_dir, text_folder, None), out)
    finally:
        holder.communicate("")
    assert got.value.code == 2 and f"is being computed by pid {holder.pid} " in str(got.value)
    assert not out.exists()
