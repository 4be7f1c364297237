"""The trainer's optimizer and RNG states on disk without pickle: safetensors for tensors, JSON for the rest.

A checkpoint folder (:meth:`repro.train.Trainer.save_checkpoint`) holds, beside the weights and ``state.json``:

* ``optimizer.safetensors``: every tensor of the optimizer's state dict, keyed ``state.<param index>.<name>``
  (AdamW: ``exp_avg``, ``exp_avg_sq``, ``step``);
* ``optimizer.json``: the ``param_groups`` and the state's non-tensor entries;
* ``rng.safetensors``: torch's CPU generator state (a uint8 tensor), key ``torch``;
* ``rng.json``: numpy's legacy global state (``name``, ``keys``, ``pos``, ``has_gauss``, ``cached_gaussian``) and
  python's ``random`` state (``version``, the 625 ints of ``state``, ``gauss``).

Reading them never unpickles, so a checkpoint of unknown origin cannot run code; the values round-trip exactly
(floats through JSON's shortest repr), so a resumed run is bit-identical to an uninterrupted one.
Checkpoints of earlier versions kept these states in a pickled ``trainer.pt``; :func:`refuse_pickled_state`
refuses them with what to do instead.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

from repro.io import atomic_write_json, read_json

OPTIMIZER_TENSORS = "optimizer.safetensors"
OPTIMIZER_JSON = "optimizer.json"
RNG_TENSORS = "rng.safetensors"
RNG_JSON = "rng.json"
STATE_FILES = (OPTIMIZER_TENSORS, OPTIMIZER_JSON, RNG_TENSORS, RNG_JSON)
"""The files :func:`save_trainer_state` writes into a checkpoint folder."""
PICKLED_STATE = "trainer.pt"
"""The pickled optimizer/RNG file of earlier checkpoints (refused, never read)."""


def flatten_optimizer_state(state_dict: dict) -> tuple[dict[str, torch.Tensor], dict]:
    """``(tensors, meta)`` of a torch optimizer ``state_dict``: its tensors keyed ``state.<index>.<name>`` and a
    JSON-able dict with the ``param_groups`` and the non-tensor state entries (``scalars``)."""
    tensors: dict[str, torch.Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for idx, entry in state_dict["state"].items():
        for name, value in entry.items():
            if "." in str(name):
                raise ValueError(f"optimizer state entry {name!r} of parameter {idx}: allowed names have no '.'")
            if isinstance(value, torch.Tensor):
                tensors[f"state.{int(idx)}.{name}"] = value.detach().cpu().contiguous().clone()
            elif value is None or isinstance(value, (bool, int, float, str)):
                scalars.setdefault(str(int(idx)), {})[name] = value
            else:
                raise TypeError(f"optimizer state entry {name!r} of parameter {idx} is a {type(value).__name__}; "
                                "allowed: tensors, numbers, strings, booleans, None")
    return tensors, {"param_groups": state_dict["param_groups"], "scalars": scalars}


def unflatten_optimizer_state(tensors: dict[str, torch.Tensor], meta: dict) -> dict:
    """The torch optimizer ``state_dict`` that :func:`flatten_optimizer_state` split (list-valued group settings such
    as AdamW's ``betas`` come back as tuples)."""
    state: dict[int, dict[str, Any]] = {}
    for key, value in tensors.items():
        parts = key.split(".")
        if len(parts) != 3 or parts[0] != "state" or not parts[1].isdigit():
            raise ValueError(f"optimizer tensor key {key!r}; allowed: state.<param index>.<name>")
        state.setdefault(int(parts[1]), {})[parts[2]] = value
    for idx, entry in meta.get("scalars", {}).items():
        state.setdefault(int(idx), {}).update(entry)
    groups = [{k: (v if k == "params" or not isinstance(v, list) else tuple(v)) for k, v in g.items()}
              for g in meta["param_groups"]]
    return {"state": dict(sorted(state.items())), "param_groups": groups}


def rng_state() -> tuple[torch.Tensor, dict]:
    """``(torch CPU generator state, JSON-able numpy and python states)`` of this process."""
    name, keys, pos, has_gauss, cached = np.random.get_state()
    version, mt, gauss = random.getstate()
    return torch.get_rng_state(), {
        "numpy": {"name": name, "keys": [int(k) for k in keys], "pos": int(pos), "has_gauss": int(has_gauss),
                  "cached_gaussian": float(cached)},
        "python": {"version": int(version), "state": [int(x) for x in mt], "gauss": gauss}}


def set_rng_state(torch_state: torch.Tensor, states: dict) -> None:
    """Restore what :func:`rng_state` returned."""
    torch.set_rng_state(torch_state)
    n = states["numpy"]
    np.random.set_state((n["name"], np.asarray(n["keys"], dtype=np.uint32), int(n["pos"]), int(n["has_gauss"]),
                         float(n["cached_gaussian"])))
    p = states["python"]
    random.setstate((int(p["version"]), tuple(int(x) for x in p["state"]), p["gauss"]))


def save_trainer_state(folder: Path, optimizer: torch.optim.Optimizer) -> None:
    """Write ``optimizer``'s state and this process's RNG states into ``folder`` (:data:`STATE_FILES`)."""
    tensors, meta = flatten_optimizer_state(optimizer.state_dict())
    save_file(tensors, folder / OPTIMIZER_TENSORS)
    atomic_write_json(folder / OPTIMIZER_JSON, meta)
    torch_rng, rng = rng_state()
    save_file({"torch": torch_rng}, folder / RNG_TENSORS)
    atomic_write_json(folder / RNG_JSON, rng)


def refuse_pickled_state(folder: Path) -> None:
    """ValueError when checkpoint ``folder`` keeps its optimizer/RNG states only in a pickled ``trainer.pt``."""
    if (folder / PICKLED_STATE).exists() and not (folder / OPTIMIZER_TENSORS).exists():
        raise ValueError(
            f"checkpoint {str(folder)!r} keeps its optimizer and RNG states in {PICKLED_STATE}, a pickle written by "
            "an earlier version of this project; loading it would unpickle (arbitrary code), so it is not read. "
            f"Allowed: checkpoints with {', '.join(STATE_FILES)}. To proceed, delete the stage's checkpoint folders "
            f"({str(folder.parent / 'ckpt-*')!r}) to restart the stage, or finish the stage with the project's "
            "earlier version")


def check_trainer_state(folder: Path) -> None:
    """Refuse checkpoint ``folder`` unless it holds every state file (:data:`STATE_FILES`) and no pickled one;
    reads nothing, so a caller can check before changing its model."""
    refuse_pickled_state(folder)
    missing = [f for f in STATE_FILES if not (folder / f).exists()]
    if missing:
        raise ValueError(f"checkpoint {str(folder)!r} lacks {', '.join(missing)}; allowed: a folder with "
                         f"{', '.join(STATE_FILES)} (written by Trainer.save_checkpoint)")


def load_trainer_state(folder: Path, optimizer: torch.optim.Optimizer) -> None:
    """Restore ``optimizer`` and the RNG states from checkpoint ``folder`` (never unpickles)."""
    check_trainer_state(folder)
    optimizer.load_state_dict(unflatten_optimizer_state(load_file(folder / OPTIMIZER_TENSORS),
                                                        read_json(folder / OPTIMIZER_JSON)))
    set_rng_state(load_file(folder / RNG_TENSORS)["torch"], read_json(folder / RNG_JSON))
