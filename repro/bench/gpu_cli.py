"""python -m repro bench gpu: one GPU, random weights, bf16, batch 1 row; about 20 minutes on an H100/H200.

Shapes: Llama-3.2-1B (hidden 2048, 16 layers, 32 heads, 8 kv heads, MLP 8192, vocabulary 128256, tied
embeddings; gradient checkpointing from 64K) at 8K, 32K, 64K and 128K tokens per row, and Llama-3-8B (hidden
4096, 32 layers, 32 heads, 8 kv heads, MLP 14336, vocabulary 128256; gradient checkpointing) at 8K, 32K and 64K.

What it measures, each part one table under --figures-dir (default figures/gpu; csv + md, target TB-GPU in its
index), every caption naming the GPU, torch and CUDA:
  GPU-Throughput  tokens/s and MFU of a Standard training step (forward, backward, AdamW) at every shape and
                  length; FLOPs = 6*N*T + 6*L*d*T^2 per row (stated in the table), MFU against the datasheet's
                  dense bf16 peak (H100/H200 989, A100 312 TFLOP/s; by device name, else unknown) and against the
                  bf16 matmul rate measured here.
  GPU-Methods     each method's step time as a ratio to Standard at the same shape, all arms interleaved
                  round-robin in one process (1B at 8K/32K/64K, 8B at 8K/32K): self-distillation's skip view
                  prefix-shared and with two full passes, LongCE, CDT, PoSE and LongRecipe positions, ProLong's
                  document-masked rows (dense mask, sdpa_varlen, flash-attn varlen, flex where registered).
  GPU-IG          peak memory and time of the IG scores on the 1B, memory-linear against the direct Eq. 1, the
                  length doubled from 4K to 128K; each until its first failure (an out-of-memory is a row).
  GPU-Generation  prompt and generated tokens/s of repro.generate.greedy_ids against HF generate (1B, 8K and 32K
                  prompts).

Every arm is guarded: one that fails (out of memory, flash-attn missing) is a row with its error and the run goes
on. --budget-s (default 1200) bounds the run: an arm whose estimated time no longer fits, and everything after the
budget is spent, is skipped and listed (rows with status "skipped (budget)"). Both shapes run up to 32K first
(then the IG and generation parts), the 64K and 128K rows last, so a short budget cuts the longest rows first.

--quick runs the same code on two tiny shapes (hidden 64, 2 layers, 4 heads, 2 kv heads, vocabulary 512) at 256
and 512 tokens on the CPU (or --device), in well under 2 minutes: a check that every part runs, not a benchmark.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
from pathlib import Path

DEFAULT_BUDGET_S = 1200.0
"""The full run's time budget (``--budget-s``); ``--quick`` has 600 s."""


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The options of ``bench gpu`` (``dest`` prefixed ``gpu_``, apart from ``bench``'s own)."""
    p.add_argument("--quick", dest="gpu_quick", action="store_true",
                   help="tiny shapes at 256 and 512 tokens (the CPU unless --device), a check that every part runs")
    p.add_argument("--figures-dir", dest="gpu_figures_dir", default="figures/gpu", metavar="DIR",
                   help="where GPU-{Throughput,Methods,IG,Generation}.{csv,md} go (default figures/gpu)")
    p.add_argument("--budget-s", dest="gpu_budget_s", type=float, default=None, metavar="S",
                   help=f"time budget in seconds (default {DEFAULT_BUDGET_S:.0f}; --quick 600); arms that no longer "
                        "fit are skipped and listed")
    p.add_argument("--device", dest="gpu_device", default="auto", metavar="DEVICE",
                   help="auto (default), cpu, cuda or cuda:N")


def module_doc(name: str) -> str:
    """The docstring of module ``name``, read from its source without importing it: ``bench costs`` loads torch and
    the trainer, and building the parser (every command's start, ``--help``) should not."""
    source = Path(importlib.util.find_spec(name).origin).read_text(encoding="utf-8")
    return ast.get_docstring(ast.parse(source), clean=False) or ""


def add_parser(bench: argparse.ArgumentParser) -> None:
    """``gpu`` as an optional sub-choice of ``bench`` (without it, ``bench`` runs TB-Throughput)."""
    which = bench.add_subparsers(dest="bench_what", metavar="{gpu,costs}", required=False,
                                 help="gpu: the one-GPU benchmark at Llama-3.2-1B and Llama-3-8B shapes (TB-GPU; "
                                      "`bench gpu --help`); costs: the trained arms' step ratios against RP-Cost's "
                                      "and CD-Cost's benchmark and the paper-shaped proxies (TB-TimedArms); "
                                      "without either: TB-Throughput")
    add_arguments(which.add_parser("gpu", help="one GPU, 1B and 8B shapes: throughput, MFU, methods, IG, generation",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter))
    c = which.add_parser("costs", help="trained arms vs the cost benchmark, proxies with their FLOP bounds",
                         description=module_doc("repro.bench.costs"),
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    c.add_argument("--profile", dest="costs_profile", default="tiny", help="smoke or tiny (default tiny)")
    c.add_argument("--quick", dest="costs_quick", action="store_true", help="the smoke profile, a few steps (a check)")
    c.add_argument("--figures-dir", dest="costs_figures_dir", default="figures/costs", metavar="DIR",
                   help="where TB-TimedArms, RP-Cost-proxies and CD-Cost-proxies go (default figures/costs)")

