"""Processes of the kill benchmark (:mod:`repro.bench.kill`): run a command in a process group of its own, SIGKILL
the group at a moment or as soon as an artifact write is seen, and scan the run's folders for what a kill left:
hidden temporary entries of unfinished writes (:func:`temp_entries`) and half-written files (:func:`partial_files`).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from pathlib import Path

RUN_TIMEOUT_S = 600.0
"""Longest one run of a command may take before it counts as hung (and fails the benchmark)."""
POLL_S = 0.002
"""How often a running command's folders are scanned for temporary entries (aimed trials)."""


class KillBenchError(RuntimeError):
    """A run failed in a way the benchmark cannot score (it hung or exited with an error)."""


# -- processes -------------------------------------------------------------------------------------------------
def child_env() -> dict[str, str]:
    """The environment of every run: one thread (bitwise-comparable runs), no network, no GUI backend."""
    env = dict(os.environ)
    env.update({"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1",
                "TOKENIZERS_PARALLELISM": "false", "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                "MPLBACKEND": "Agg", "PYTHONHASHSEED": "0"})
    return env


def kill_group(proc: subprocess.Popen) -> None:
    """SIGKILL the process group of ``proc`` (the command and its children, e.g. a notebook kernel)."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired as e:
        raise KillBenchError(f"process {proc.pid} did not die after SIGKILL") from e


def run_once(cmd: list[str], cwd: Path, log: Path, timeout: float = RUN_TIMEOUT_S) -> float:
    """Run ``cmd`` to its end (output appended to ``log``); its wall time. A non-zero exit or a run longer than
    ``timeout`` is a :class:`KillBenchError` quoting the end of the log."""
    t0 = time.perf_counter()
    with open(log, "ab") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_group(proc)
            raise KillBenchError(f"{' '.join(cmd)} ran past {timeout:.0f} s (log: {log})") from None
    if rc != 0:
        tail = log.read_text(errors="replace")[-2000:]
        raise KillBenchError(f"{' '.join(cmd)} exited {rc} (log: {log}):\n{tail}")
    return time.perf_counter() - t0


def temp_entries(folders: list[Path]) -> list[str]:
    """Hidden temporary entries of an unfinished write under ``folders`` (recursively): atomic writes'
    ``.<name>.*.tmp`` files and folders and the notebook runner's ``.<name>.running.ipynb``."""
    found = []
    for top in folders:
        if not top.exists():
            continue
        for root, dirs, files in os.walk(top):
            for name in dirs + files:
                if name.startswith(".") and (name.endswith(".tmp") or name.endswith(".running.ipynb")):
                    found.append(str(Path(root, name).relative_to(top)))
    return sorted(found)


def _has_temp(folders: list[Path], prefixes: tuple[str, ...]) -> bool:
    """Whether a temporary entry whose name starts with one of ``prefixes`` exists right now (aimed kills)."""
    for top in folders:
        try:
            for root, dirs, files in os.walk(top):
                for name in dirs + files:
                    if name.startswith(prefixes) and (name.endswith(".tmp") or name.endswith(".running.ipynb")):
                        return True
        except OSError:
            continue
    return False


def killed_run(cmd: list[str], cwd: Path, log: Path, kill_at: float, watch: list[Path],
               aim: tuple[str, ...] = (), timeout: float = RUN_TIMEOUT_S) -> dict:
    """Start ``cmd`` and SIGKILL its process group at ``kill_at`` seconds, or (``aim``: name prefixes) as soon as a
    temporary entry of such a name is seen under ``watch`` from ``kill_at`` on. Returns ``{"killed": bool, "at":
    seconds}``; ``killed`` is False when the command finished first (exit 0) - another exit is a
    :class:`KillBenchError`."""
    t0 = time.perf_counter()
    with open(log, "ab") as f:
        proc = subprocess.Popen(cmd, cwd=cwd, env=child_env(), stdout=f, stderr=subprocess.STDOUT,
                                start_new_session=True)
        while True:
            now = time.perf_counter() - t0
            rc = proc.poll()
            if rc is not None:
                if rc != 0:
                    tail = log.read_text(errors="replace")[-2000:]
                    raise KillBenchError(f"{' '.join(cmd)} exited {rc} before its kill (log: {log}):\n{tail}")
                return {"killed": False, "at": now}
            if now >= kill_at and (not aim or _has_temp(watch, aim)):
                kill_group(proc)
                return {"killed": True, "at": now}
            if now > timeout:
                kill_group(proc)
                raise KillBenchError(f"{' '.join(cmd)} ran past {timeout:.0f} s (log: {log})")
            time.sleep(POLL_S if aim and now >= kill_at else min(0.01, max(kill_at - now, 0.0005)))


# -- checks ----------------------------------------------------------------------------------------------------
def partial_files(folders: list[Path]) -> list[str]:
    """Files under ``folders`` that are half-written: a ``.json`` or ``.ipynb`` that does not parse, a ``.jsonl``
    whose last line is cut or any line of which does not parse. Hidden temporary entries are skipped (nothing
    reads them)."""
    bad = []
    for top in folders:
        if not top.exists():
            continue
        for p in sorted(top.rglob("*")):
            if not p.is_file() or any(part.startswith(".") for part in p.relative_to(top).parts):
                continue
            if p.suffix in (".json", ".ipynb"):
                try:
                    json.loads(p.read_text(encoding="utf-8"))
                except (ValueError, UnicodeDecodeError):
                    bad.append(str(p))
            elif p.suffix == ".jsonl":
                text = p.read_text(encoding="utf-8", errors="replace")
                try:
                    if text and not text.endswith("\n"):
                        raise ValueError("cut line")
                    for line in text.splitlines():
                        json.loads(line)
                except ValueError:
                    bad.append(str(p))
    return bad
