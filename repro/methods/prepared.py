"""Batches prepared once, before training (LongRecipe prepares its selected samples offline, §4.2).

A method's batches are a pure function of the step (the data contract of
:class:`repro.methods.protocol.Method`), so they can be built ahead of training:
:func:`prepare_batches` writes every step's arrays as ``.npy`` files (no pickle) plus the
method's state after each step, and :class:`PreparedBatches` replays them to the
trainer. Training on prepared batches gives the same weights as building them on the
fly (tested); the data time per step drops to a memory read, and the preparation can
run in other processes (``workers``) or beside another stage's training.
"""

from __future__ import annotations

import multiprocessing as mp
import time
from pathlib import Path
from typing import Any

import numpy as np

from repro.io import atomic_dir, atomic_write_json, read_json
from repro.manifest import environment
from repro.methods.protocol import OPTIONAL_HOOKS

ARRAYS: tuple[str, ...] = ("input_ids", "position_ids", "weights", "doc_ids", "answer_group", "attention_mask",
                           "perturbed_position_ids", "split", "kl_mask")
"""The batch arrays a prepared file holds (those the method produces)."""


def _build(method, steps: range) -> tuple[dict[str, list[np.ndarray]], list[dict]]:
    arrays: dict[str, list[np.ndarray]] = {}
    states = []
    for s in steps:
        b = method.batch(s)
        for k in ARRAYS:
            if k in b:
                arrays.setdefault(k, []).append(np.asarray(b[k]))
        states.append(method.state_dict())
    return arrays, states


_FORKED: dict[str, Any] = {}
"""The method being prepared, inherited by forked workers (methods hold closures that do not pickle)."""


def _worker(bounds: tuple[int, int]):
    return _build(_FORKED["method"], range(*bounds))


def prepare_batches(method, steps: int, out: str | Path, workers: int = 1) -> Path:
    """Build batches ``0..steps-1`` of ``method`` into the folder ``out`` (written atomically).

    ``workers`` > 1 splits the steps into contiguous ranges built by forked processes; the method's
    per-step state (e.g. counters) must then be a sum of per-step increments, as
    :class:`repro.methods.Extension`'s is, and it is rebuilt in step order.
    """
    if steps < 1 or workers < 1:
        raise ValueError(f"steps={steps}, workers={workers}; allowed: both >= 1")
    out = Path(out)
    t0 = time.perf_counter()
    start_state = method.state_dict()
    if workers == 1:
        arrays, states = _build(method, range(steps))
    else:
        bounds = np.linspace(0, steps, workers + 1).astype(int)
        _FORKED["method"] = method
        try:
            with mp.get_context("fork").Pool(workers) as pool:
                parts = pool.map(_worker, [(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])])
        finally:
            _FORKED.clear()
        arrays, states = {}, []
        offset = dict(start_state)
        for part_arrays, part_states in parts:
            for k, v in part_arrays.items():
                arrays.setdefault(k, []).extend(v)
            states += [_shift(s, start_state, offset) for s in part_states]
            offset = states[-1]
        method.load_state_dict(states[-1])
    shapes = {k: v[0].shape for k, v in arrays.items()}
    with atomic_dir(out) as tmp:
        for k, v in arrays.items():
            if any(a.shape != shapes[k] for a in v):
                raise ValueError(f"batches of {method.name!r} change shape across steps ({k}); "
                                 "prepared batches need a fixed shape")
            a = np.stack(v)
            if a.dtype == np.int64 and a.size and a.min() >= -2**31 and a.max() < 2**31:
                a = a.astype(np.int32)  # half the disk; read back as int64
            np.save(tmp / f"{k}.npy", a, allow_pickle=False)
        atomic_write_json(tmp / "prepared.json", {"method": method.name, "steps": steps, "states": states,
                                                  "start_state": start_state, "workers": workers,
                                                  "seconds": time.perf_counter() - t0,
                                                  "environment": environment()})
    return out


def _shift(state: dict, start: dict, offset: dict) -> dict:
    """A worker's state (counted from ``start``) moved to continue from ``offset``."""
    out = dict(state)
    for k, v in state.items():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            out[k] = offset.get(k, 0) + v - start.get(k, 0)
    return out


class PreparedBatches:
    """Replays a folder written by :func:`prepare_batches` as a method (same name and state).

    ``inner``: the method the batches came from; its optional hooks (:data:`repro.methods.protocol.OPTIONAL_HOOKS`)
    and its ``observe`` are kept, so an objective other than plain CLM still applies.
    """

    def __init__(self, path: str | Path, inner: Any | None = None):
        self.path = Path(path)
        meta = read_json(self.path / "prepared.json")
        self.name, self.steps, self.states = meta["method"], int(meta["steps"]), meta["states"]
        self.prepare_seconds = float(meta["seconds"])
        self.arrays = {k: np.load(self.path / f"{k}.npy", mmap_mode="r", allow_pickle=False)
                       for k in ARRAYS if (self.path / f"{k}.npy").exists()}
        self.state = dict(meta["start_state"])
        self.inner = inner
        for hook in OPTIONAL_HOOKS:
            if inner is not None and hasattr(inner, hook):
                setattr(self, hook, getattr(inner, hook))

    def batch(self, step: int) -> dict[str, np.ndarray]:
        if not 0 <= step < self.steps:
            raise ValueError(f"step={step} is outside the prepared batches; allowed: 0 <= step < {self.steps}")
        self.state = dict(self.states[step])
        return {k: np.array(v[step], dtype=np.int64 if v.dtype == np.int32 else v.dtype)
                for k, v in self.arrays.items()}

    def observe(self, step: int, metrics: dict) -> None:
        if self.inner is not None:
            self.inner.observe(step, metrics)

    def finished(self, step: int) -> bool:
        return step >= self.steps

    def state_dict(self) -> dict:
        return dict(self.state)

    def load_state_dict(self, state: dict) -> None:
        self.state = dict(state)
