"""The training notebook's and evaluation notebook's stage lists, run ``extend.workers`` at a time.

Dependencies decide the order: the base, then every arm that needs no analysis (FLT and its replicates
first: the longest), then LongRecipe's impactful-token analysis (it reads FLT), then the arms that select
anchor sentences; replays after their arms, merges last. Within a group the stages are independent and
run side by side (:mod:`repro.stages.concurrent`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from repro.arms import build_arm
from repro.methods.arms import cd_arm, pl_arm, rp_arm, split_seed
from repro.methods.extension import extension_spec
from repro.methods.selfdistill import rp_steps
from repro.profiles import Profile
from repro.recipes.plans import TIMED_ARMS, timed_threads
from repro.stages import evaluation
from repro.stages.analysis import impactful_tokens
from repro.stages.base import train_base
from repro.stages.cache import as_profile
from repro.stages.concurrent import Job, run_jobs
from repro.stages.extension import train_extension
from repro.stages.replay import merge_replayed, train_replay
from repro.timing import StepTiming, run_seconds


def _threads(workers: int) -> int:
    """torch threads of each worker process: one when stages share the cores (0: this process's own)."""
    return 1 if workers > 1 else 0


def _cost(p: Profile, name: str) -> float:
    """Relative training cost of an arm (tokens per step x steps x passes), to start the longest first."""
    if pl_arm(name) is not None:  # full-length rows (a long-training arm: the same tokens)
        return p.extend.target_window
    if cd_arm(name) is not None:  # a CE step plus a forward and an activation-only backward
        return p.extend.target_window * 1.7
    if (arm := rp_arm(name)) is not None:
        s = arm.spec
        passes = 1.0 if s.consistency == "none" or s.lam == 0 else 1.5 if s.view == "skip" and s.shared_prefix else 2.0
        return p.extend.target_window * passes * (1.5 if s.longce else 1.0) * rp_steps(p, name) / p.extend.steps
    spec = extension_spec(split_seed(name)[0])
    return spec.resolve_len(p.extend.target_window, p.longrecipe.sample_ratio)


def arm_timing(profile: Profile | str, name: str, metrics: Sequence[dict], workers: int | None = None) -> StepTiming:
    """How :func:`train_arms` timed arm ``name``'s own training run: its median seconds per step (``metrics``, the
    first steps left out as warm-up) at the threads and beside the stages :func:`train_arms` gives it (the arms of
    :data:`repro.recipes.plans.TIMED_ARMS` alone on ``extend.workers x extend.threads`` threads; the others up to
    ``workers`` side by side, one thread each)."""
    p = as_profile(profile)
    w = workers or p.extend.workers
    median = run_seconds(metrics)
    median = float("nan") if median is None else median
    if name in TIMED_ARMS:
        return StepTiming(median, timed_threads(p), 0, "its own training run")
    return StepTiming(median, _threads(w), w - 1, "its own training run")


def train_arms(profile: Profile | str, names: Sequence[str], run_dir: str | Path = "runs", force: bool = False,
               progress: bool = True, workers: int | None = None) -> dict[str, Path]:
    """Train (or reuse) the extension arms ``names`` (replicates ``<arm>@seed<k>`` included); arm -> ``final``.

    ``workers`` (default ``extend.workers``) stages run at a time; with ``extend.threads`` pinned the weights
    are those of a serial run. The arms whose step times the cost tables report
    (:data:`repro.recipes.plans.TIMED_ARMS`) then train one at a time, each on all the cores.
    """
    p = as_profile(profile)
    w = workers or p.extend.workers
    train_base(p, run_dir, progress=progress)
    needs = {n: build_arm(p, n).needs_anchors for n in names}
    out: dict[str, Path] = {}
    for group in ([n for n in names if not needs[n]], [n for n in names if needs[n]]):
        if not group:
            continue
        if needs[group[0]]:
            impactful_tokens(p, run_dir, progress=progress)
        group = sorted(group, key=lambda n: -_cost(p, n))  # longest first: the pool stays busy to the end
        for part, k in (([n for n in group if n not in TIMED_ARMS], w), ([n for n in group if n in TIMED_ARMS], 1)):
            res = run_jobs([Job.of(train_extension, p, n, run_dir=run_dir, force=force) for n in part],
                           k, _threads(k), progress, desc="extension arms" if k > 1 else "timed arms, one at a time")
            out.update({n: r for n, (r, _) in zip(part, res)})
    return {n: out[n] for n in names}


def replay_and_merge(profile: Profile | str, names: Sequence[str], run_dir: str | Path = "runs",
                     force: bool = False, progress: bool = True, workers: int | None = None) -> dict[str, Path]:
    """LongRecipe §4.3 for each arm in ``names``: replay (side by side), then merge; arm -> replay ``final``."""
    p = as_profile(profile)
    w = workers or p.extend.workers
    res = run_jobs([Job.of(train_replay, p, n, run_dir=run_dir, force=force) for n in names],
                   w, _threads(w), progress, desc="replays")
    for n in names:
        merge_replayed(p, n, run_dir, force=force, progress=progress)
    return {n: r for n, (r, _) in zip(names, res)}


def evaluate_arms(profile: Profile | str, names: Sequence[str], fns: Sequence[str], run_dir: str | Path = "runs",
                  force: bool = False, progress: bool = True, workers: int | None = None) -> dict[str, dict]:
    """Each evaluation stage in ``fns`` (``run_lr_suite``, ``short_lm_loss``, ``run_suite``) on each checkpoint,
    side by side; ``{fn: {name: (record, seconds)}}``."""
    p = as_profile(profile)
    w = workers or p.extend.workers
    if bad := [fn for fn in fns if fn.startswith("_") or not callable(getattr(evaluation, fn, None))]:
        raise ValueError(f"evaluation stage {bad[0]!r}; allowed: a public function of repro.stages.evaluation")
    jobs = [Job.of(getattr(evaluation, fn), p, n, run_dir=run_dir, force=force) for n in names for fn in fns]
    res = run_jobs(jobs, w, _threads(w), progress, desc="evaluations")
    out: dict[str, dict] = {fn: {} for fn in fns}
    for j, r in zip(jobs, res):
        out[j.name][j.args[1]] = r
    return out
