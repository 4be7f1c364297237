"""A run folder's checkpoint files: the latest complete checkpoint, the weights written without a tied head
(checkpoints: :func:`untie`; the multi-process final save: :func:`drop_tied`), the step of a metrics line, and the
temporary folders a killed run left behind."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch


def latest_checkpoint(out_dir: Path) -> Path | None:
    """The newest complete checkpoint (one with its ``state.json``) in ``out_dir``, or None."""
    ckpts = sorted(out_dir.glob("ckpt-*"), key=lambda p: int(p.name.split("-")[1]))
    ckpts = [c for c in ckpts if (c / "state.json").exists()]
    return ckpts[-1] if ckpts else None


def untie(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """safetensors refuses shared storage: drop the tied output head (rebuilt on load); also under a prefix
    (a peft model's ``base_model.model.``)."""
    for head in [k for k in state if k == "lm_head.weight" or k.endswith(".lm_head.weight")]:
        embed = head[: -len("lm_head.weight")] + "model.embed_tokens.weight"
        if embed in state and torch.equal(state[head], state[embed]):
            state = {k: v for k, v in state.items() if k != head}
    return state


def drop_tied(state: dict[str, torch.Tensor], model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """``state`` without the names ``model`` ties to an earlier parameter (one tensor under two names: the output
    head tied to the input embeddings), as ``save_pretrained`` writes the live model. A multi-process engine's
    consolidated state dict holds a separate copy under each name, which ``save_pretrained`` would write twice."""
    seen, aliases = set(), set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            aliases.add(name)
        seen.add(id(p))
    return {k: v for k, v in state.items() if k not in aliases}


def step_of(line: str) -> int:
    """The step of a metrics line; a line cut by a kill mid-write (not JSON) reads as after every step, so resuming
    drops it."""
    try:
        return int(json.loads(line).get("step", -1))
    except (ValueError, AttributeError):
        return 1 << 62


def remove_leftovers(out_dir: Path) -> None:
    """Delete the temporary files and folders of the writes that a killed or interrupted run left behind
    (``atomic_dir``'s and the atomic writes' ``.<name>.<random>.tmp``, a multi-process save's
    ``.ckpt-<step>.partial``): never read, they would pile up. Only the run's own writer calls it (under its lock)."""
    for p in [*out_dir.glob(".*.tmp"), *out_dir.glob(".ckpt-*.partial")]:
        if p.is_dir():
            shutil.rmtree(p, ignore_errors=True)
        else:
            p.unlink(missing_ok=True)
