"""The shapes ``python -m repro bench gpu`` trains, their FLOP count, the GPUs' datasheet peaks and the device line.

Shapes are Llama-architecture models with random weights (:class:`Shape`): Llama-3.2-1B and Llama-3-8B
(:data:`SHAPES`), and two tiny stand-ins of the same code paths for ``--quick`` (:data:`QUICK_SHAPES`: one with tied
embeddings, one untied with gradient checkpointing). The FLOPs of a training step (:func:`train_flops`) are the
usual model FLOPs, :data:`FLOP_FORMULA`: ``6 N`` per token (forward 2N, backward 4N) plus causal attention's score
and value matmuls; the recomputation of gradient checkpointing is not counted (model FLOPs, not hardware FLOPs).
"""

from __future__ import annotations

import platform
import time
from dataclasses import dataclass

import torch
from transformers import AutoModelForCausalLM, LlamaConfig

FLOP_FORMULA = "6·N·T + 6·L·d·T² per row of T tokens (N: parameters but an untied input embedding; L layers; " \
               "d = heads × head_dim; causal QKᵀ and AV, forward + backward)"
"""What :func:`train_flops` counts, as the tables state it."""

DATASHEET_BF16_TFLOPS: tuple[tuple[str, float], ...] = (
    ("H200 NVL", 835.0), ("H200", 989.0), ("H100 PCIe", 756.0), ("H100 NVL", 835.0), ("H100", 989.0),
    ("A100", 312.0))
"""Dense bf16 tensor-core peak (TFLOP/s, without sparsity) from NVIDIA's datasheets, by a part of
``torch.cuda.get_device_name`` (first match; H100/H200 without a suffix: the SXM parts)."""


@dataclass(frozen=True)
class Shape:
    """A Llama-architecture model benchmarked with random weights, and where each part runs on it."""

    name: str
    hidden: int
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vocab: int
    tied: bool
    """Tied input and output embeddings (one table)."""
    lengths: tuple[int, ...]
    """Tokens per row of the Standard step's throughput (batch 1 row)."""
    method_lengths: tuple[int, ...]
    """Lengths at which every method is timed beside Standard (a subset of ``lengths``)."""
    checkpoint_from: int | None
    """Gradient checkpointing at lengths >= this (0: always; None: never)."""
    analyses: bool = False
    """The IG scores' memory and the generation throughput run on this shape."""
    rope_theta: float = 500_000.0

    @property
    def head_dim(self) -> int:
        return self.hidden // self.heads

    def checkpointing(self, length: int) -> bool:
        """Whether the step at ``length`` tokens recomputes activations."""
        return self.checkpoint_from is not None and length >= self.checkpoint_from


LLAMA_1B = Shape("Llama-3.2-1B", 2048, 16, 32, 8, 8192, 128_256, True, (8192, 32768, 65536, 131072),
                 (8192, 32768, 65536), 65536, analyses=True)
LLAMA_8B = Shape("Llama-3-8B", 4096, 32, 32, 8, 14336, 128_256, False, (8192, 32768, 65536), (8192, 32768), 0)
SHAPES: tuple[Shape, ...] = (LLAMA_1B, LLAMA_8B)
"""The full run: 1B without checkpointing up to 32K (with it from 64K, where its activations would not fit), 8B
always with checkpointing."""
QUICK_SHAPES: tuple[Shape, ...] = (
    Shape("tiny (1B-like, tied)", 64, 2, 4, 2, 128, 512, True, (256, 512), (256, 512), 512, analyses=True),
    Shape("tiny (8B-like, untied)", 64, 2, 4, 2, 128, 512, False, (256, 512), (256,), 0),
)
"""``--quick``: the same code paths on tiny shapes (checkpointing at the longest length of the first, always on the
second; the second times the methods at its first length only, like the 8B)."""


def matmul_params(s: Shape) -> int:
    """``N`` of :data:`FLOP_FORMULA`: every parameter of the model but an untied input-embedding table (a lookup,
    no matmul). With tied embeddings the one table is the LM head and counts once."""
    kv = s.kv_heads * s.head_dim
    per_layer = 2 * s.hidden * s.hidden + 2 * s.hidden * kv + 3 * s.hidden * s.intermediate + 2 * s.hidden
    return s.layers * per_layer + s.hidden + s.vocab * s.hidden


def train_flops(s: Shape, length: int, rows: int = 1) -> int:
    """Model FLOPs of one training step on ``rows`` rows of ``length`` tokens (:data:`FLOP_FORMULA`)."""
    return rows * (6 * matmul_params(s) * length + 6 * s.layers * s.heads * s.head_dim * length * length)


def shape_config(s: Shape):
    """The HF ``LlamaConfig`` of shape ``s``: sdpa attention, no cache, positions up to 8x its longest length."""
    return LlamaConfig(vocab_size=s.vocab, hidden_size=s.hidden, intermediate_size=s.intermediate,
                       num_hidden_layers=s.layers, num_attention_heads=s.heads, num_key_value_heads=s.kv_heads,
                       max_position_embeddings=max(s.lengths) * 8, tie_word_embeddings=s.tied,
                       rope_parameters={"rope_type": "default", "rope_theta": s.rope_theta}, use_cache=False,
                       bos_token_id=1, eos_token_id=2, pad_token_id=0, attn_implementation="sdpa")


def build_model(s: Shape, device: torch.device, dtype: torch.dtype, seed: int = 0):
    """A freshly initialised (seeded) Llama of shape ``s`` (:func:`shape_config`) made directly on ``device`` in
    ``dtype``."""
    cfg = shape_config(s)
    torch.manual_seed(seed)
    with torch.device(device):
        return AutoModelForCausalLM.from_config(cfg, dtype=dtype)


def datasheet_peak(device_name: str) -> float | None:
    """The dense bf16 peak (TFLOP/s) of a GPU named ``device_name`` (:data:`DATASHEET_BF16_TFLOPS`), else None."""
    for part, tflops in DATASHEET_BF16_TFLOPS:
        if part.lower() in device_name.lower():
            return tflops
    return None


def device_info(device: torch.device) -> dict[str, str]:
    """``name`` (the GPU's, or the CPU's), ``torch``, ``cuda`` (torch's CUDA build, or ``none``) and ``line``, the
    three in one phrase for the tables' captions."""
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = f"CPU ({platform.processor() or platform.machine()}, {torch.get_num_threads()} threads)"
    cuda = torch.version.cuda or "none"
    return {"name": name, "torch": torch.__version__, "cuda": cuda,
            "line": f"{name}; torch {torch.__version__}, CUDA {cuda}"}


def sync(device: torch.device) -> None:
    """Wait for the device's queued work (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def matmul_tflops(device: torch.device, dtype: torch.dtype, n: int = 8192, reps: int = 10,
                  min_seconds: float = 0.2) -> float:
    """The measured rate (TFLOP/s) of an ``n x n`` matmul in ``dtype`` on ``device``: the best of at least ``reps``
    calls, repeated for at least ``min_seconds`` (on a shared CPU one call in many runs unpreempted)."""
    a = torch.randn(n, n, device=device).to(dtype)
    b = torch.randn(n, n, device=device).to(dtype)
    a @ b
    best, calls, start = float("inf"), 0, time.perf_counter()
    while calls < reps or time.perf_counter() - start < min_seconds:
        sync(device)
        t = time.perf_counter()
        a @ b
        sync(device)
        best = min(best, time.perf_counter() - t)
        calls += 1
    return 2 * n ** 3 / best / 1e12
