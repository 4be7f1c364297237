"""Memory on paper: what one GPU holds when a Llama-shaped model trains on one row of ``T`` tokens split over
``N`` GPUs (``python -m repro.parallel.memory`` writes the table of ``docs/sequence_parallel_memory.md``).

Every term is a formula in the model's shape (:class:`Shape`: ``L`` layers, hidden ``h``, key/value width ``k``,
MLP width ``I``, vocabulary ``V``, ``P`` parameters) and the run's settings (:class:`Setup`); bytes, per GPU:

* weights, bf16, ZeRO-3 partitioned over the ``N`` GPUs, plus one layer gathered for its compute:
  ``2 P / N + 2 P_layer`` (offloaded to CPU memory: ``2 P_layer`` only);
* gradients, bf16, partitioned: ``2 P / N`` (offloaded: 0);
* optimizer, AdamW's fp32 master weights, first and second moments, partitioned: ``12 P / N`` (offloaded, as in
  ``configs/deepspeed_zero3.json``: 0);
* activation checkpoints, one bf16 hidden state per layer and local token: ``2 L h T / N`` (offloaded to CPU
  memory: one layer's, ``2 h T / N``);
* the recomputed layer in the backward: the tensors a Llama layer saves per token (norm inputs in fp32 and
  outputs, q and its rotation, k, v, the attention output and o-projection input: about ``9 h + 3 k`` elements;
  the MLP's gate, activation, up and down input: ``4 I``) in bf16, doubled for their gradients:
  ``4 (9 h + 3 k + 4 I) T / N`` (a tiled MLP, ALST's, drops the ``4 I``; flash-attention keeps no ``T^2`` term);
* the logits chunk of the chunked loss and its gradient, fp32: ``8 c V`` (``c`` = 2048 targets);
* the full rows' final hidden states that this repo's sequence parallelism all-gathers on every rank
  (:mod:`repro.parallel.rows`), bf16 with an fp32 gradient: ``6 h T`` (independent of ``N``).

The formulas leave out the CUDA context, allocator fragmentation and communication buffers (a few GiB).
:data:`ALST_CHECK` compares them with DeepSpeed ALST's published maxima for Llama-3-8B on 80 GB H100s (500K tokens
on one GPU, 3.7M on one 8-GPU node), with ALST's own settings: weights and optimizer offloaded, checkpoints
offloaded, tiled MLP, and the loss on each rank's own tokens (no gathered hidden states).
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path

from repro.io import atomic_write_text

GIB = 1024 ** 3
H100_BYTES = 80e9
"""An 80 GB H100 (80 x 10^9 bytes, 74.5 GiB)."""


@dataclass(frozen=True)
class Shape:
    """A Llama-shaped decoder."""

    layers: int
    """``L``."""
    hidden: int
    """``h``."""
    kv: int
    """``k``: the key (and value) projection's width, key/value heads x head size."""
    intermediate: int
    """``I``: the MLP's width."""
    vocab: int
    """``V``."""
    tied: bool = False
    """Whether the LM head is the input embedding."""

    @property
    def layer_params(self) -> int:
        """``P_layer``: q and o (``h^2`` each), k and v (``h k`` each), the MLP (``3 h I``), two norms."""
        h = self.hidden
        return 2 * h * h + 2 * h * self.kv + 3 * h * self.intermediate + 2 * h

    @property
    def params(self) -> int:
        """``P``: the layers, the embedding, the final norm and the head (when untied)."""
        emb = self.vocab * self.hidden
        return self.layers * self.layer_params + emb * (1 if self.tied else 2) + self.hidden


LLAMA3_8B = Shape(layers=32, hidden=4096, kv=1024, intermediate=14336, vocab=128256)
"""Meta-Llama-3-8B (8.03B parameters)."""


@dataclass(frozen=True)
class Setup:
    """What a run keeps on the GPU."""

    name: str
    """Shown in the tables."""
    offload_states: bool = True
    """Optimizer states on CPU memory (``offload_optimizer``; this repo's ``configs/deepspeed_zero3.json``); with
    ``offload_weights`` the weights and gradients too."""
    offload_weights: bool = False
    """ZeRO-3 weights and gradients on CPU memory (``offload_param``)."""
    offload_checkpoints: bool = False
    """Activation checkpoints on CPU memory."""
    tiled_mlp: bool = False
    """The MLP run in sequence tiles (its ``4 I`` per-token term gone)."""
    gathered_hidden: bool = True
    """The full rows' final hidden states on every rank (:mod:`repro.parallel.rows`)."""
    logits_chunk: int = 2048
    """Targets per chunk of the chunked loss."""


