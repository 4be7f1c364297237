"""Pieces of ``python -m repro bench gpu``: the time budget, guarded calls (an arm that fails is a row with its
error), peak memory, and two of its parts: the IG scores' memory and time (memory-linear against the direct Eq. 1)
and generation tokens/s (our greedy generator against HF ``generate``)."""

from __future__ import annotations

import gc
import resource
import time
from typing import Any, Callable

import torch

from repro.analysis.ig import naive_token_scores, token_scores
from repro.analysis.ig_memory import proc_status_kib
from repro.bench.gpu_shapes import Shape, sync
from repro.generate import greedy_ids

IG_METHODS = ("memory-linear (token_scores)", "naive Eq. 1 (naive_token_scores)")
"""The IG part's two methods (:mod:`repro.analysis.ig`)."""
GENERATORS = ("ours (repro.generate.greedy_ids)", "HF generate")


class Budget:
    """Seconds left of the run's time budget; what was skipped for it (``skipped``)."""

    def __init__(self, seconds: float):
        self.seconds = float(seconds)
        self.start = time.monotonic()
        self.skipped: list[str] = []

    def elapsed(self) -> float:
        return time.monotonic() - self.start

    def left(self) -> float:
        return self.seconds - self.elapsed()

    def skip(self, what: str, why: str = "") -> str:
        """Record ``what`` as skipped; returns its row status."""
        self.skipped.append(what)
        return f"skipped (budget{': ' + why if why else ''})"


def free_memory() -> None:
    """Collect garbage and return cached CUDA blocks (after a failed arm or between parts)."""
    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


def error_status(e: BaseException) -> str:
    """A row's status for an exception: ``out of memory: ...`` or ``error: Type: message`` (first line, cut)."""
    text = (str(e).strip().splitlines() or [""])[0][:200]
    if isinstance(e, (torch.OutOfMemoryError, MemoryError)) or "out of memory" in text.lower() or \
            "can't allocate memory" in text.lower():
        return f"out of memory: {text}"
    return f"error: {type(e).__name__}: {text}"


def guarded(fn: Callable[..., Any], *args, **kwargs) -> tuple[Any, str]:
    """``(fn(*args, **kwargs), "ok")``, or ``(None, status)`` when it raised (memory freed after)."""
    try:
        return fn(*args, **kwargs), "ok"
    except Exception as e:  # every arm guarded: OOM, a missing kernel, a shape a method refuses
        status = error_status(e)
    free_memory()
    return None, status


def _status_kib(field: str) -> int:
    return proc_status_kib((field,))[field]


