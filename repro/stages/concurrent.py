"""Independent stages side by side: each job in its own process, ``workers`` at a time.

On this 2-core machine two training stages with one thread each do ~2x the work of one stage with two
threads (small matrices leave a second thread mostly idle; measured in ``TB-Throughput``). A stage that
pins its thread count (``base.threads``, ``extend.threads``) gives the same bits in a worker as in the
calling process, so a serial and a concurrent run train the same weights.

Jobs name a public function of a stage module by ``"<module>:<function>"`` (:meth:`Job.of` writes it:
``Job.of(train_extension, p, "flt")``), so that a fresh (``spawn``) process can import it: no fork of a process
whose OpenMP pool is running.
Every stage writes its outputs atomically, so a job that fails leaves nothing half-written; the first
failure cancels the jobs not yet started and is raised with the job named.
"""

from __future__ import annotations

import importlib
import inspect
import multiprocessing as mp
import time
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, Sequence

import torch
from tqdm.auto import tqdm


@dataclass(frozen=True)
class Job:
    """One stage call: ``<module>.<function>(*args, **kwargs)``."""

    fn: str
    """``"<module>:<function>"``: a public function of a module of :mod:`repro.stages`."""
    args: tuple = ()
    """Positional arguments (picklable: profile names or :class:`repro.profiles.Profile`, paths, names)."""
    kwargs: dict[str, Any] = field(default_factory=dict)
    """Keyword arguments (``progress``, where the function takes it, is the caller's in-process and False in
    worker processes)."""

    @classmethod
    def of(cls, fn, *args: Any, **kwargs: Any) -> "Job":
        """The job calling stage function ``fn`` with ``args`` and ``kwargs``."""
        return cls(f"{fn.__module__}:{fn.__name__}", args, kwargs)

    @property
    def name(self) -> str:
        """The function's name (``train_extension``)."""
        return self.fn.rpartition(":")[2]

    @property
    def label(self) -> str:
        return f"{self.name}({', '.join(str(a) for a in self.args[1:])})"


def _function(spec: str):
    module, colon, name = spec.partition(":")
    allowed = "'repro.stages.<module>:<function>' naming a public stage function"
    if not colon or not module.startswith("repro.stages.") or not name or name.startswith("_"):
        raise ValueError(f"job function {spec!r}; allowed: {allowed}")
    fn = getattr(importlib.import_module(module), name, None)
    if not callable(fn):
        raise ValueError(f"job function {spec!r}; allowed: {allowed}")
    return fn


def _call(job: Job, progress: bool):
    fn = _function(job.fn)
    extra = {"progress": progress} if "progress" in inspect.signature(fn).parameters else {}
    return fn(*job.args, **{**extra, **job.kwargs})


def _init_worker(threads: int) -> None:
    if threads:
        torch.set_num_threads(threads)


def _run(job: Job) -> tuple[Any, float]:
    t0 = time.perf_counter()
    out = _call(job, False)
    return out, time.perf_counter() - t0


def run_jobs(jobs: Sequence[Job], workers: int = 1, threads: int = 1, progress: bool = True,
             desc: str = "stages") -> list[tuple[Any, float]]:
    """Run ``jobs``; returns ``(result, seconds)`` per job, in job order.

    ``workers == 1`` runs them one after another in this process (one bar over the jobs; a single job keeps its own);
    ``workers > 1`` runs them in that many ``spawn`` processes with ``threads`` torch threads each (0:
    torch's default), submitted in order (put the longest first), with one bar over finished jobs.
    """
    if workers < 1:
        raise ValueError(f"workers={workers}; allowed: >= 1")
    for j in jobs:
        _function(j.fn)
    if workers == 1 or len(jobs) <= 1:
        one_bar = progress and len(jobs) > 1  # one bar over the jobs (a notebook cell's one bar), not one per job
        bar = tqdm(total=len(jobs), desc=desc, disable=not one_bar)
        out = []
        for j in jobs:
            t0 = time.perf_counter()
            out.append((_call(j, progress and not one_bar), time.perf_counter() - t0))
            bar.update(1)
            bar.set_postfix_str(j.label[:60])
        bar.close()
        return out

    results: list[tuple[Any, float] | None] = [None] * len(jobs)
    with ProcessPoolExecutor(max_workers=min(workers, len(jobs)), mp_context=mp.get_context("spawn"),
                             initializer=_init_worker, initargs=(threads,)) as pool:
        futures = {pool.submit(_run, j): i for i, j in enumerate(jobs)}
        bar = tqdm(total=len(jobs), desc=f"{desc} ({workers} side by side)", disable=not progress)
        pending = set(futures)
        while pending:
            done, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for f in done:
                i = futures[f]
                if f.exception() is not None:
                    for other in pending:
                        other.cancel()
                    bar.close()
                    raise RuntimeError(f"stage job {jobs[i].label} failed: {f.exception()!r}") from f.exception()
                results[i] = f.result()
                bar.update(1)
                bar.set_postfix_str(jobs[i].label[:60])
        bar.close()
    return results  # type: ignore[return-value]