THIS_REPO = Setup("this repo: ZeRO-3, optimizer offload, checkpointing")
"""``train --deepspeed configs/deepspeed_zero3.json --gradient-checkpointing --sequence-parallel N``."""
ALST = Setup("ALST: weights, optimizer and checkpoints offloaded, tiled MLP", offload_weights=True,
             offload_checkpoints=True, tiled_mlp=True, gathered_hidden=False)
"""DeepSpeed ALST's single-GPU and single-node settings."""


def terms(shape: Shape, tokens: int, n: int, setup: Setup) -> dict[str, tuple[float, str]]:
    """``{term: (bytes per GPU, formula)}`` for one row of ``tokens`` split over ``n`` GPUs (module docstring)."""
    if n < 1 or tokens < n:
        raise ValueError(f"tokens={tokens}, n={n}; allowed: n >= 1 and tokens >= n")
    s, t = shape, tokens / n
    h, k, i, p, pl = s.hidden, s.kv, s.intermediate, s.params, s.layer_params
    out: dict[str, tuple[float, str]] = {}
    out["weights"] = (2 * pl, "2 P_layer") if setup.offload_weights else (2 * p / n + 2 * pl, "2 P/N + 2 P_layer")
    out["gradients"] = (0.0, "0 (CPU)") if setup.offload_weights else (2 * p / n, "2 P/N")
    out["optimizer"] = (0.0, "0 (CPU)") if setup.offload_states else (12 * p / n, "12 P/N")
    out["checkpoints"] = (2 * h * t, "2 h T/N") if setup.offload_checkpoints else (2 * s.layers * h * t,
                                                                                     "2 L h T/N")
    per_token = 9 * h + 3 * k + (0 if setup.tiled_mlp else 4 * i)
    out["layer"] = (4 * per_token * t, "4 (9h + 3k) T/N" if setup.tiled_mlp else "4 (9h + 3k + 4I) T/N")
    out["logits"] = (8 * setup.logits_chunk * s.vocab, "8 c V")
    out["gathered hidden"] = (6 * h * tokens, "6 h T") if setup.gathered_hidden else (0.0, "0")
    return out


def total(shape: Shape, tokens: int, n: int, setup: Setup) -> float:
    """Bytes per GPU: the sum of :func:`terms`."""
    return sum(b for b, _ in terms(shape, tokens, n, setup).values())


def max_tokens(shape: Shape, n: int, setup: Setup, budget: float = H100_BYTES) -> int:
    """The longest row (a multiple of 1024 tokens x ``n``) whose :func:`total` fits ``budget`` bytes per GPU."""
    step = 1024 * n
    lo = 0
    hi = step
    while total(shape, hi, n, setup) <= budget:
        lo, hi = hi, hi * 2
    while hi - lo > step:
        mid = (lo + hi) // 2 // step * step
        lo, hi = (mid, hi) if total(shape, mid, n, setup) <= budget else (lo, mid)
    return lo


ALST_CHECK: tuple[tuple[int, int], ...] = ((1, 500_000), (8, 3_700_000))
"""DeepSpeed ALST's published maxima for Llama-3-8B on 80 GB H100s: (GPUs, tokens per row)."""
LENGTHS = (65536, 131072, 524288)
"""The table's row lengths: 64K, 128K, 512K."""
DEGREES = (1, 2, 4, 8)
"""The table's sequence-parallel degrees."""
COMMAND = ("torchrun --nproc_per_node {n} -m repro train --model $LLAMA3_8B --method {method} --target {t} "
           "--data folder:$TEXTS --profile paper --deepspeed configs/deepspeed_zero3.json "
           "--gradient-checkpointing --sequence-parallel {n}")
"""The command line of a table row (one node, ``n`` GPUs; ``--method`` any of the eight)."""


TIGHT = 5 * GIB
"""A total that leaves less than this free is ``tight``: the CUDA context, fragmentation and communication buffers
the formulas leave out take a few GiB."""


def _gib(b: float) -> str:
    return f"{b / GIB:.1f}"


