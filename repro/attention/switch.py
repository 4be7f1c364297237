"""Switching a model's attention implementation for the length of a block, through transformers' public
``set_attn_implementation`` (the analyses' capture, the self-distillation controls and the prefix-shared pass)."""

from __future__ import annotations

import contextlib
from typing import Iterator

import torch


@contextlib.contextmanager
def attention_implementation(model: torch.nn.Module, name: str) -> Iterator[torch.nn.Module]:
    """Within the block ``model`` uses the attention implementation ``name`` (set with the public
    ``set_attn_implementation``); its own is restored on exit, whatever happens."""
    previous = model.config._attn_implementation
    try:
        model.set_attn_implementation(name)
        if model.config._attn_implementation != name:
            raise ValueError(f"{type(model).__name__} cannot switch its attention implementation to {name!r} (it does "
                             "not use transformers' attention-function registry); allowed: models that do")
        yield model
    finally:
        if model.config._attn_implementation != previous:
            model.set_attn_implementation(previous)
