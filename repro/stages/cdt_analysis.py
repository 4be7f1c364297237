"""CDT's analysis stages (the IG-scores notebook), cached as JSON under ``<run_dir>/<profile>/eval/``.

- :func:`cd_scores`: the task model (the base fine-tuned on the multi-hop task with CE,
  :func:`repro.stages.cdt.train_task_model`): :func:`repro.analysis.cdt_record.cd_record`, cached.
- :func:`cd_curve`: every checkpoint of the CE and CDT task fine-tunes: accuracy and the IG / attention shares of
  critical tokens (CD-Fig10).
- :func:`cd_memory`: the CD-Mem sweep (:mod:`repro.analysis.ig_memory`).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

from repro.analysis.attention_map import chunk_bounds, chunked_attention_map
from repro.analysis.cdt_record import analysis_samples, cd_record, manual_step
from repro.analysis.cdt_scores import score_sample
from repro.analysis.ig import CRITICAL
from repro.analysis.ig_memory import METHODS, IGMemoryConfig, lengths, sweep
from repro.analysis.typed_samples import answers_correct, typed_samples
from repro.data.tokenizer import load_tokenizer
from repro.methods.arms import split_seed
from repro.models import load_model
from repro.profiles import Profile
from repro.stages.base import train_base
from repro.stages.cache import as_profile, cached_json, checkpoint_id, eval_path, stage_key
from repro.stages.cdt import task_checkpoints, train_task_model
from repro.stages.checkpoints import available_checkpoints, checkpoint_path
from repro.stages.corpus import get_tokenizer
from repro.stats import mean_se


def cd_scores(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True, path: str | Path | None = None) -> dict:
    """The task model's analysis record: ``correct`` per sample, ``types`` per sample, ``scores`` (per sample),
    ``manual`` (CD-Fig4 per sample), ``sweep`` (CD-Fig8 rows), ``step`` (the manual denoising's step size); ``manual``
    and ``sweep`` are empty when ``real.denoising`` is off.
    ``path``: analyse this HF model folder (with its tokenizer) instead of the task model."""
    p = as_profile(profile)
    final = Path(path) if path else train_task_model(p, "ce", run_dir, progress=progress)
    fields = {"ckpt": checkpoint_id(final, run_dir), "cdt": p.cdt, "window": p.base.window,
              "context_weight": p.extend.context_weight, "step": manual_step(p),
              "target": "answer"}  # IG's target: the answer without its EOS (older: with)
    if not p.real.denoising:  # in the key only when off: the keys of the profiles that keep CD-Fig4/8 are unchanged
        fields["denoising"] = False
    return cached_json(eval_path(run_dir, p, f"cdscores-{stage_key('cdscores', fields)}"), force,
                       lambda: cd_record(final, p, progress, denoising=p.real.denoising))


def cd_curve(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
             progress: bool = True) -> dict[str, dict[int, dict]]:
    """CD-Fig10: objective (``ce``, ``cdt``) -> step -> ``accuracy`` (+ binomial ``accuracy_se``) and the IG and
    attention shares of critical tokens (mean, SE) over the analysis samples."""
    p = as_profile(profile)
    cd = p.cdt
    out: dict[str, dict[int, dict]] = {}
    for obj in ("ce", "cdt"):
        final = train_task_model(p, obj, run_dir, progress=progress)
        out[obj] = {}
        for step, path in task_checkpoints(final).items():
            key = stage_key("cdscores", {"ckpt": checkpoint_id(path, run_dir), "cdt": cd, "curve": True,
                                         "window": p.base.window, "target": "answer"})  # as cd_scores' key

            def compute(path=path) -> dict:
                model = load_model(path, **p.run.load_kwargs()).eval()
                tok = load_tokenizer(final)
                samples = analysis_samples(p, tok)
                correct = answers_correct(model, tok, samples, int(cd.task.split("_")[1]), cd.analysis_pool)
                recs = [score_sample(model, s, cd.top_k, cd.top_heads)
                        for s in tqdm(samples, desc=f"{obj} step {step}", disable=not progress)]
                acc = sum(correct) / len(correct)
                return {"accuracy": acc, "accuracy_se": math.sqrt(acc * (1 - acc) / len(correct)),
                        "ig_critical": mean_se([sum(r["ig_share"][t] for t in CRITICAL) for r in recs]),
                        "attention_critical": mean_se([sum(r["attention_share"][t] for t in CRITICAL) for r in recs])}

            out[obj][step] = cached_json(eval_path(run_dir, p, f"cdcurve-{obj}-{step}-{key}"), force, compute)
    return out


def cd_memory(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True) -> list[dict]:
    """CD-Mem: the IG score's peak memory and time, naive vs memory-linear, on the profile's model architecture at
    ``cdt.mem_lengths`` (each (method, length) in a fresh process capped at ``cdt.mem_cap_gib``)."""
    p = as_profile(profile)
    cd = p.cdt
    base = train_base(p, run_dir, progress=progress)
    key = stage_key("cdmem", {"ckpt": checkpoint_id(base, run_dir), "lengths": cd.mem_lengths,
                              "cap": cd.mem_cap_gib})
    cfg = IGMemoryConfig(model_path=str(base), cap_mib=int(cd.mem_cap_gib * 1024))

    start, stop = min(cd.mem_lengths), max(cd.mem_lengths)

    def compute() -> dict:
        with tqdm(total=len(METHODS) * len(lengths(start, stop)), desc="CD-Mem", disable=not progress) as bar:
            def log(row: dict) -> None:  # one bar for the whole sweep, the last row's outcome beside it
                bar.set_postfix_str(f"{row['method']} {row['length']}: {row['status']}")
                bar.update()
            return {"rows": sweep(cfg, start=start, max_length=stop, log=log)}

    return cached_json(eval_path(run_dir, p, f"cdmem-{key}"), force, compute)["rows"]


def cd_attention_maps(profile: Profile | str, names: tuple[str, ...] = ("rp_standard", "cdt"),
                      run_dir: str | Path = "runs", force: bool = False, progress: bool = True) -> dict[str, dict]:
    """CD-Fig14: per checkpoint (before CDT: CE, ``rp_standard``; after: ``cdt``), the chunked attention map
    (:func:`repro.analysis.attention_map.chunked_attention_map`, ``cdt.map_chunks`` chunks, mean over heads and over
    ``cdt.map_samples`` multi-hop prompts at the target), and per prompt and layer the share of the last chunk's
    attention (the question's queries) that goes to chunks holding critical (supporting or interference) tokens.
    The trained training-seed replicates of ``names`` (``cdt@seed1``, ...) are mapped too, on the same prompts (the
    report widens the gap by their spread). Untrained checkpoints are left out."""
    p = as_profile(profile)
    cd, target = p.cdt, p.extend.target_window

    have = available_checkpoints(p, run_dir)
    out = {}
    for name in [n for arm in names for n in have if split_seed(n)[0] == arm]:
        ckpt = checkpoint_path(p, name, run_dir)
        key = stage_key("cdscores", {"ckpt": checkpoint_id(ckpt, run_dir), "map": [cd.map_chunks, cd.map_samples,
                                                                                  cd.analysis_pool, target]})

        def compute(ckpt=ckpt) -> dict:
            model = load_model(ckpt, **p.run.load_kwargs()).eval()
            samples = _map_samples(p, get_tokenizer(p, run_dir))
            maps, crit = [], []
            for s in samples:
                ids = s.input_ids[:s.prompt_tokens]
                m = chunked_attention_map(model, ids, cd.map_chunks)
                has = _key_chunks(s, cd.map_chunks)
                maps.append(m)
                crit.append(m[:, -1, has].sum(-1).tolist())  # per layer
            return {"checkpoint": str(ckpt), "map": np.mean(maps, axis=0).tolist(), "last_row_critical": crit,
                    "chunks": cd.map_chunks, "samples": len(samples), "length": target}

        out[name] = cached_json(eval_path(run_dir, p, f"cdmap-{name}-{key}"), force, compute)
    return out


def _map_samples(p: Profile, tok) -> list:
    """CD-Fig14's prompts, the same for every checkpoint: ``cdt.map_samples`` multi-hop prompts at the target."""
    return typed_samples(tok, p.extend.target_window, p.cdt.map_samples, key_pool=p.cdt.analysis_pool, seed0=10_000)


def _key_chunks(sample, chunks: int) -> np.ndarray:
    """Per chunk of ``sample``'s prompt, whether it holds a critical (supporting or interference) token."""
    bounds = chunk_bounds(sample.prompt_tokens, chunks)
    lab = np.asarray(sample.types[:sample.prompt_tokens], dtype=object)
    return np.array([np.isin(lab[a:b], CRITICAL).any() for a, b in zip(bounds[:-1], bounds[1:])])


def map_key_chunks(profile: Profile | str, run_dir: str | Path = "runs") -> list[float]:
    """CD-Fig14's key chunks: per chunk, the share of the map's prompts in which it holds a supporting or
    interference token (the figure marks them). The prompts are rebuilt from their seeds, as
    :func:`cd_attention_maps` builds them: no model runs, nothing is cached."""
    p = as_profile(profile)
    samples = _map_samples(p, get_tokenizer(p, run_dir))
    return np.mean([_key_chunks(s, p.cdt.map_chunks) for s in samples], axis=0).tolist()
