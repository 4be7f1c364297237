"""PL-Tab15's reordering: what sorting a step's micro-batches by sum of squared document lengths (ProLong App. A.3,
:mod:`repro.data.balance`) saves data-parallel workers, simulated and on two real processes.

``python -m repro.bench.reorder`` (:func:`run`) does three things on packed steps of realistic documents
(:func:`realistic_steps`: a share of rows are chunks of long documents, the others packed short documents, rows
shuffled; one row per micro-batch, as ProLong's one 64K sequence per device):

1. **fit**: seconds of forward + backward of the tiny Llama on probe micro-batches of varied document structure
   and length, with document-masked attention that computes each document alone (``sdpa_varlen``,
   :mod:`repro.attention.doc_masked`: sdpa on packed rows would compute the dense ``T^2`` mask's blocks), fitted
   to ``a + b * sum(len^2) + c * tokens`` (:func:`repro.bench.reorder_sim.fit_cost_model`);
2. **simulated**: step time on k = 2, 4, 8 workers, unsorted against sorted (and ProLong's per-worker sort), under
   two cost models: the fitted CPU one and ``paper_like`` (attention half of a one-document row's time, as an 8B
   model at 64K; :meth:`~repro.bench.reorder_sim.CostModel.attention_share`);
3. **distributed**: 2 processes (gloo), each running its dealt micro-batches of a step for real (forward +
   backward with ``sdpa_varlen``, ``work="compute"``; or a sleep of the fitted cost, ``work="sleep"``) and
   all-reducing its gradients after each accumulation round; wall seconds per step of every order, the orders
   interleaved in the same processes (:mod:`repro.bench.reorder_dist`, which says what each work can show), with
   ratios to ``unsorted`` and the cost model's prediction.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from typing import Mapping, Sequence

import numpy as np
import torch

from repro.bench.reorder_dist import run_distributed
from repro.bench.reorder_model import MODEL, tiny_model, train_pass
from repro.bench.reorder_sim import ORDERS, CostModel, fit_cost_model, simulate
from repro.data.balance import sum_sq_lengths, tokens
from repro.data.packing import chunk_document, lm_segment, pack_rows
from repro.io import atomic_write_json


def _rows(lengths: Sequence[int], seq_len: int, vocab: int, rng: np.random.Generator, chunk: bool):
    """Documents of ``lengths`` packed into rows; with ``chunk``, cut to the row length first, the full chunks
    first and the last (shorter) chunks after them, packed together."""
    full, rest = [], []
    for n in lengths:
        toks = rng.integers(3, vocab, size=int(n))
        for c in (chunk_document(toks, seq_len) if chunk else [toks]):
            (full if len(c) == seq_len else rest).append(lm_segment(c))
    return pack_rows(full + rest, seq_len, 0)


def realistic_steps(n_steps: int, micro_per_step: int, seq_len: int, rows_per_micro: int = 1,
                    long_share: float = 0.6, short_median: float = 1 / 32, short_sigma: float = 1.0,
                    vocab: int = 256, seed: int = 0) -> list[list[dict[str, np.ndarray]]]:
    """``n_steps`` steps of ``micro_per_step`` micro-batches of ``rows_per_micro`` packed rows of ``seq_len``.

    A ``long_share`` of the rows (ProLong's stage-1 mix: 60% long data) come from long documents (lengths uniform in
    ``[seq_len / 2, 4 seq_len]``, chunked to the row length with :func:`repro.data.packing.chunk_document`, the
    last short chunks packed together); the others pack short documents (log-normal lengths, median
    ``short_median * seq_len``, ``short_sigma``; at most ``seq_len``). Of each kind, ``count`` of the packed rows
    drawn at random; all rows shuffled, then grouped in order."""
    if not (0 <= long_share <= 1 and n_steps >= 1 and micro_per_step >= 1 and rows_per_micro >= 1 and seq_len >= 2):
        raise ValueError(f"long_share={long_share}, n_steps={n_steps}, micro_per_step={micro_per_step}, "
                         f"rows_per_micro={rows_per_micro}, seq_len={seq_len}; allowed: 0 <= long_share <= 1, "
                         "counts >= 1, seq_len >= 2")
    rng = np.random.default_rng(seed)
    n_rows = n_steps * micro_per_step * rows_per_micro
    n_long = int(round(long_share * n_rows))
    parts = []
    for count, chunk in ((n_long, True), (n_rows - n_long, False)):
        if not count:
            continue
        if chunk:
            draw = lambda n: rng.integers(seq_len // 2, 4 * seq_len + 1, size=n)  # noqa: E731
        else:
            draw = lambda n: np.clip(np.rint(rng.lognormal(np.log(short_median * seq_len), short_sigma, n)),  # noqa: E731
                                     2, seq_len).astype(np.int64)
        lengths: list[int] = []
        while True:
            while sum(lengths) < 1.05 * count * seq_len + seq_len:
                lengths += list(draw(max(count, 8)))
            got = _rows(lengths, seq_len, vocab, rng, chunk)
            if got["input_ids"].shape[0] >= count:
                break
            lengths += list(draw(max(count, 8)))
        keep = rng.permutation(got["input_ids"].shape[0])[:count]
        parts.append({k: v[keep] for k, v in got.items()})
    rows = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
    perm = rng.permutation(n_rows)
    rows = {k: v[perm] for k, v in rows.items()}
    per_step = micro_per_step * rows_per_micro
    return [[{k: v[s * per_step + m * rows_per_micro:s * per_step + (m + 1) * rows_per_micro]
              for k, v in rows.items()} for m in range(micro_per_step)] for s in range(n_steps)]


def probe_batches(seq_len: int, vocab: int = 256, seed: int = 0) -> list[dict[str, np.ndarray]]:
    """One-row micro-batches for the cost fit: rows of ``seq_len / 4``, ``/ 2`` and ``seq_len`` tokens, each as one
    document and as documents of 1/2, 1/8 and 1/32 of the row (sum of squares and tokens both vary)."""
    rng = np.random.default_rng(seed)
    out = []
    for length in (seq_len // 4, seq_len // 2, seq_len):
        for parts in (1, 2, 8, 32):
            n = max(length // parts, 2)
            out.append(_rows([n] * (length // n), length, vocab, rng, False))
    return out


def measure_cost_rounds(model, batches: Sequence[Mapping], repeats: int = 3, warmup: int = 1) -> list[list[float]]:
    """Per batch, the seconds of :func:`~repro.bench.reorder_model.train_pass` in each of ``repeats`` timed rounds,
    the batches interleaved in each of ``warmup + repeats`` rounds (the first ``warmup`` untimed)."""
    if repeats < 1 or warmup < 0:
        raise ValueError(f"repeats={repeats}, warmup={warmup}; allowed: repeats >= 1, warmup >= 0")
    times: list[list[float]] = [[] for _ in batches]
    for r in range(warmup + repeats):
        for i, b in enumerate(batches):
            t0 = time.perf_counter()
            train_pass(model, b)
            dt = time.perf_counter() - t0
            if r >= warmup:
                times[i].append(dt)
    model.zero_grad(set_to_none=True)
    return times


def measure_costs(model, batches: Sequence[Mapping], repeats: int = 3, warmup: int = 1) -> list[float]:
    """Median seconds per batch over the rounds of :func:`measure_cost_rounds`."""
    return [statistics.median(t) for t in measure_cost_rounds(model, batches, repeats, warmup)]


def fit_costs(model, seq_len: int, repeats: int = 3, seed: int = 0) -> dict:
    """:func:`measure_cost_rounds` on :func:`probe_batches`, fitted to the per-probe medians: ``{"model":
    CostModel, "points": [{"sum_sq", "tokens", "seconds", "fitted"}], "r2", "rounds": [{"a", "b", "c"}]}``;
    ``rounds`` holds one fit per timed round (that round's seconds alone), whose spread is the fit's noise."""
    probes = probe_batches(seq_len, model.config.vocab_size, seed)
    per_round = measure_cost_rounds(model, probes, repeats)
    secs = [statistics.median(t) for t in per_round]
    sq, tok = [sum_sq_lengths(p) for p in probes], [tokens(p) for p in probes]
    cost = fit_cost_model(sq, tok, secs)
    fitted = [cost(s, t) for s, t in zip(sq, tok)]
    ss = float(np.sum((np.asarray(secs) - np.mean(secs)) ** 2))
    r2 = 1 - float(np.sum((np.asarray(secs) - fitted) ** 2)) / ss if ss > 0 else 1.0
    rounds = [vars(fit_cost_model(sq, tok, [t[r] for t in per_round])) for r in range(repeats)]
    return {"model": cost, "r2": r2, "rounds": rounds,
            "points": [{"sum_sq": s, "tokens": t, "seconds": y, "fitted": f}
                       for s, t, y, f in zip(sq, tok, secs, fitted)]}


def simulate_workers(steps, costs: Mapping[str, CostModel], workers: Sequence[int] = (2, 4, 8)) -> dict:
    """``{cost name: {k: simulate(...)}}`` (:func:`repro.bench.reorder_sim.simulate`, every order)."""
    return {name: {k: simulate(steps, k, cost) for k in workers} for name, cost in costs.items()}


def run(seq_len: int = 2048, n_steps: int = 16, micro_per_step: int = 64, workers: Sequence[int] = (2, 4, 8),
        long_share: float = 0.6, share: float = 0.5, fit: bool = True, works: Sequence[str] = ("sleep", "compute"),
        dist_steps: int = 3, dist_rounds: int = 4, dist_repeats: int = 3, threads: int = 1, seed: int = 0) -> dict:
    """The whole benchmark (module docstring) on rows of ``seq_len`` tokens: ``n_steps`` simulated steps of
    ``micro_per_step`` one-row micro-batches on each of ``workers``; ``dist_steps`` steps of ``2 * dist_rounds``
    micro-batches on 2 processes for each of ``works`` (``sleep`` needs ``fit``), ``dist_repeats`` times.
    Returns ``{"config", "fit", "simulated": {cost model: {k: {order: {"total", "ratio"}}}}, "distributed":
    {work: ...}}`` (:func:`repro.bench.reorder_dist.run_distributed`); ``paper_like`` costs are in units of one
    token's linear-layer time, ``cpu_fitted`` in seconds."""
    if "sleep" in works and not fit:
        raise ValueError("works with 'sleep' needs fit=True (the sleeps are the fitted costs)")
    previous = torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        out: dict = {"config": dict(seq_len=seq_len, n_steps=n_steps, micro_per_step=micro_per_step,
                                    workers=list(workers), long_share=long_share, paper_like_share=share,
                                    works=list(works), dist_steps=dist_steps, dist_rounds=dist_rounds,
                                    dist_repeats=dist_repeats, threads=threads, model=MODEL)}
        costs = {"paper_like": CostModel.attention_share(seq_len, share)}
        if fit:
            got = fit_costs(tiny_model(seed, max_positions=seq_len), seq_len, seed=seed)
            out["fit"] = {**got, "model": vars(got["model"])}
            costs["cpu_fitted"] = got["model"]
        steps = realistic_steps(n_steps, micro_per_step, seq_len, long_share=long_share, seed=seed)
        sim = simulate_workers(steps, costs, workers)
        out["simulated"] = {name: {k: {o: {kk: v for kk, v in r[o].items() if kk != "seconds"}
                                       for o in (*ORDERS, "ideal")} for k, r in per.items()}
                            for name, per in sim.items()}
        dsteps = realistic_steps(dist_steps, 2 * dist_rounds, seq_len, long_share=long_share, seed=seed + 1)
        out["distributed"] = {work: run_distributed(dsteps, 2, work, costs.get("cpu_fitted"), repeats=dist_repeats,
                                                    seed=seed, threads=threads) for work in works}
        return out
    finally:
        torch.set_num_threads(previous)


def markdown(result: Mapping) -> str:
    """The simulated and real ratios as a markdown table (ratio: step time / unsorted's)."""
    lines = ["| source | workers | unsorted step | sorted / unsorted | sorted per worker / unsorted | "
             "ideal / unsorted |", "|---|---:|---:|---:|---:|---:|"]
    for name, per in result["simulated"].items():
        for k, r in per.items():
            lines.append(f"| simulated {name} | {k} | {r['unsorted']['total'] / result['config']['n_steps']:.4g} | "
                         f"{r['sorted']['ratio']:.3f} | {r['sorted_per_worker']['ratio']:.3f} | "
                         f"{r['ideal']['ratio']:.3f} |")
    for work, d in result.get("distributed", {}).items():
        arms = d["arms"]
        per = arms.get("sorted_per_worker", {}).get("ratio", float("nan"))
        lines.append(f"| 2 processes, {work} (predicted) | 2 | {arms['unsorted']['median_seconds']:.4g} s | "
                     f"{arms['sorted']['ratio']:.3f} ({arms['sorted']['predicted_ratio']:.3f}) | {per:.3f} "
                     f"({arms.get('sorted_per_worker', {}).get('predicted_ratio', float('nan')):.3f}) | "
                     f"({d['ideal_ratio']:.3f}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro.bench.reorder", description=__doc__.split("\n\n")[0])
    ap.add_argument("--seq-len", type=int, default=2048, help="row length")
    ap.add_argument("--steps", type=int, default=16, help="simulated steps")
    ap.add_argument("--micro", type=int, default=64, help="micro-batches (rows) per simulated step")
    ap.add_argument("--long-share", type=float, default=0.6, help="share of rows cut from long documents")
    ap.add_argument("--works", default="sleep,compute", help="the 2 processes' work: sleep, compute or both")
    ap.add_argument("--dist-steps", type=int, default=3)
    ap.add_argument("--dist-rounds", type=int, default=4, help="accumulation rounds per step of the 2 processes")
    ap.add_argument("--dist-repeats", type=int, default=3)
    ap.add_argument("--no-fit", action="store_true", help="only the paper-like cost model (and no sleep work)")
    ap.add_argument("--json", default=None, help="also write the result to this JSON file")
    args = ap.parse_args(argv)
    works = tuple(w for w in args.works.split(",") if w)
    result = run(args.seq_len, args.steps, args.micro, long_share=args.long_share, fit=not args.no_fit,
                 works=works, dist_steps=args.dist_steps, dist_rounds=args.dist_rounds,
                 dist_repeats=args.dist_repeats)
    print(markdown(result))
    if args.json:
        atomic_write_json(args.json, result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
