"""LongRecipe's impactful-token analysis as a cached stage (base vs FLT at the target window)."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from repro.analysis import tokens as ta
from repro.analysis.tokens import TokenAnalysis
from repro.io import atomic_dir, atomic_write_json, read_json
from repro.manifest import environment
from repro.models import load_model
from repro.profiles import Profile
from repro.stages.arms import train_arm
from repro.stages.base import train_base
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.corpus import build_corpus, get_tokenizer
from repro.stages.keys import analysis_key


def analysis_texts(p: Profile, run_dir: str | Path = "runs") -> list[str]:
    """Texts of the impactful-token analysis: ``analysis_texts`` corpus documents of the analysis
    source long enough for the target window, drawn with a fixed seed. The tiny corpus has no
    held-out split, so these documents were also language-modelling rows in training."""
    corpus = build_corpus(p, run_dir)
    n = p.extend.target_window
    lengths = np.diff(corpus.offsets)
    ok = [i for i, s in enumerate(corpus.sources) if s == p.longrecipe.analysis_source and lengths[i] >= n + 1]
    if len(ok) < p.longrecipe.analysis_texts:
        raise ValueError(f"longrecipe.analysis_source={p.longrecipe.analysis_source!r} has {len(ok)} documents "
                         f"of >= {n + 1} tokens; longrecipe.analysis_texts={p.longrecipe.analysis_texts}; "
                         f"allowed: analysis_texts <= {len(ok)} (or another source: {sorted(set(corpus.sources))})")
    rng = np.random.default_rng(12345)  # a fixed seed of its own: the same texts whatever the profile's seeds
    pick = sorted(rng.choice(ok, size=p.longrecipe.analysis_texts, replace=False).tolist())
    return [corpus.documents[i].text for i in pick]


def impactful_tokens(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
                     progress: bool = True) -> dict:
    """LongRecipe §4.1 on base vs FLT: logit changes, top tokens per position, POS tags, anchors (cached).

    Returns ``{"path", "anchors" (int array), "summary" (dict)}``; the arrays are in ``analysis.npz``
    and the per-token tags in ``tags.json``.
    """
    p = as_profile(profile)
    lr = p.longrecipe
    out = stage_dir(run_dir, p, "analysis", analysis_key(p))
    with compute_once(out, "summary.json", force) as done:
        if done is None:
            t0 = time.perf_counter()
            base = load_model(train_base(p, run_dir, progress=progress), **p.run.load_kwargs()).eval()
            ext = load_model(train_arm(p, "flt", run_dir, progress=progress), **p.run.load_kwargs()).eval()
            tok = get_tokenizer(p, run_dir)
            res = ta.analyse(base, ext, tok, analysis_texts(p, run_dir), p.extend.target_window,
                             fraction=lr.top_fraction, tagger=ta.load_tagger(), progress=progress,
                             enrichment=lr.anchor_enrichment, min_count=lr.anchor_min_count,
                             max_types=lr.max_anchor_types)
            with atomic_dir(out) as tmp:
                np.savez_compressed(tmp / "analysis.npz", samples=res.samples, changes=res.changes,
                                    selected=res.selected, delta=res.delta, counts=res.counts, anchors=res.anchors)
                atomic_write_json(tmp / "tags.json", res.tags)
                atomic_write_json(tmp / "summary.json", {
                    "anchors": [int(a) for a in res.anchors],
                    "anchor_pieces": [tok.decode([int(a)]) for a in res.anchors],
                    "texts": lr.analysis_texts, "length": p.extend.target_window, "source": lr.analysis_source,
                    "seconds": round(time.perf_counter() - t0, 1),
                    "environment": environment()})
    summary = read_json(out / "summary.json")
    return {"path": out, "anchors": np.asarray(summary["anchors"], dtype=np.int64), "summary": summary}


def load_analysis(profile: Profile | str, run_dir: str | Path = "runs", progress: bool = True):
    """The cached :class:`repro.analysis.tokens.TokenAnalysis` of :func:`impactful_tokens` (computed if missing)."""
    path = impactful_tokens(profile, run_dir, progress=progress)["path"]
    z = np.load(path / "analysis.npz", allow_pickle=False)
    return TokenAnalysis(samples=z["samples"], changes=z["changes"], selected=z["selected"], delta=z["delta"],
                         counts=z["counts"], anchors=z["anchors"], tags=read_json(path / "tags.json"))
