"""The notebooks' set-up, shared by their first code cell: where the figures of this run go, library output kept
quiet, and the defaults a kernel run ("Run All", nbval) takes from the environment.

Only ``python -m repro reproduce`` (tiny profile) writes the committed ``figures/``: it passes its folder to every
notebook. A notebook run on its own (JupyterLab, nbval, papermill without ``figures_dir``) writes the tiny profile's
figures to a scratch folder under its run directory and the other profiles' to ``figures/<profile>/`` (ignored by
git), and says where in its first output.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable

import torch
from huggingface_hub.utils import disable_progress_bars
from transformers.utils import logging as hf_logging

from repro.io import atomic_write_text, config_hash
from repro.paths import REPO
from repro.pipeline import source_hash
from repro.profiles import Profile

PROFILE_ENV = "REPRO_NOTEBOOK_PROFILE"
"""The parameters cells' default profile when set (``tiny`` otherwise): how a test runs the notebooks in the smoke
profile through a plain kernel (nbval cannot pass parameters); papermill's parameters still override it."""
RUN_DIR_ENV = "REPRO_NOTEBOOK_RUN_DIR"
"""The parameters cells' default run directory when set (``../runs`` otherwise)."""
SCRATCH = "figures-scratch"
"""The folder under ``<run_dir>/<profile>/`` that a tiny-profile notebook run on its own writes its figures to."""


def default(env: str, fallback: str) -> str:
    """A parameters cell's default: the environment variable ``env`` when set and not empty, else ``fallback``."""
    return os.environ.get(env) or fallback


def figures_folder(figures_dir: str, profile: str, run_dir: str | Path) -> Path:
    """Where a notebook writes its figures and tables: ``figures_dir`` when given (``reproduce`` passes its own);
    else ``<run_dir>/tiny/figures-scratch`` for the tiny profile (the committed ``figures/`` stays untouched) and
    ``figures/<profile>/`` for the others."""
    if figures_dir:
        return Path(figures_dir)
    if profile == "tiny":
        return Path(run_dir) / profile / SCRATCH
    return REPO / "figures" / profile


def shown(path: Path) -> str:
    """``path`` relative to the repository when it lies inside it (no machine path in a notebook's output)."""
    try:
        return Path(os.path.abspath(path)).relative_to(REPO).as_posix()
    except ValueError:
        return str(path)


def quiet() -> None:
    """Library output a notebook does not need: transformers' and huggingface_hub's per-load and per-save bars
    ("Loading weights", "Writing model shards"), in this process and in the worker processes it spawns, and
    DeepSpeed's "Setting accelerator to CPU" warning (on a machine without CUDA the CPU accelerator is named
    outright: the same one it would detect)."""
    hf_logging.disable_progress_bar()
    disable_progress_bars()
    os.environ.setdefault("HF_HUB_DISABLE_PROGRESS_BARS", "1")  # spawned evaluation workers read it at import
    if not torch.cuda.is_available():
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # worker processes inherit it


def start(notebook: str, profile: str, run_dir: str, figures_dir: str) -> Path:
    """The first call of every notebook: quiet libraries, resolve the figures folder and print one line saying
    which profile runs and where its figures go; returns the folder."""
    quiet()
    folder = figures_folder(figures_dir, profile, run_dir)
    print(f"{notebook} ({profile} profile): figures and tables go to {shown(folder)}/, stages are cached under "
          f"{shown(Path(run_dir) / profile)}/")
    return folder


def measured(name: str, p: Profile, run_dir: str | Path, force: bool, measure: Callable[[], Any], **key: Any) -> Any:
    """A cost benchmark of the training notebook (``measure()``: LR-Cost, RP-Cost, CD-Cost, PL-Tab15), measured once
    per profile, code version (:func:`repro.pipeline.source_hash`) and ``key`` (what else it depends on, e.g. the arms
    trained) and cached under ``<run_dir>/<profile>/bench/`` like every stage; ``force`` measures again. A notebook
    run again on the same code (another ``--paper``, "Run All", a test) reuses the timing instead of re-timing."""
    path = _bench_path(name, p, run_dir, key)
    if path.exists() and not force:
        return json.loads(path.read_text())  # JSON, never pickle: nothing read from disk runs code
    out = json.loads(json.dumps(measure(), default=_plain))  # the value a rerun reads back: lists for tuples
    atomic_write_text(path, json.dumps(out))
    return out


def _bench_path(name: str, p: Profile, run_dir: str | Path, key: dict) -> Path:
    """Where :func:`measured` caches benchmark ``name`` of this profile, code version and ``key``."""
    return Path(run_dir) / p.name / "bench" / f"{name}-{config_hash({'profile': p, 'src': source_hash(), **key})}.json"


def measured_before(name: str, p: Profile, run_dir: str | Path, **key: Any) -> Any | None:
    """The benchmark ``name`` as :func:`measured` cached it on this code version with ``key`` (e.g. the evaluation
    notebook's RP-Fig4 reads the training notebook's RP-Cost timing), or None when it was not measured."""
    path = _bench_path(name, p, run_dir, key)
    return json.loads(path.read_text()) if path.exists() else None


def _plain(value: Any) -> Any:
    """A NumPy or torch scalar or array as plain numbers (for :func:`measured`'s JSON)."""
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"a benchmark result holds a {type(value).__name__}; allowed: numbers, strings, lists, dicts")