def table(shape: Shape = LLAMA3_8B, setup: Setup = THIS_REPO, budget: float = H100_BYTES) -> str:
    """The markdown of ``docs/sequence_parallel_memory.md``: per GPU, every term with its formula, the total,
    whether it fits ``budget`` bytes (an 80 GB H100), the command line; then the check against ALST's published
    figures."""
    names = list(terms(shape, LENGTHS[0], 1, setup))
    lines = [
        "# Sequence parallelism: memory per GPU on paper (Llama-3-8B)",
        "",
        f"Written by `python -m repro.parallel.memory` (formulas: `repro/parallel/memory.py`). Llama-3-8B: "
        f"L = {shape.layers}, h = {shape.hidden}, k = {shape.kv}, I = {shape.intermediate}, V = {shape.vocab}, "
        f"P = {shape.params / 1e9:.2f}B, P_layer = {shape.layer_params / 1e6:.0f}M; c = {setup.logits_chunk}. "
        f"GiB per GPU, one row of T tokens over N GPUs (data parallelism 1), setup: {setup.name}. The formulas "
        "leave out the CUDA context, fragmentation and communication buffers (a few GiB).",
        "",
        "| T | N | " + " | ".join(f"{n} ({terms(shape, LENGTHS[0], 2, setup)[n][1]})" for n in names)
        + " | total | fits 80 GB | command |",
        "|" + "---|" * (len(names) + 5),
    ]
    for t in LENGTHS:
        for n in DEGREES:
            tm = terms(shape, t, n, setup)
            tot = sum(b for b, _ in tm.values())
            fits = tot <= budget
            verdict = "no" if not fits else "tight" if budget - tot < TIGHT else "yes"
            lines.append(f"| {t // 1024}K | {n} | " + " | ".join(_gib(tm[k][0]) for k in names)
                         + f" | {_gib(tot)} | {verdict} | "
                         + (f"`--nproc_per_node {n} --target {t} --sequence-parallel {n}`" if fits else "-") + " |")
    lines += ["", "A row's command line (one node of N GPUs; `--method` any of the eight; the table's last column "
              "gives the varying part):", "", "```bash", COMMAND.format(n="N", method="flt", t="T"), "```", "",
              "With data parallelism as well (DP x N GPUs, DP rows per step), ZeRO-3 partitions the weights, "
              "gradients and optimizer over all DP x N GPUs, so those columns shrink by DP; the rest stay.", "",
              "The table is one forward and backward of a row: FLT, PoSE, RPES, LongRecipe, ProLong and LongCE (its "
              "short windows run without gradient, a share of them per rank). Self-distillation keeps both views "
              "alive until its backward (the checkpoints and gathered hidden states twice); CDT adds the full rows' "
              "embedding gradient (`4 h T`, fp32) and a detection pass whose activations are freed before the "
              "training pass.", "",
              "## Check against DeepSpeed ALST's published figures", "",
              f"The same formulas with ALST's settings ({ALST.name}): the longest row that fits an 80 GB GPU, "
              "against the longest ALST reports for Llama-3-8B on 80 GB H100s.", "",
              "| GPUs | published | these formulas | ratio |", "|---|---|---|---|"]
    for n, published in ALST_CHECK:
        got = max_tokens(shape, n, ALST, budget)
        lines.append(f"| {n} | {published / 1e6:.2f}M | {got / 1e6:.2f}M | {got / published:.2f} |")
    lines += ["", "With this repo's setup the same formulas give "
              + ", ".join(f"{max_tokens(shape, n, setup, budget) // 1024}K at N = {n}" for n in DEGREES)
              + ": the activation checkpoints (`2 L h T/N`) and the recomputed layer's MLP (`16 I T/N`) are what "
              "ALST moves off the GPU or tiles, and the gathered hidden states (`6 h T`) are the price of "
              "computing every method's objective on the full rows.", ""]
    return "\n".join(lines)


DOC = Path("docs") / "sequence_parallel_memory.md"
"""Where the table lives in the repository."""


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro.parallel.memory", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--write", default=None, metavar="PATH", help=f"write the table there (e.g. {DOC}); "
                                                                  "default: print it")
    args = ap.parse_args(argv)
    text = table()
    if args.write:
        atomic_write_text(Path(args.write), text)
        print(f"wrote {args.write}")
    else:
        print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
