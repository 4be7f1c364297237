"""Evaluation stages: a checkpoint on a task grid, on a plan of grids, and the short-window LM loss.

Each result is one JSON record under ``<run_dir>/<profile>/eval/``, keyed by
the checkpoint (its path inside the run folder:
:func:`repro.stages.cache.checkpoint_id`), the grid and any RoPE override (:func:`repro.stages.cache.cached_json`).
The plans (which grids each paper's tables need) are in :mod:`repro.recipes.plans`.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import torch

from repro.analysis.longppl import LongPPLConfig, aggregate, key_tokens, longppl
from repro.data.corpus import iter_heldout_code
from repro.data.tokenizer import load_tokenizer
from repro.evaluate import EvalGrid, run_grid
from repro.general import lm_eval_scores
from repro.methods import parse_arm
from repro.methods.arms import rp_arm
from repro.models import forward, load_model
from repro.profiles import Profile
from repro.recipes.plans import TAB1_ARMS, base_window_grid, cd_plan, lr_plan, pl_plan, rp_plan, suite_plan
from repro.stages.cache import as_profile, cached_json, checkpoint_id, eval_path, stage_key
from repro.stages.checkpoints import checkpoint_path, checkpoint_rope_theta
from repro.stages.corpus import build_corpus, get_tokenizer
from repro.stages.curves import curve_checkpoints


def evaluate_checkpoint(profile: Profile | str, name: str, tasks: tuple[str, ...] = ("niah_single_1",),
                        run_dir: str | Path = "runs", force: bool = False, progress: bool = True,
                        rope: dict | None = None, *, lengths: tuple[int, ...] | None = None,
                        depths: tuple[float, ...] | None = None, samples: int | None = None,
                        seeds: tuple[int, ...] | None = None, record: bool = False, path: str | Path | None = None):
    """Evaluate a named checkpoint on the profile's grid (cached as JSON).

    ``lengths``, ``depths``, ``samples`` and ``seeds`` (evaluation seeds, see
    :class:`repro.evaluate.EvalGrid`) override the profile's ``eval`` grid.
    Cells too short for their task are skipped and listed under ``skipped``.
    Returns the result rows, or with ``record=True`` the whole cached record
    (``results``, ``skipped``, ``seconds``, ``grid``, ``checkpoint``, ``rope``). ``path``: evaluate this folder
    (e.g. a checkpoint kept along training) under the label ``name`` instead of the named checkpoint.
    """
    p = as_profile(profile)
    ckpt = Path(path) if path is not None else checkpoint_path(p, name, run_dir)
    grid = EvalGrid(tasks=tuple(tasks), lengths=tuple(lengths or p.eval.lengths),
                    depths=tuple(depths or p.eval.depths), samples=samples or p.eval.samples,
                    seed=p.eval.seed, batch_size=p.eval.batch_size, eval_seeds=tuple(seeds or (0,)))
    key = stage_key("eval", {"ckpt": checkpoint_id(ckpt, run_dir), "grid": grid, "rope": rope})

    def compute() -> dict:
        model = load_model(ckpt, rope=rope, max_positions=max(*p.eval.lengths, *grid.lengths) * 2,
                           **p.run.load_kwargs())
        tok = load_tokenizer(ckpt) if (ckpt / "tokenizer.json").exists() else get_tokenizer(p, run_dir)
        t0 = time.perf_counter()
        skipped: list[dict] = []
        results = run_grid(model, tok, grid, progress=progress, label=name, skipped=skipped)
        return {"checkpoint": str(ckpt), "model": name, "seconds": time.perf_counter() - t0, "grid": grid,
                "rope": rope, "skipped": skipped, "results": results}

    rec = cached_json(eval_path(run_dir, p, f"{name}-{key}"), force, compute)
    return rec if record else rec["results"]


def evaluate_base_window(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
                         progress: bool = True) -> dict:
    """``TB-Base``'s grid: the base model at its own window on ``eval.base_tasks`` x ``eval.base_depths`` x
    ``eval.base_samples`` fresh prompts (evaluation seed 0); the cached record (see :func:`evaluate_checkpoint`)."""
    p = as_profile(profile)
    return evaluate_checkpoint(p, "base", run_dir=run_dir, force=force, progress=progress, record=True,
                               **base_window_grid(p))


def run_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True) -> dict[str, dict]:
    """Evaluate a checkpoint on every part of :func:`repro.recipes.plans.suite_plan`; part -> cached record."""
    p = as_profile(profile)
    return _run_plan(p, name, suite_plan(p, name, rope_theta=checkpoint_rope_theta(p, name, run_dir)), run_dir,
                     force, progress)


def _run_plan(p: Profile, name: str, plan: dict[str, dict], run_dir: str | Path, force: bool,
              progress: bool) -> dict[str, dict]:
    """Evaluate every part of a plan (part -> ``evaluate_checkpoint`` kwargs); part -> cached record."""
    return {part: evaluate_checkpoint(p, name, run_dir=run_dir, force=force, progress=progress, record=True, **kw)
            for part, kw in plan.items()}


def short_lm_windows(p: Profile, run_dir: str | Path = "runs") -> tuple[list[np.ndarray], str]:
    """Windows of ``base.window`` tokens for the short-window LM loss, and where they come from.

    Held out when possible: the first window of each of ``longrecipe.short_lm_windows`` stdlib
    test modules (never in the corpus). Without Python's test suite: corpus windows drawn with
    a fixed seed (seen in training; labelled so).
    """
    n, w = p.longrecipe.short_lm_windows, p.base.window
    tok = get_tokenizer(p, run_dir)
    windows = []
    for doc in iter_heldout_code(4 * n):
        ids = tok(doc.text[:16 * w]).input_ids  # a prefix is enough for the first window (modules run to 100 KB)
        if len(ids) < w + 16:
            ids = tok(doc.text).input_ids
        if len(ids) >= w:
            windows.append(np.asarray(ids[:w], dtype=np.int64))
        if len(windows) == n:
            return windows, "held out: stdlib test modules (not in the corpus)"
    rows = build_corpus(p, run_dir).rows()
    rng = np.random.default_rng(4242)  # a fixed seed of its own: the same windows for every checkpoint
    return [rows.segment(rng, w, whole=True).tokens for _ in range(n)], "corpus windows (seen in training)"


def short_lm_loss(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False) -> dict:
    """Short-window language-modelling loss: the stand-in for general abilities (LongRecipe Tab. 1-2).

    Mean next-token cross-entropy (nats) of the named checkpoint on :func:`short_lm_windows`;
    returns ``{"loss", "window_losses" (each window's mean, the same windows for every checkpoint, so two
    checkpoints' losses pair up), "windows", "tokens", "window", "source"}``.
    """
    p = as_profile(profile)
    ckpt = checkpoint_path(p, name, run_dir)
    n, w = p.longrecipe.short_lm_windows, p.base.window
    key = stage_key("lmloss", {"ckpt": checkpoint_id(ckpt, run_dir), "n": n, "w": w, "per_window": 1})

    def compute() -> dict:
        windows, source = short_lm_windows(p, run_dir)
        model = load_model(ckpt, **p.run.load_kwargs()).eval()
        total, count, per_window = 0.0, 0, []
        with torch.no_grad():
            for toks in windows:
                ids = torch.as_tensor(toks[None])
                logits = forward(model, ids).logits[0, :-1].float()
                summed = float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
                total += summed
                count += ids.shape[1] - 1
                per_window.append(summed / (ids.shape[1] - 1))
        return {"checkpoint": str(ckpt), "loss": total / count, "window_losses": per_window,
                "windows": len(windows), "tokens": count, "window": w, "source": source}

    return cached_json(eval_path(run_dir, p, f"lmloss-{name}-{key}"), force, compute)


def run_lr_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> dict[str, dict]:
    """Evaluate a checkpoint on the LongRecipe grid (:func:`repro.recipes.plans.lr_plan`).

    LR-Tab1's arms also get the YaRN column; replayed and merged checkpoints (LR-Tab2) only the
    short-window part. Returns part -> cached record.
    """
    p = as_profile(profile)
    plan = lr_plan(p, name, checkpoint_rope_theta(p, name, run_dir), yarn=name in TAB1_ARMS)
    if parse_arm(name).stage != "extend":  # the base, replayed and merged models: short-window part only
        plan = {"short": plan["short"]}
    return _run_plan(p, name, plan, run_dir, force, progress)


def run_rp_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> dict[str, dict]:
    """Evaluate a self-distillation checkpoint on :func:`repro.recipes.plans.rp_plan` (the early grid for the
    ablation arms); part -> cached record."""
    p = as_profile(profile)
    arm = rp_arm(name)
    if arm is None:
        raise ValueError(f"{name!r} is not a self-distillation arm; allowed: rp_* names (repro.methods.arms.RP_ARMS)")
    plan = rp_plan(p, name, checkpoint_rope_theta(p, name, run_dir), early=arm.schedule == "early")
    return _run_plan(p, name, plan, run_dir, force, progress)


def run_cd_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> dict[str, dict]:
    """Evaluate a CD-Tab2 checkpoint on :func:`repro.recipes.plans.cd_plan`; part -> cached record, plus ``all``:
    the parts' rows in one record (what :func:`repro.reports.cdt.cd_tab2` reads)."""
    p = as_profile(profile)
    out = _run_plan(p, name, cd_plan(p, name, checkpoint_rope_theta(p, name, run_dir)), run_dir, force, progress)
    out["all"] = {"results": [r for rec in out.values() for r in rec["results"]],
                  "skipped": [r for rec in out.values() for r in rec.get("skipped", [])],
                  "seconds": sum(rec.get("seconds", 0.0) for rec in out.values())}
    return out


def run_pl_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> dict[str, dict]:
    """Evaluate a checkpoint on :func:`repro.recipes.plans.pl_plan` (ProLong's ablations); part -> cached record."""
    p = as_profile(profile)
    return _run_plan(p, name, pl_plan(p, name), run_dir, force, progress)


def long_doc_ppl(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False) -> dict:
    """PL-Fig1's long-document perplexity: next-token loss on the second half of ``prolong.heldout_docs`` held-out
    documents cut at the target (stdlib test modules, never in the corpus), as ProLong scores the last 32K tokens
    of 64K-token PG19 books. Returns ``{"loss", "ppl", "docs", "tokens", ...}`` (cached)."""
    p = as_profile(profile)
    target, n = p.extend.target_window, p.prolong.heldout_docs
    ckpt = checkpoint_path(p, name, run_dir)
    key = stage_key("plppl", {"ckpt": checkpoint_id(ckpt, run_dir), "n": n, "target": target})

    def compute() -> dict:
        docs = _long_docs(p, run_dir, n, target)
        model = load_model(ckpt, **p.run.load_kwargs()).eval()
        total, count, per_doc = 0.0, 0, []
        with torch.no_grad():
            for d in docs:
                ids = torch.as_tensor(d)[None]
                logits = forward(model, ids).logits[0, :-1].float()
                nll = torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="none")[target // 2 - 1:]
                per_doc.append(float(nll.mean()))
                total, count = total + float(nll.sum()), count + nll.numel()
        return {"checkpoint": str(ckpt), "loss": total / count, "ppl": float(np.exp(total / count)),
                "docs": len(docs), "tokens": count, "per_doc_loss": per_doc,
                "scored": f"tokens {target // 2}..{target - 1} of each {target}-token window"}

    return cached_json(eval_path(run_dir, p, f"plppl-{name}-{key}"), force, compute)


def longppl_scores(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                   progress: bool = True) -> dict:
    """CD-Tab2's LongPPL and PPL of a checkpoint (:mod:`repro.analysis.longppl`) on ``cdt.longppl_docs`` held-out
    documents cut at the target window, with key tokens picked by ``cdt.longppl_evaluator`` (cached: the same
    key tokens for every checkpoint) over LongCE's windows; aggregated over documents as the official script does
    (the CE pooled over every key token)."""
    p = as_profile(profile)
    cd, target = p.cdt, p.extend.target_window
    cfg = LongPPLConfig(window=p.selfdistill.longce_window, stride=p.selfdistill.longce_stride)  # LongCE's windows
    docs = _long_docs(p, run_dir, cd.longppl_docs, target)
    evaluator = checkpoint_path(p, cd.longppl_evaluator, run_dir)
    kkey = stage_key("longppl", {"evaluator": checkpoint_id(evaluator, run_dir), "cfg": cfg, "n": len(docs),
                                 "target": target})

    def keys() -> dict:
        model = load_model(evaluator, **p.run.load_kwargs()).eval()
        return {"evaluator": cd.longppl_evaluator,
                "masks": [key_tokens(model, torch.as_tensor(d)[None], cfg)[0].tolist() for d in docs]}

    masks = cached_json(eval_path(run_dir, p, f"longppl-keys-{kkey}"), force, keys)["masks"]
    ckpt = checkpoint_path(p, name, run_dir)
    key = stage_key("longppl", {"ckpt": checkpoint_id(ckpt, run_dir), "keys": kkey})

    def compute() -> dict:
        model = load_model(ckpt, **p.run.load_kwargs()).eval()
        rows = [longppl(model, torch.as_tensor(d)[None], torch.as_tensor(m)[None])["rows"][0]
                for d, m in zip(docs, masks)]
        return {"checkpoint": str(ckpt), "evaluator": cd.longppl_evaluator, "docs": rows, **aggregate(rows)}

    return cached_json(eval_path(run_dir, p, f"longppl-{name}-{key}"), force, compute)


def _long_docs(p: Profile, run_dir: str | Path, n: int, length: int) -> list[np.ndarray]:
    """``n`` held-out documents of at least ``length`` tokens, cut at ``length`` (stdlib test modules, never in the
    corpus)."""
    tok = get_tokenizer(p, run_dir)
    out = []
    for doc in iter_heldout_code(8 * n):
        ids = tok(doc.text).input_ids
        if len(ids) >= length:
            out.append(np.asarray(ids[:length], dtype=np.int64))
        if len(out) == n:
            break
    if not out:
        raise ValueError(f"no held-out document reaches {length} tokens; LongPPL needs at least one")
    return out


def run_rp_curve(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> dict[int, dict]:
    """RP-Fig4: every checkpoint kept along a curve arm's training (``rp_skip``, ``rp_standard_matched``) on the
    early grid (RULER at the target); step -> cached record (the final weights are the last step)."""
    p = as_profile(profile)
    arm = rp_arm(name)
    if arm is None or not arm.curve:
        raise ValueError(f"{name!r} keeps no checkpoints along training; allowed: rp_* arms with curve=True")
    kw = rp_plan(p, name, checkpoint_rope_theta(p, name, run_dir), early=True)["ruler"]
    return {step: evaluate_checkpoint(p, f"{name}-step{step}", run_dir=run_dir, force=force, progress=progress,
                                      record=True, path=path, **kw)
            for step, path in curve_checkpoints(checkpoint_path(p, name, run_dir)).items()}


def general_abilities(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                      data: str | Path | None = None, progress: bool = True) -> dict:
    """The paper's general-ability benchmarks (``longrecipe.general_benchmarks``) on a checkpoint, cached.

    Runs lm-evaluation-harness's own task definitions offline on the checkpoint loaded the suite's way
    (:func:`repro.general.lm_eval_scores`; datasets from ``data``, a folder of local copies, or the datasets
    cache). Returns the suite's summary record (``cells``, ``groups``, ``harness``), or ``{}`` when no benchmark
    is configured (the tiny profile uses :func:`short_lm_loss` instead).
    """
    p = as_profile(profile)
    tasks = p.longrecipe.general_benchmarks
    if not tasks:
        return {}
    ckpt = checkpoint_path(p, name, run_dir)
    key = stage_key("general", {"ckpt": checkpoint_id(ckpt, run_dir), "tasks": tasks, "harness": "lm-eval"})
    return cached_json(eval_path(run_dir, p, f"general-{name}-{key}"), force,
                       lambda: lm_eval_scores(ckpt, tasks, data=data, progress=progress))
