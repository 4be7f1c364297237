"""What a stage's bits depend on besides its config: the software versions and the CPU it ran on.

Every finished stage records :func:`environment` in its manifest (the corpus ``manifest.json``, a training
stage's ``final/train_summary.json``, each evaluation record, an analysis ``summary.json``, a notebook's
``.done.json`` stamp). Two runs with the same seed give bit-identical artifacts when these fields agree (same
torch version, same intra-op thread count, same CPU capability); elsewhere floating-point reductions may be
ordered differently and the numbers agree only within noise (:mod:`repro.determinism`).
"""

from __future__ import annotations

import platform
from functools import lru_cache
from pathlib import Path

ENVIRONMENT_KEY = "environment"
"""The key under which manifests and records hold :func:`environment`."""


@lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name: ``/proc/cpuinfo``'s ``model name`` when present, else ``platform.processor()``."""
    cpuinfo = Path("/proc/cpuinfo")
    try:
        for line in cpuinfo.read_text(errors="replace").splitlines():
            key, _, value = line.partition(":")
            if key.strip() in ("model name", "Model", "cpu model") and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def environment() -> dict:
    """The fields that decide bitwise equality of two same-seed runs, as plain JSON values: ``threads`` (torch
    intra-op threads now), ``torch``, ``cpu_capability`` (the SIMD kernels torch dispatches to, e.g. ``AVX2``,
    ``AVX512``), ``cpu_model``, and the ``transformers``, ``numpy`` and ``python`` versions."""
    # lazy: the pipeline imports this module and loads without numpy, torch or transformers
    import numpy as np
    import torch
    import transformers

    return {"threads": torch.get_num_threads(), "torch": torch.__version__,
            "cpu_capability": torch.backends.cpu.get_cpu_capability(), "cpu_model": cpu_model(),
            "transformers": transformers.__version__, "numpy": np.__version__,
            "python": platform.python_version()}


def with_environment(record: dict) -> dict:
    """``record`` plus :func:`environment` under :data:`ENVIRONMENT_KEY` (a new dict)."""
    return {**record, ENVIRONMENT_KEY: environment()}
