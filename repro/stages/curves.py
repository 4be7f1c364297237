"""Training curves: the checkpoints a stage kept along the way, exported as loadable model folders."""

from __future__ import annotations

import shutil
from pathlib import Path

from repro.io import atomic_dir, read_json


def export_curve(stage: Path, final: Path) -> list[Path]:
    """Make every kept ``ckpt-<n>`` of a stage loadable as ``curve/step-<n>`` (its weights, the final folder's
    config and tokenizer); the final weights are ``curve/step-<steps>``. Returns the folders in step order."""
    out = []
    ckpts = sorted(stage.glob("ckpt-*"), key=lambda c: int(c.name.split("-")[1]))
    for c in ckpts:
        dest = stage / "curve" / f"step-{c.name.split('-')[1]}"
        if not (dest / "config.json").exists():
            with atomic_dir(dest) as tmp:
                shutil.copy2(c / "model.safetensors", tmp / "model.safetensors")
                for f in final.iterdir():
                    if f.suffix == ".json" and f.name != "train_summary.json" or f.name.startswith("tokenizer"):
                        shutil.copy2(f, tmp / f.name)
        out.append(dest)
    return out


def curve_checkpoints(stage_final: Path) -> dict[int, Path]:
    """Step -> loadable folder of the checkpoints kept along a curve arm's training (see :func:`export_curve`)."""
    d = Path(stage_final).parent / "curve"
    return {int(c.name.split("-")[1]): c for c in sorted(d.glob("step-*")) if (c / "config.json").exists()}


def task_checkpoints(final: Path) -> dict[int, Path]:
    """Step -> loadable folder of the checkpoints a curve stage kept (a task fine-tune, or the plain CDT arm),
    with the final weights at the last step."""
    final = Path(final)
    return {**curve_checkpoints(final), int(read_json(final / "train_summary.json")["steps"]): final}
