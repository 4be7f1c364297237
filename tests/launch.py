"""Launching ``python -m MODULE`` on several gloo processes, as ``torchrun`` would (shared by the tests that train on
more than one process)."""

import os
import subprocess
import sys

from repro.distributed import free_port
from repro.pipeline import REPO


def launch(argv, world: int, log, module: str = "repro") -> list[int]:
    """``python -m module *argv`` on ``world`` gloo processes of one thread each; their exit codes."""
    port = str(free_port())
    procs = [subprocess.Popen([sys.executable, "-m", module, *argv], cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                              env={**os.environ, "RANK": str(r), "LOCAL_RANK": str(r), "WORLD_SIZE": str(world),
                                   "LOCAL_WORLD_SIZE": str(world), "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": port,
                                   "OMP_NUM_THREADS": "1"}) for r in range(world)]
    return [p.wait(timeout=600) for p in procs]
