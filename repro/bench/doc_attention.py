"""Document-masked attention's cost (PL-Tab15): tokens/s of a training step on packed rows of short documents,
by how attention is masked (ProLong App. A.3, Table 15: document masking is cheaper than full attention with a
varlen kernel).

Arms (:data:`DOC_ATTENTION_ARMS`; :func:`available_arms` says which run on a device), on the same tokens:

- ``full``: one document per row (positions ``0..T-1``, no mask): plain causal sdpa, the reference;
- ``doc_dense``: the packed documents with their restarting positions, sdpa: transformers builds the dense
  (T, T) block-diagonal mask and the kernel computes the masked-out blocks too;
- ``doc_varlen``: the same rows with ``sdpa_varlen`` (:mod:`repro.attention.doc_masked`): each document's block
  alone;
- ``doc_flex``: the same rows with ``flex_doc`` (:mod:`repro.attention.flex`): flex attention with a block mask
  per document. It has no backward on the CPU (torch 2.13), so there only its forward pass is timed;
- ``doc_flash``: the same rows with flash-attn's varlen kernel (``flash_attention_2``), on CUDA with flash-attn.

A step is :func:`repro.train.clm_step` (the trainer's forward and chunked loss) and its backward, on a copy of the
model per arm; no optimizer step, so the arms keep the same weights and the document-masked arms' losses must
agree (``loss``). Each round also times every arm's forward pass alone (``torch.no_grad``), so an arm that cannot
train on the device is still compared, forward against forward. Arms run in interleaved rounds
(:func:`repro.timing.interleaved_rounds`), so the machine's noise hits them alike, each timed step right after an
untimed one of its own arm (``settle``); ratios are tokens/s against
``full`` within the run. Run it with ``python -m repro.bench.doc_attention`` (``--device``, ``--dtype``,
``--arms``).

Measured (tiny profile: 3 layers, width 128, 4 heads; 8192 tokens a step, documents of 50-400 tokens, one
thread, 5 rounds, a shared 2-core CPU; before ``settle``), training step / forward alone, as a fraction of
``full``'s tokens/s:

| rows | documents a row | ``doc_dense`` | ``doc_varlen`` | ``doc_flex`` |
|---|---:|---|---|---|
| 8 x 1024 | 4.5 | 0.82x / 0.78x | 1.10x / 1.05x | no backward / 0.78x |
| 2 x 4096 | 18 | 0.54x / 0.47x | 1.64x / 1.45x | no backward / 1.10x |

(an earlier run of the training steps alone: 0.74x and 1.16x at 1024, 0.49x and 1.95x at 4096). The dense mask
costs more than no mask at all; computing each document alone saves what the masked-out blocks cost, more as rows
hold more documents. Flex attention's block mask saves the same blocks, but its compiled CPU kernel was slower than
per-document sdpa, and it cannot train on the CPU. The masked arms' losses agreed to the printed 6 decimals.
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

from repro import accel  # the module: flash_attn_available looked up at each call (tests stand in)
from repro.attention import flex  # the module, as accel
from repro.attention.doc_masked import check_attn_implementation
from repro.data.packing import lm_segment, pack_rows
from repro.devices import model_device, resolve_device, resolve_dtype
from repro.io import atomic_write_json
from repro.models import build_tiny
from repro.profiles import PROFILES, get_profile
from repro.timing import interleaved_rounds
from repro.train import clm_step

DOC_ATTENTION_ARMS: dict[str, tuple[str, bool]] = {"full": ("sdpa", False), "doc_dense": ("sdpa", True),
                                                   "doc_varlen": ("sdpa_varlen", True), "doc_flex": ("flex_doc", True),
                                                   "doc_flash": ("flash_attention_2", True)}
"""Arm -> (attention implementation, whether the rows keep their documents); :func:`available_arms` says which
run on a device."""


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
    arms: tuple[str, ...] | None = None
    """Arms of :data:`DOC_ATTENTION_ARMS` to run (``full`` among them); None: :func:`available_arms` on the model's
    device."""
    settle: int = 1
    """Untimed steps of each arm right before its timed one in every timed round
    (:func:`repro.timing.interleaved_rounds`): on a CPU a forward right after another arm's step ran 4-10% slower."""


