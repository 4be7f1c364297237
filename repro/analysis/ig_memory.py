"""CD-Mem: peak memory and time of the IG scores, the direct Eq. 1 against the memory-linear version.

Rows of the table: for each method (``naive``: :func:`repro.analysis.ig.naive_token_scores`, eager attention
with every T x T attention tensor kept; ``ours``: :func:`repro.analysis.ig.token_scores`) and each length (1K,
2K, 4K, ... doubling up to ``max_length``), one random sequence with ``answer_tokens`` answer tokens at the end
is scored in a fresh subprocess (``python -m repro.analysis.ig_memory --one METHOD --length N``) that builds the
model (a path, or the tiny random Llama of :class:`IGMemoryConfig`), so each row's peak is its own. A row holds:

* ``peak_mib``: the child's peak resident memory (``resource.getrusage(...).ru_maxrss``), model included;
* ``delta_mib``: that peak minus the resident memory after the model was built and the input made;
* ``seconds``: wall time of the scoring call alone;
* ``status``: ``ok``, ``out of memory (> CAP MiB)``, ``timed out (> S s)``, ``not attempted`` (a method stops
  after its first failure) or ``error: ...``.

The memory guard, two layers: the child limits its address space (``RLIMIT_AS`` = its virtual size after loading
plus the cap minus its resident size then; torch's CPU allocator then raises "can't allocate memory", which the
child reports as out of memory, with its peak), and a watchdog thread in the parent kills the child if its resident
memory still exceeds the cap by more than :func:`watchdog_mib`'s margin (pages mapped before the limit and touched
later count toward the resident size but not against the limit: without the margin the watchdog could win that race
and the row would lose the peak the child measures). Use 1 thread (the default) for timings comparable across rows.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.analysis.ig import naive_token_scores, token_scores
from repro.io import atomic_write_json
from repro.models import load_model

METHODS = ("ours", "naive")
"""``ours``: memory-linear :func:`~repro.analysis.ig.token_scores`; ``naive``: the direct Eq. 1."""
_ROW = "CD-MEM-ROW "
_OOM = ("can't allocate memory", "cannot allocate memory", "memoryerror", "out of memory")


@dataclass(frozen=True)
class IGMemoryConfig:
    """What each child builds and scores. Defaults: the project's tiny model (hidden 128, 3 layers, 4 heads of
    dim 32, vocab 2048, tied embeddings), random weights, float32, 1 thread."""

    model_path: str | None = None
    """A saved HF causal LM (loaded with :func:`repro.models.load_model`); None builds the tiny Llama below."""
    vocab_size: int = 2048
    hidden_size: int = 128
    intermediate_size: int = 512
    num_layers: int = 3
    num_heads: int = 4
    num_kv_heads: int = 4
    answer_tokens: int = 8
    """Answer tokens at the end of the sequence (the loss's tokens, the answer rows)."""
    top_k: int = 10
    """FR's k."""
    threads: int = 1
    """torch threads in the child."""
    cap_mib: int = 16384
    """Memory cap per child (MiB of resident memory)."""
    timeout_s: float | None = None
    """Wall-clock limit per child (None: none)."""
    seed: int = 0

    def __post_init__(self):
        for name in ("vocab_size", "hidden_size", "intermediate_size", "num_layers", "num_heads", "num_kv_heads",
                     "answer_tokens", "top_k", "threads", "cap_mib"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int) or v < 1:
                raise ValueError(f"{name}={v!r}; allowed: an integer >= 1")
        if self.hidden_size % self.num_heads or self.num_heads % self.num_kv_heads:
            raise ValueError(f"hidden_size={self.hidden_size}, num_heads={self.num_heads}, num_kv_heads="
                             f"{self.num_kv_heads}; allowed: heads dividing hidden_size, kv heads dividing heads")
        if self.timeout_s is not None and not self.timeout_s > 0:
            raise ValueError(f"timeout_s={self.timeout_s!r}; allowed: None or > 0")


def lengths(start: int = 1024, max_length: int = 32768) -> list[int]:
    """``start, 2 start, 4 start, ...`` up to ``max_length`` (inclusive)."""
    if isinstance(start, bool) or not isinstance(start, int) or start < 2 or max_length < start:
        raise ValueError(f"start={start!r}, max_length={max_length!r}; allowed: 2 <= start <= max_length")
    out = [start]
    while out[-1] * 2 <= max_length:
        out.append(out[-1] * 2)
    return out


# -- the child ---------------------------------------------------------------------------------------------
def proc_status_kib(fields: tuple[str, ...], pid: int | str = "self") -> dict[str, int]:
    """``VmRSS``, ``VmHWM``, ``VmSize``... of a process from ``/proc/<pid>/status``, in KiB (0 for a field or a
    process that is not there)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            text = f.read()
    except OSError:
        return {k: 0 for k in fields}
    found = {k: re.search(rf"{k}:\s+(\d+)", text) for k in fields}
    return {k: int(m.group(1)) if m else 0 for k, m in found.items()}


def _status_mib() -> dict[str, float]:
    return {k: v / 1024 for k, v in proc_status_kib(("VmSize", "VmRSS")).items()}


def _build(cfg: IGMemoryConfig, length: int):
    if cfg.model_path:
        return load_model(cfg.model_path, max_positions=length).eval()
    torch.manual_seed(cfg.seed)
    return LlamaForCausalLM(LlamaConfig(
        vocab_size=cfg.vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=max(length, 2048), tie_word_embeddings=True, use_cache=False,
        attn_implementation="sdpa")).eval()


def measure_one(method: str, length: int, cfg: IGMemoryConfig) -> dict:
    """Score one random sequence in this process (the child's work); returns the row (peak since process start)."""
    torch.set_num_threads(cfg.threads)
    model = _build(cfg, length)
    vocab = model.config.get_text_config().vocab_size
    ids = torch.randint(0, vocab, (1, length), generator=torch.Generator().manual_seed(cfg.seed))
    pos = list(range(length - min(cfg.answer_tokens, length - 1), length))
    after = _status_mib()
    resource.setrlimit(resource.RLIMIT_AS, (int((after["VmSize"] - after["VmRSS"] + cfg.cap_mib) * 2 ** 20),
                                            resource.RLIM_INFINITY))
    fn = token_scores if method == "ours" else naive_token_scores
    status, seconds = "ok", None
    t0 = time.perf_counter()
    try:
        fn(model, ids, pos, top_k=cfg.top_k)
        seconds = time.perf_counter() - t0
    except (RuntimeError, MemoryError) as e:
        if not any(s in str(e).lower() or s in type(e).__name__.lower() for s in _OOM):
            raise
        status = f"out of memory (> {cfg.cap_mib} MiB)"
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    return {"method": method, "length": length, "peak_mib": round(peak, 1),
            "delta_mib": round(peak - after["VmRSS"], 1), "seconds": None if seconds is None else round(seconds, 3),
            "status": status}


# -- the parent ------------------------------------------------------------------------------------------
def _rss_mib(pid: int) -> float:
    return proc_status_kib(("VmRSS",), pid)["VmRSS"] / 1024


def watchdog_mib(cap_mib: int) -> float:
    """The resident size at which the parent kills a child capped at ``cap_mib``: the cap plus a quarter of it (at
    least 64 MiB), the pages the address-space limit does not see (module docstring)."""
    return cap_mib + max(64.0, cap_mib / 4)


def run_one(method: str, length: int, cfg: IGMemoryConfig, poll_s: float = 0.05) -> dict:
    """One row, measured in a fresh subprocess under the memory cap (module docstring)."""
    if method not in METHODS:
        raise ValueError(f"method={method!r}; allowed: {', '.join(METHODS)}")
    cmd = [sys.executable, "-m", "repro.analysis.ig_memory", "--one", method, "--length", str(length),
           "--config", json.dumps(asdict(cfg))]
    root = str(Path(__file__).resolve().parents[2])  # this checkout's repro, first on the child's path
    path = os.pathsep.join([root] + [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p])
    env = dict(os.environ, PYTHONPATH=path, OMP_NUM_THREADS=str(cfg.threads), TOKENIZERS_PARALLELISM="false")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    killed: list[str] = []

    def watch() -> None:
        t0 = time.monotonic()
        while proc.poll() is None:
            if _rss_mib(proc.pid) > watchdog_mib(cfg.cap_mib):
                killed.append(f"out of memory (> {cfg.cap_mib} MiB)")
            elif cfg.timeout_s is not None and time.monotonic() - t0 > cfg.timeout_s:
                killed.append(f"timed out (> {cfg.timeout_s:g} s)")
            if killed:
                proc.kill()
                return
            time.sleep(poll_s)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    out, err = proc.communicate()
    watcher.join()
    row = {"method": method, "length": length, "peak_mib": None, "delta_mib": None, "seconds": None}
    if killed:
        return {**row, "status": killed[0]}
    found = [line[len(_ROW):] for line in out.splitlines() if line.startswith(_ROW)]
    if proc.returncode == 0 and found:
        return json.loads(found[-1])
    text = err.strip().splitlines()
    last = text[-1] if text else f"exit code {proc.returncode}"
    if any(s in err.lower() for s in _OOM) or proc.returncode in (-9, 137):
        return {**row, "status": f"out of memory (> {cfg.cap_mib} MiB)"}
    return {**row, "status": f"error: {last[:200]}"}


def sweep(cfg: IGMemoryConfig, methods=METHODS, start: int = 1024, max_length: int = 32768,
          log=None) -> list[dict]:
    """Rows for every method and length (:func:`lengths`), one child at a time; a method stops after its first
    failure (its later lengths: ``not attempted``). ``log(row)`` is called after each row."""
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"methods={list(methods)}; allowed: a non-empty subset of {', '.join(METHODS)}")
    rows = []
    for method in methods:
        failed = False
        for n in lengths(start, max_length):
            if failed:
                row = {"method": method, "length": n, "peak_mib": None, "delta_mib": None, "seconds": None,
                       "status": "not attempted"}
            else:
                row = run_one(method, n, cfg)
                failed = row["status"] != "ok"
            rows.append(row)
            if log is not None:
                log(row)
    return rows


def markdown(rows: list[dict]) -> str:
    """The rows as a markdown table."""
    def cell(v):
        return "" if v is None else str(v)

    head = "| method | length | peak MiB | delta MiB | seconds | status |\n|---|---:|---:|---:|---:|---|\n"
    return head + "\n".join(f"| {r['method']} | {r['length']} | {cell(r['peak_mib'])} | {cell(r['delta_mib'])} | "
                            f"{cell(r['seconds'])} | {r['status']} |" for r in rows)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro.bench.ig_memory", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default=None, help="a saved HF causal LM folder (default: the tiny random Llama)")
    ap.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of: " + ", ".join(METHODS))
    ap.add_argument("--start", type=int, default=1024, help="first length (doubled up to --max-length)")
    ap.add_argument("--max-length", type=int, default=32768)
    ap.add_argument("--cap-mib", type=int, default=16384, help="memory cap per child (MiB)")
    ap.add_argument("--timeout", type=float, default=None, help="wall-clock limit per child (s)")
    ap.add_argument("--answer-tokens", type=int, default=8)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", default=None, help="also write the rows to this JSON file")
    ap.add_argument("--one", choices=METHODS, help=argparse.SUPPRESS)
    ap.add_argument("--length", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--config", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:  # the child
        known = {f.name for f in fields(IGMemoryConfig)}
        cfg = IGMemoryConfig(**{k: v for k, v in json.loads(args.config).items() if k in known})
        print(_ROW + json.dumps(measure_one(args.one, args.length, cfg)), flush=True)
        return 0
    cfg = IGMemoryConfig(model_path=args.model, cap_mib=args.cap_mib, timeout_s=args.timeout,
                         answer_tokens=args.answer_tokens, threads=args.threads)
    rows = sweep(cfg, tuple(m for m in args.methods.split(",") if m), args.start, args.max_length,
                 log=lambda r: print(json.dumps(r), flush=True))
    print(markdown(rows))
    if args.json:
        atomic_write_json(args.json, rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
