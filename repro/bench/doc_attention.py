"""Document-masked attention's cost (PL-Tab15): tokens/s of a training step on packed rows of short documents,
by how attention is masked (ProLong App. A.3, Table 15: document masking is cheaper than full attention with a
varlen kernel).

Arms (:data:`DOC_ATTENTION_ARMS`), on the same tokens:

- ``full``: one document per row (positions ``0..T-1``, no mask): plain causal sdpa, the reference;
- ``doc_dense``: the packed documents with their restarting positions, sdpa: transformers builds the dense
  (T, T) block-diagonal mask and the kernel computes the masked-out blocks too;
- ``doc_varlen``: the same rows with ``sdpa_varlen`` (:mod:`repro.attention.doc_masked`): each document's block
  alone.

A step is :func:`repro.train.clm_step` (the trainer's forward and chunked loss) and its backward, on a copy of the
model per arm; no optimizer step, so the arms keep the same weights and the document-masked arms' losses must
agree (``loss``). Arms run in interleaved rounds (:func:`repro.timing.interleaved_rounds`), so the
machine's noise hits them alike; ratios are tokens/s against ``full`` within the run. Run it with
``python -m repro.bench.doc_attention``.

Measured (tiny profile: 3 layers, width 128, 4 heads; 8192 tokens a step, documents of 50-400 tokens, one
thread, 5 rounds, a shared 2-core CPU): rows of 1024 tokens (4.5 documents a row): ``doc_dense`` 0.74x,
``doc_varlen`` 1.16x of ``full``'s tokens/s; rows of 4096 (18 documents a row): 0.49x and 1.95x. The dense mask
costs more than no mask at all; computing each document alone saves what the masked-out blocks cost, more as rows
hold more documents. The two masked arms' losses agreed to the printed 6 decimals.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from dataclasses import asdict, dataclass

import numpy as np
import torch

from repro.io import atomic_write_json

DOC_ATTENTION_ARMS: dict[str, tuple[str, bool]] = {"full": ("sdpa", False), "doc_dense": ("sdpa", True),
                                                   "doc_varlen": ("sdpa_varlen", True)}
"""Arm -> (attention implementation, whether the rows keep their documents)."""


@dataclass(frozen=True)
class DocAttentionConfig:
    """What the benchmark runs."""

    lengths: tuple[int, ...] = (1024, 4096)
    """Row lengths (tokens), one table block each."""
    tokens_per_step: int = 8192
    """Tokens per step (rows = tokens_per_step // length, at least 1)."""
    doc_lengths: tuple[int, int] = (50, 400)
    """Min and max document length (uniform), packed greedily; a row's tail that fits no next document is
    padding, its own document."""
    steps: int = 5
    """Timed rounds (every arm once per round)."""
    warmup: int = 1
    """Untimed rounds first."""
    threads: int | None = 1
    """torch's CPU threads during the run (restored after); None leaves them."""
    seed: int = 0
    """Seed of the documents' lengths and tokens."""


def packed_rows(length: int, rows: int, doc_lengths: tuple[int, int], vocab: int,
                rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """``rows`` rows of ``length`` tokens packed from random documents (:func:`repro.data.packing.pack_rows`):
    ``input_ids``, ``position_ids`` (restarting per document), ``doc_ids`` and ``weights``."""
    from repro.data.packing import lm_segment, pack_rows

    lo, hi = doc_lengths
    if not 1 <= lo <= hi <= length:
        raise ValueError(f"doc_lengths={doc_lengths}; allowed: 1 <= min <= max <= length={length}")
    n_docs = rows * length // lo + 1
    segs = [lm_segment(rng.integers(3, vocab, int(rng.integers(lo, hi + 1)))) for _ in range(n_docs)]
    packed = pack_rows(segs, length, pad_id=0)
    return {k: torch.as_tensor(packed[k][:rows]) for k in ("input_ids", "position_ids", "doc_ids", "weights")}


def _one_document(batch: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    B, T = batch["input_ids"].shape
    return {"input_ids": batch["input_ids"], "position_ids": torch.arange(T).expand(B, T).clone(),
            "weights": batch["weights"]}


def measure_doc_attention(model: torch.nn.Module, cfg: DocAttentionConfig = DocAttentionConfig(),
                          progress: bool = True) -> dict[int, dict[str, dict]]:
    """Per row length, per arm of :data:`DOC_ATTENTION_ARMS`: ``{"seconds": [...], "seconds_per_step": median,
    "tokens_per_s", "ratio": tokens/s over full's, "loss", "batch": [B, T], "docs_per_row"}``. ``model`` is not
    changed (every arm runs on its own copy)."""
    if cfg.steps < 1 or cfg.warmup < 0 or cfg.tokens_per_step < 1 or not cfg.lengths or \
            (cfg.threads is not None and cfg.threads < 1):
        raise ValueError(f"steps={cfg.steps}, warmup={cfg.warmup}, tokens_per_step={cfg.tokens_per_step}, "
                         f"lengths={cfg.lengths}, threads={cfg.threads}; allowed: steps >= 1, warmup >= 0, "
                         "tokens_per_step >= 1, at least one length, threads >= 1 or None")
    vocab = model.get_input_embeddings().weight.shape[0]
    rng = np.random.default_rng(cfg.seed)
    return {length: measure_rows(model, packed_rows(length, max(cfg.tokens_per_step // length, 1), cfg.doc_lengths,
                                                    vocab, rng),
                                 cfg.steps, cfg.warmup, cfg.threads, progress, f"PL-Tab15 T={length}")
            for length in cfg.lengths}


def measure_rows(model: torch.nn.Module, packed: dict[str, torch.Tensor], steps: int = 5, warmup: int = 1,
                 threads: int | None = 1, progress: bool = True, desc: str = "PL-Tab15") -> dict[str, dict]:
    """The arms of :data:`DOC_ATTENTION_ARMS` on one batch of packed rows (``input_ids``, ``position_ids`` restarting
    per document, ``doc_ids``, ``weights``), interleaved over ``warmup + steps`` rounds; per arm ``{"seconds",
    "seconds_per_step", "tokens_per_s", "ratio" (over full's), "loss", "batch", "docs_per_row"}``."""
    from repro.attention.doc_masked import check_attn_implementation
    from repro.timing import interleaved_rounds
    from repro.train import clm_step

    models = {}
    for arm, (impl, _) in DOC_ATTENTION_ARMS.items():
        m = copy.deepcopy(model).train()
        m.set_attn_implementation(check_attn_implementation(impl))
        models[arm] = m
    batches = {arm: packed if docs else _one_document(packed) for arm, (_, docs) in DOC_ATTENTION_ARMS.items()}
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        def step(arm: str, r: int) -> tuple[float, float]:
            m = models[arm]
            t = time.perf_counter()
            loss, _ = clm_step(m, batches[arm], False)
            m.zero_grad(set_to_none=True)
            loss.backward()
            return time.perf_counter() - t, float(loss.detach())

        times = interleaved_rounds(list(DOC_ATTENTION_ARMS), steps, warmup, step, desc, progress)
    finally:
        torch.set_num_threads(previous)
    B, T = packed["input_ids"].shape
    docs = float((packed["position_ids"] == 0).sum()) / B
    rows = {}
    for arm, got in times.items():
        secs = [s for s, _ in got]
        med = statistics.median(secs)
        rows[arm] = {"seconds": secs, "seconds_per_step": med, "tokens_per_s": B * T / med,
                     "loss": got[-1][1], "batch": [int(B), int(T)], "docs_per_row": docs}
    for r in rows.values():
        r["ratio"] = r["tokens_per_s"] / rows["full"]["tokens_per_s"]
    return rows


def markdown(results: dict[int, dict[str, dict]]) -> str:
    """The results as a markdown table (tokens/s and the ratio to ``full`` per row length and arm)."""
    head = ("| length | rows | docs/row | arm | s/step | tokens/s | vs full | loss |\n"
            "|---:|---:|---:|---|---:|---:|---:|---:|\n")
    return head + "\n".join(
        f"| {length} | {r['batch'][0]} | {r['docs_per_row']:.1f} | {arm} | {r['seconds_per_step']:.3f} | "
        f"{r['tokens_per_s']:.0f} | {r['ratio']:.2f}x | {r['loss']:.6f} |"
        for length, arms in results.items() for arm, r in arms.items())


def main(argv: list[str] | None = None) -> int:
    from repro.models import build_tiny
    from repro.profiles import PROFILES, get_profile

    ap = argparse.ArgumentParser(prog="python -m repro.bench.doc_attention", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="tiny", help="the profile whose tiny model is timed (random weights)")
    ap.add_argument("--lengths", default="1024,4096", help="comma-separated row lengths")
    ap.add_argument("--tokens", type=int, default=DocAttentionConfig.tokens_per_step, help="tokens per step")
    ap.add_argument("--steps", type=int, default=DocAttentionConfig.steps)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    if args.profile not in PROFILES or get_profile(args.profile).model.pretrained:
        print(f"error: profile {args.profile!r}; allowed: a profile that builds its model "
              f"({', '.join(p for p in PROFILES if not get_profile(p).model.pretrained)})", file=sys.stderr)
        return 2
    p = get_profile(args.profile)
    cfg = DocAttentionConfig(lengths=tuple(int(x) for x in args.lengths.split(",") if x),
                             tokens_per_step=args.tokens, steps=args.steps, threads=args.threads)
    model = build_tiny(p.model, p.tokenizer.vocab_size, max(cfg.lengths), 0, 1, 2)
    results = measure_doc_attention(model, cfg)
    print(markdown(results))
    if args.json:
        atomic_write_json(args.json, {"config": asdict(cfg), "profile": args.profile, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
