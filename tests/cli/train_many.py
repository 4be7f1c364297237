"""Several ``python -m repro train`` command lines in one launched process: ``python -m tests.cli.train_many SPEC``.

The spec (JSON) holds ``runs`` (a list of ``train`` argument lists) and ``codes`` (a folder). The launcher sets the
rank variables; each process calls :func:`repro.__main__.main` on every argument list in turn, in the same process group
(each run builds its own accelerator, model and trainer, as the command does), writes the exit codes to
``codes/rank<RANK>.json`` and leaves as ``python -m repro`` does. One start-up (about 6 s of imports per process)
for all runs instead of one per run: what the sequence-parallel test of every method shares.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from repro.__main__ import _exit
from repro.__main__ import main
from repro.distributed import launched_rank


def run(spec_path: str) -> int:
    spec = json.loads(Path(spec_path).read_text())
    codes = [main(argv) for argv in spec["runs"]]
    (Path(spec["codes"]) / f"rank{launched_rank()}.json").write_text(json.dumps(codes))
    return 0 if all(c == 0 for c in codes) else 1


if __name__ == "__main__":
    _exit(run(sys.argv[1]))