def packed_rows(length: int, rows: int, doc_lengths: tuple[int, int], vocab: int,
                rng: np.random.Generator) -> dict[str, torch.Tensor]:
    """``rows`` rows of ``length`` tokens packed from random documents (:func:`repro.data.packing.pack_rows`):
    ``input_ids``, ``position_ids`` (restarting per document), ``doc_ids`` and ``weights``."""
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
    """Per row length, per arm (``cfg.arms``): :func:`measure_rows`' measures (``"tokens_per_s"`` and ``"ratio"``
    of the training step, ``"forward_tokens_per_s"`` and ``"forward_ratio"`` of the forward alone, ``"loss"``,
    ``"batch": [B, T]``, ``"docs_per_row"``, ...). ``model`` is not changed (every arm runs on its own copy)."""
    if cfg.steps < 1 or cfg.warmup < 0 or cfg.tokens_per_step < 1 or not cfg.lengths or \
            (cfg.threads is not None and cfg.threads < 1):
        raise ValueError(f"steps={cfg.steps}, warmup={cfg.warmup}, tokens_per_step={cfg.tokens_per_step}, "
                         f"lengths={cfg.lengths}, threads={cfg.threads}; allowed: steps >= 1, warmup >= 0, "
                         "tokens_per_step >= 1, at least one length, threads >= 1 or None")
    vocab = model.get_input_embeddings().weight.shape[0]
    rng = np.random.default_rng(cfg.seed)
    return {length: measure_rows(model, packed_rows(length, max(cfg.tokens_per_step // length, 1), cfg.doc_lengths,
                                                    vocab, rng),
                                 cfg.steps, cfg.warmup, cfg.threads, progress, f"PL-Tab15 T={length}", cfg.arms,
                                 cfg.settle)
            for length in cfg.lengths}


def available_arms(device: str | torch.device = "cpu") -> tuple[str, ...]:
    """The arms of :data:`DOC_ATTENTION_ARMS` that run on ``device``: ``doc_flex`` where flex attention compiles
    (:func:`repro.attention.flex.flex_compiles`), ``doc_flash`` on CUDA with flash-attn."""
    dev = torch.device(device)
    ok = {"doc_flex": flex.flex_compiles(dev), "doc_flash": dev.type == "cuda" and accel.flash_attn_available()}
    return tuple(a for a in DOC_ATTENTION_ARMS if ok.get(a, True))


def measure_rows(model: torch.nn.Module, packed: dict[str, torch.Tensor], steps: int = 5, warmup: int = 1,
                 threads: int | None = 1, progress: bool = True, desc: str = "PL-Tab15",
                 arms: tuple[str, ...] | None = None, settle: int = 1) -> dict[str, dict]:
    """The arms (``arms``, default :func:`available_arms` on the model's device) on one batch of packed rows
    (``input_ids``, ``position_ids`` restarting per document, ``doc_ids``, ``weights``), interleaved over
    ``warmup + steps`` rounds, each timed step right after ``settle`` untimed ones of its arm
    (:func:`repro.timing.interleaved_rounds`). Each round times, per arm, a forward pass alone (``torch.no_grad``)
    and a training step (forward + backward). Per arm: ``{"seconds", "seconds_per_step", "tokens_per_s", "ratio"
    (over full's), "loss"}`` of the training step (None where the arm cannot train on this device, ``"trains":
    False`` and ``"refused"``: the error's first line), ``{"forward_seconds", "forward_seconds_per_step",
    "forward_tokens_per_s", "forward_ratio", "forward_loss"}`` of the forward alone, ``"batch"`` and
    ``"docs_per_row"``."""
    device = model_device(model)
    arms = available_arms(device) if arms is None else tuple(arms)
    if "full" not in arms or any(a not in DOC_ATTENTION_ARMS for a in arms):
        raise ValueError(f"arms={arms}; allowed: 'full' and any of {', '.join(DOC_ATTENTION_ARMS)}")
    models = {}
    for arm in arms:
        m = copy.deepcopy(model).train()
        m.set_attn_implementation(check_attn_implementation(DOC_ATTENTION_ARMS[arm][0]))
        models[arm] = m
    on = {k: v.to(device) for k, v in packed.items()}
    batches = {arm: on if DOC_ATTENTION_ARMS[arm][1] else _one_document(on) for arm in arms}
    refused: dict[str, str] = {}
    previous = torch.get_num_threads()
    if threads is not None:
        torch.set_num_threads(threads)
    try:
        def step(arm: str, r: int) -> tuple:
            m = models[arm]
            _sync(device)
            t = time.perf_counter()
            with torch.no_grad():
                fwd_loss, _ = clm_step(m, batches[arm], False)
            _sync(device)
            fwd = time.perf_counter() - t
            if arm in refused:
                return fwd, float(fwd_loss), None, None
            t = time.perf_counter()
            try:
                loss, _ = clm_step(m, batches[arm], False)
                m.zero_grad(set_to_none=True)
                loss.backward()
            except NotImplementedError as e:  # e.g. flex attention's backward on the CPU
                refused[arm] = str(e).splitlines()[0]
                return fwd, float(fwd_loss), None, None
            _sync(device)
            return fwd, float(fwd_loss), time.perf_counter() - t, float(loss.detach())

        times = interleaved_rounds(list(arms), steps, warmup, step, desc, progress, settle)
    finally:
        torch.set_num_threads(previous)
    B, T = packed["input_ids"].shape
    docs = float((packed["position_ids"] == 0).sum()) / B
    rows = {}
    for arm, got in times.items():
        fwd = [g[0] for g in got]
        secs = [g[2] for g in got if g[2] is not None]
        med = statistics.median(secs) if secs and arm not in refused else None
        rows[arm] = {"seconds": secs, "seconds_per_step": med, "tokens_per_s": None if med is None else B * T / med,
                     "loss": got[-1][3], "trains": arm not in refused,
                     "forward_seconds": fwd, "forward_seconds_per_step": statistics.median(fwd),
                     "forward_tokens_per_s": B * T / statistics.median(fwd), "forward_loss": got[-1][1],
                     "batch": [int(B), int(T)], "docs_per_row": docs}
        if arm in refused:
            rows[arm]["refused"] = refused[arm]
    for r in rows.values():
        full = rows["full"]
        r["ratio"] = None if r["tokens_per_s"] is None else r["tokens_per_s"] / full["tokens_per_s"]
        r["forward_ratio"] = r["forward_tokens_per_s"] / full["forward_tokens_per_s"]
    return rows


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def markdown(results: dict[int, dict[str, dict]]) -> str:
    """The results as a markdown table (per row length and arm: the training step's and the forward pass's
    tokens/s and ratios to ``full``; "no backward" where the arm cannot train here)."""
    head = ("| length | rows | docs/row | arm | train s/step | train tokens/s | vs full | forward tokens/s | vs full "
            "| loss |\n|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|\n")

    def train(r):
        if r["tokens_per_s"] is None:
            return "no backward | - | -"
        return f"{r['seconds_per_step']:.3f} | {r['tokens_per_s']:.0f} | {r['ratio']:.2f}x"

    return head + "\n".join(
        f"| {length} | {r['batch'][0]} | {r['docs_per_row']:.1f} | {arm} | {train(r)} | "
        f"{r['forward_tokens_per_s']:.0f} | {r['forward_ratio']:.2f}x | {r['forward_loss']:.6f} |"
        for length, arms in results.items() for arm, r in arms.items())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro.bench.doc_attention", description=__doc__.split("\n\n")[0])
    ap.add_argument("--profile", default="tiny", help="the profile whose tiny model is timed (random weights)")
    ap.add_argument("--lengths", default="1024,4096", help="comma-separated row lengths")
    ap.add_argument("--tokens", type=int, default=DocAttentionConfig.tokens_per_step, help="tokens per step")
    ap.add_argument("--steps", type=int, default=DocAttentionConfig.steps)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (auto: CUDA when present)")
    ap.add_argument("--dtype", default="auto", help="auto | float32 | bfloat16 (auto: bfloat16 on CUDA, flash-attn's "
                                                    "dtype; float32 on the CPU)")
    ap.add_argument("--arms", default=None, help=f"comma-separated arms among {', '.join(DOC_ATTENTION_ARMS)} "
                                                 "(default: those available here)")
    ap.add_argument("--json", default=None, help="also write the results to this JSON file")
    args = ap.parse_args(argv)
    if args.profile not in PROFILES or get_profile(args.profile).model.pretrained:
        print(f"error: profile {args.profile!r}; allowed: a profile that builds its model "
              f"({', '.join(p for p in PROFILES if not get_profile(p).model.pretrained)})", file=sys.stderr)
        return 2
    p = get_profile(args.profile)
    cfg = DocAttentionConfig(lengths=tuple(int(x) for x in args.lengths.split(",") if x),
                             tokens_per_step=args.tokens, steps=args.steps, threads=args.threads,
                             arms=tuple(args.arms.split(",")) if args.arms else None)
    try:
        device = resolve_device(args.device)
        dtype = resolve_dtype(args.dtype, device)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    model = build_tiny(p.model, p.tokenizer.vocab_size, max(cfg.lengths), 0, 1, 2).to(device, dtype)
    results = measure_doc_attention(model, cfg)
    print(markdown(results))
    if args.json:
        atomic_write_json(args.json, {"config": asdict(cfg), "profile": args.profile, "results": results})
    return 0


if __name__ == "__main__":
    sys.exit(main())
