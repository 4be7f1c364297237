"""The reordering benchmark's model (:mod:`repro.bench.reorder`, :mod:`repro.bench.reorder_dist`): a tiny random
Llama with document-masked attention (``sdpa_varlen``, :mod:`repro.attention.doc_masked`) and its training pass,
whose seconds the benchmark fits and its processes run.
"""

from __future__ import annotations

from typing import Mapping

import numpy as np
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.attention.doc_masked import check_attn_implementation
from repro.loss import chunked_clm_loss
from repro.models import forward_hidden

MODEL = dict(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
             num_key_value_heads=2)
"""The benchmark's tiny Llama (random weights, float32)."""


def tiny_model(seed: int = 0, max_positions: int = 8192, attn_implementation: str = "sdpa_varlen", **overrides):
    """The benchmark's Llama (:data:`MODEL` with ``overrides``), in training mode, with ``attn_implementation``
    (default ``sdpa_varlen``: each packed document's attention alone, :mod:`repro.attention.doc_masked`)."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(**{**MODEL, **overrides}, max_position_embeddings=max_positions, use_cache=False,
                      attn_implementation=check_attn_implementation(attn_implementation))
    return LlamaForCausalLM(cfg).train()


def _torch(batch: Mapping) -> dict[str, torch.Tensor]:
    return {k: torch.as_tensor(np.asarray(v)) for k, v in batch.items()}


def train_pass(model, batch: Mapping) -> None:
    """Forward + backward of the weighted CLM loss on ``batch`` with the model's own attention (gradients accumulate
    into ``model``'s ``.grad``): the rows' restarting ``position_ids`` mark the documents, so with
    :func:`tiny_model`'s ``sdpa_varlen`` each document's attention is computed alone."""
    b = _torch(batch)
    hidden = forward_hidden(model, b["input_ids"], b["position_ids"], b.get("doc_ids"))
    loss = chunked_clm_loss(hidden, model.get_output_embeddings().weight, b["input_ids"], b["weights"].float())
    loss.backward()