class PeakMemory:
    """Peak memory of a call: CUDA's ``max_memory_allocated`` on a GPU; on the CPU the resident high-water mark
    (``VmHWM``, reset through ``/proc/self/clear_refs``; the process's ``ru_maxrss`` where that cannot be reset)."""

    def __init__(self, device: torch.device):
        self.device = device
        self.kind = "CUDA max_memory_allocated" if device.type == "cuda" else "CPU resident high-water (VmHWM)"
        self.base = 0

    def start(self) -> None:
        if self.device.type == "cuda":
            sync(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.base = torch.cuda.memory_allocated(self.device)
            return
        try:
            with open("/proc/self/clear_refs", "w") as f:
                f.write("5")
            self.base = _status_kib("VmRSS") * 1024
        except OSError:
            self.kind = "CPU resident peak since the process started (ru_maxrss)"
            self.base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    def peak(self) -> int:
        """Bytes at the peak since :meth:`start`."""
        if self.device.type == "cuda":
            sync(self.device)
            return torch.cuda.max_memory_allocated(self.device)
        if self.kind.startswith("CPU resident high-water"):
            return _status_kib("VmHWM") * 1024
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def doubling(start: int, stop: int) -> list[int]:
    """``start, 2 start, 4 start, ...`` up to ``stop`` (inclusive)."""
    out = [start]
    while out[-1] * 2 <= stop:
        out.append(out[-1] * 2)
    return out


def ig_rows(model, shape: Shape, lengths: list[int], answer_tokens: int, device: torch.device, budget: Budget,
            seed: int = 0, log=print) -> list[dict]:
    """IG scores of one random sequence per length, memory-linear and naive, each until its first failure (the
    later lengths: ``not attempted``): peak memory, its rise over the memory before the call, seconds."""
    fns = dict(zip(IG_METHODS, (token_scores, naive_token_scores)))
    model.eval()
    mem = PeakMemory(device)
    failed: dict[str, int] = {}
    rows = []
    for n in lengths:
        ids = torch.randint(3, shape.vocab, (1, n), generator=torch.Generator().manual_seed(seed + n)).to(device)
        answer = list(range(n - min(answer_tokens, n - 1), n))
        for method, fn in fns.items():
            row = {"model": shape.name, "method": method, "length": n, "peak MiB": None, "rise MiB": None,
                   "seconds": None, "memory": mem.kind}
            if method in failed:
                row["status"] = f"not attempted (failed at {failed[method]})"
            elif budget.left() <= 0:
                row["status"] = budget.skip(f"IG {method} at {n}")
            else:
                mem.start()
                t0 = time.perf_counter()
                out, status = guarded(fn, model, ids, answer)
                sync(device)
                row["status"] = status
                if status == "ok":
                    peak = mem.peak()
                    rise = max(peak - mem.base, 0)
                    row.update({"peak MiB": round(peak / 2 ** 20, 1), "rise MiB": round(rise / 2 ** 20, 1),
                                "seconds": round(time.perf_counter() - t0, 3)})
                else:
                    failed[method] = n
                del out
                free_memory()
            rows.append(row)
            log(f"IG {shape.name} {method} {n}: {row['status']} {row['peak MiB'] or ''} MiB {row['seconds'] or ''} s")
        if len(failed) == len(fns):
            break
    return rows


@torch.no_grad()
def _generation(model, vocab: int, length: int, batch: int, new_tokens: int, reps: int, device: torch.device,
                seed: int) -> dict[str, dict]:
    ids = torch.randint(3, vocab, (batch, length), generator=torch.Generator().manual_seed(seed)).to(device)
    mask = torch.ones_like(ids)
    gens = {GENERATORS[0]: lambda n: greedy_ids(model, ids, mask, n, None, 0),
            GENERATORS[1]: lambda n: model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n,
                                                    min_new_tokens=n, do_sample=False, use_cache=True,
                                                    pad_token_id=0, eos_token_id=None)[:, length:]}
    same = torch.equal(gens[GENERATORS[0]](new_tokens), gens[GENERATORS[1]](new_tokens))
    best = {(g, n): float("inf") for g in gens for n in (1, new_tokens)}
    for _ in range(reps):
        for g, n in best:
            sync(device)
            t = time.perf_counter()
            gens[g](n)
            sync(device)
            best[g, n] = min(best[g, n], time.perf_counter() - t)
    out = {}
    for g in gens:
        prompt_s, full_s = best[g, 1], best[g, new_tokens]
        out[g] = {"seconds": full_s, "prompt tokens/s": batch * length / prompt_s,
                  "generated tokens/s": batch * (new_tokens - 1) / (full_s - prompt_s) if full_s > prompt_s else None,
                  "same tokens": "yes" if same else "no (bf16 ties)"}
    return out


def generation_rows(model, shape: Shape, lengths: tuple[int, ...], batch: int, new_tokens: int, reps: int,
                    device: torch.device, budget: Budget, seed: int = 0, log=print) -> list[dict]:
    """Prompt and generated tokens/s of :func:`repro.generate.greedy_ids` and HF ``generate`` on the same random
    prompts (EOS off, so both make exactly ``new_tokens``); the 1-token call times the prompt, the difference the
    decoding; best of ``reps``."""
    model.eval()
    rows = []
    for n in lengths:
        base = {"model": shape.name, "prompt tokens": n, "batch": batch, "new tokens": new_tokens}
        if budget.left() <= 0:
            status = budget.skip(f"generation at {n}")
            rows += [{**base, "generator": g, "status": status} for g in GENERATORS]
            continue
        got, status = guarded(_generation, model, shape.vocab, n, batch, new_tokens, reps, device, seed)
        for g in GENERATORS:
            r = {**base, "generator": g, "status": status}
            if got:
                hf = got[GENERATORS[1]]["seconds"]
                r.update({k: round(v, 4 if k == "seconds" else 1) if isinstance(v, float) else v
                          for k, v in got[g].items()}, **{"vs HF generate": round(hf / got[g]["seconds"], 2)})
            rows.append(r)
        log(f"generation {shape.name} {n}: {status}" + (f", ours {rows[-2].get('vs HF generate')}x HF" if got else ""))
        free_memory()
    return rows
