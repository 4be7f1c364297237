"""CDT's analysis record of one model folder (the IG-scores notebook's ``cd_scores`` and ``analyze ig``).

:func:`cd_record` scores ``cdt.analysis_samples`` fresh labelled multi-hop prompts at the base window: whether the
model answers each right, the per-sample scores of :func:`repro.analysis.cdt_scores.score_sample` (IG, FR,
attention, embedding gradients and LongPPL's gap per token type: CD-Fig3/5/7), manual denoising (CD-Fig4) and
the denoising lr sweep (CD-Fig8). Uncached: the pipeline caches it (``stages.cd_scores``), the command line writes
it to its output folder.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from tqdm.auto import tqdm

from repro.analysis.cdt_scores import denoising_sweep, manual_denoising, score_sample
from repro.analysis.longppl import LongPPLConfig, lsd_scores
from repro.analysis.typed_samples import answers_correct, typed_min_length, typed_samples
from repro.data.tokenizer import load_tokenizer
from repro.models import load_model
from repro.profiles import Profile


def analysis_samples(p: Profile, tok) -> list:
    """The ``cdt.analysis_samples`` labelled prompts of ``cdt.task`` at the base window (analysis key pool)."""
    cd = p.cdt
    return typed_samples(tok, p.base.window, cd.analysis_samples, hops=int(cd.task.split("_")[1]),
                         key_pool=cd.analysis_pool, context_weight=p.extend.context_weight)


def analysis_min_length(p: Profile, tok) -> int:
    """The shortest base window at which :func:`analysis_samples` can build its prompts (checked before work)."""
    cd = p.cdt
    return typed_min_length(tok, cd.analysis_samples, hops=int(cd.task.split("_")[1]), key_pool=cd.analysis_pool)


def lsd(model, samples, p: Profile) -> list:
    """LongPPL's per-token short-vs-long log-probability gap (LSD) of each sample, the model as its own evaluator
    with a short context of a quarter of the base window (:func:`repro.analysis.longppl.lsd_scores`), aligned with
    the tokens; tokens it does not score get -inf (never in a top-k)."""
    cfg = LongPPLConfig.scaled(max(p.base.window // 4, 2))
    out = []
    for s in samples:
        gap = lsd_scores(model, torch.as_tensor(s.input_ids)[None], cfg).lsd[0]
        out.append(np.nan_to_num(gap.double().numpy(), nan=-np.inf))
    return out


def manual_step(p: Profile) -> float:
    """The manual denoising's step size (CD-Fig4): ``extend.lr`` x ``cdt.beta``."""
    return p.extend.lr * p.cdt.beta


def cd_record(path: str | Path, p: Profile, progress: bool = True, rope: dict | None = None,
              denoising: bool = True) -> dict:
    """The analysis record of the model folder ``path`` (with its tokenizer) under ``p``'s CDT settings, on
    ``p.run``'s device and dtype:
    ``correct`` per sample, ``types`` per sample, ``scores`` (per sample), ``manual`` (CD-Fig4 per sample),
    ``sweep`` (CD-Fig8 rows), ``step`` (the manual denoising's step size). ``rope``: the model's
    ``rope_parameters`` replaced (``analyze ig --rope-scaling``). ``denoising=False`` leaves out CD-Fig4 and CD-Fig8
    (``manual`` and ``sweep`` empty; ``real.denoising``)."""
    cd, step = p.cdt, manual_step(p)
    model = load_model(path, rope=rope, **p.run.load_kwargs()).eval()
    tok = load_tokenizer(path)
    samples = analysis_samples(p, tok)
    hops = int(cd.task.split("_")[1])
    correct = answers_correct(model, tok, samples, hops, cd.analysis_pool)
    gaps = lsd(model, samples, p)
    scores, manual = [], []
    for s, gap in tqdm(list(zip(samples, gaps)), desc="IG/FR scores", disable=not progress):
        scores.append(score_sample(model, s, cd.top_k, cd.top_heads, lsd=gap))
        if denoising:
            manual.append(manual_denoising(model, s, step))
    sweep = denoising_sweep(model, samples, cd.lr_sweep, cd.task_lr, cd.threshold) if denoising else []
    return {"checkpoint": str(path), "correct": correct, "types": [list(s.types) for s in samples],
            "seeds": [s.seed for s in samples], "scores": scores, "manual": manual, "sweep": sweep, "step": step}
