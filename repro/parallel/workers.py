"""Starting ``W`` gloo worker processes on this machine and collecting what each wrote (the parallel checks)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from repro.distributed import free_port


def run_workers(module: str, spec: Path, world: int, timeout: float, what: str,
                cwd: Path | None = None) -> list[Path]:
    """Run ``python -m <module> <spec> <rank>`` for ranks ``0..world-1`` with ``RANK``/``LOCAL_RANK``/
    ``WORLD_SIZE``/``MASTER_ADDR``/``MASTER_PORT`` set; each must write ``rank<r>.npz`` beside ``spec``. Returns
    those files; RuntimeError with every worker's output (``what`` names the workers) when one is missing after
    ``timeout`` seconds. ``cwd``: where the workers start (a module outside the package needs its root)."""
    env = {**os.environ, "WORLD_SIZE": str(world), "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port())}
    procs = [subprocess.Popen([sys.executable, "-m", module, str(spec), str(r)],
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, cwd=cwd, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in range(world)]
    logs = []
    for p in procs:
        try:
            logs.append(p.communicate(timeout=timeout)[0])
        except subprocess.TimeoutExpired:
            p.kill()
            logs.append(p.communicate()[0] + f"\n[killed after {timeout} s]")
    files = [spec.parent / f"rank{r}.npz" for r in range(world)]
    if not all(f.exists() for f in files):
        raise RuntimeError(f"{what} wrote no results:\n" + "\n".join(
            f"--- rank {r} (exit {p.returncode}) ---\n{log[-6000:]}" for r, (p, log) in enumerate(zip(procs, logs))))
    return files
