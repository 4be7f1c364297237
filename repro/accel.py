"""GPU-only accelerators (flash-attn, DeepSpeed), imported lazily and checked with clear errors.

flash-attn is not in the CPU install path (``requirements.txt``); GPU users add
it with ``pip install -r requirements-gpu.txt``. DeepSpeed is pinned in ``requirements.txt`` (it runs on CPU
with gloo, :mod:`repro.distributed`). The paper profile asks for
``attn_implementation="flash_attention_2"`` (checked by :func:`repro.attention.doc_masked.check_attn_implementation`)
and a DeepSpeed ZeRO-3 config
(``configs/deepspeed_zero3.json``, CPU optimizer offload as LongRecipe's
single-GPU runs report in Table 6).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import torch


def flash_attn_available() -> bool:
    return importlib.util.find_spec("flash_attn") is not None and torch.cuda.is_available()


def load_deepspeed_config(path: str | Path, global_batch: int, world_size: int = 1) -> dict:
    """Read a DeepSpeed JSON config and resolve ``"auto"`` gradient accumulation for ``global_batch``."""
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"DeepSpeed config {str(path)!r} does not exist; allowed: an existing DeepSpeed JSON "
                                "config (e.g. configs/deepspeed_zero3.json)")
    try:
        cfg = json.loads(path.read_text())
    except ValueError as e:
        raise ValueError(f"DeepSpeed config {str(path)!r} is not JSON ({e}); allowed: a DeepSpeed JSON config "
                         "(e.g. configs/deepspeed_zero3.json)") from e
    micro = int(cfg.get("train_micro_batch_size_per_gpu", 1))
    if global_batch % (micro * world_size):
        raise ValueError(f"global batch {global_batch} is not divisible by micro batch {micro} "
                         f"x world size {world_size}; allowed: a batch that is a multiple of {micro * world_size}")
    if cfg.get("gradient_accumulation_steps", "auto") == "auto":
        cfg["gradient_accumulation_steps"] = global_batch // (micro * world_size)
    cfg["train_batch_size"] = global_batch
    return cfg


def deepspeed_initialize(model: torch.nn.Module, optimizer, config: dict):
    """Wrap model and optimizer in a DeepSpeed engine (GPU runs of the paper profile)."""
    try:
        import deepspeed  # optional: DeepSpeed runs need it, nothing else imports it
    except ImportError as e:
        raise ImportError("DeepSpeed is not installed: "
                          "pip install deepspeed==0.19.8 (pinned in requirements.txt)") from e
    engine, optimizer, _, _ = deepspeed.initialize(model=model, optimizer=optimizer, config=config)
    return engine, optimizer
