"""RP-Fig2's attention-distance records of any model: for the last ``queries`` tokens of each text every layer's
attention rows are recorded (:mod:`repro.analysis.attention_distance`) and histogrammed by query-key distance.
Uncached: the pipeline caches one record per checkpoint (``stages.checkpoint_distances``), the command line
(``analyze attention-distance``) writes it to its output folder.
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm
from transformers import AutoTokenizer

from repro.analysis.attention_distance import distance_edges, distance_histogram, query_attention
from repro.models import load_model
from repro.profiles import Profile


@dataclass(frozen=True)
class AttentionDistanceConfig:
    """What RP-Fig2 measures (the paper: the last 256 queries of one 64K ProLong sequence, weights > 1e-3,
    layer 24 of 32). :meth:`for_profile` scales it to a profile's target window."""

    queries: int = 64
    """Last query tokens per text whose attention rows are kept (paper: 256 of 65,536)."""
    samples: int = 8
    """Held-out texts per model (paper: one sequence); at most ``longrecipe.analysis_texts``."""
    threshold: float = 1e-3
    """An attention weight counts when it is above this (paper: 1e-3, about 66x the uniform weight 1/T at 64K;
    at T = 1024 it is about 1x, so the count includes diffuse attention the paper's would not)."""
    bins: int = 32
    """Equal distance bins over 0 .. T."""
    far: float = 0.5
    """'Large distance' of the summaries: beyond this fraction of T."""
    layer_fraction: float = 0.75
    """Depth of the layer the verdict reads, as a fraction of the layers (paper: layer 24 of 32)."""

    @classmethod
    def for_profile(cls, p: Profile, **overrides: Any) -> "AttentionDistanceConfig":
        """Defaults scaled to ``p``: ``queries`` = T/16 clipped to 8..256 (64 of 1024 tiny, 24 of 384 smoke, 256
        paper), ``samples`` = min(8, ``longrecipe.analysis_texts``); ``overrides`` replace fields (0 or None: keep
        the default)."""
        t = p.extend.target_window
        cfg = cls(queries=max(8, min(256, t // 16)), samples=min(8, p.longrecipe.analysis_texts))
        cfg = dataclasses.replace(cfg, **{k: v for k, v in overrides.items() if v not in (None, 0)})
        return cfg.check(t)

    def check(self, length: int) -> "AttentionDistanceConfig":
        """Self, after checking every field against the input length; ValueError naming the bad one."""
        if not 1 <= self.queries <= length:
            raise ValueError(f"queries={self.queries}; allowed: 1 <= queries <= {length} (the target window)")
        if self.samples < 1:
            raise ValueError(f"samples={self.samples}; allowed: >= 1")
        if not 0.0 < self.threshold < 1.0:
            raise ValueError(f"threshold={self.threshold}; allowed: 0 < threshold < 1")
        if self.bins < 1:
            raise ValueError(f"bins={self.bins}; allowed: >= 1")
        if not 0.0 < self.far < 1.0:
            raise ValueError(f"far={self.far}; allowed: 0 < far < 1")
        if not 0.0 <= self.layer_fraction <= 1.0:
            raise ValueError(f"layer_fraction={self.layer_fraction}; allowed: 0 <= layer_fraction <= 1")
        return self

    def verdict_layer(self, n_layers: int) -> int:
        """The layer at ``layer_fraction`` of the depth (0-based; 24 of 32 -> 24, tiny's 3 layers -> 2)."""
        return min(n_layers - 1, int(self.layer_fraction * n_layers))


def _tokenized(texts: Sequence[str], tokenizer, length: int):
    rows = []
    for i, text in enumerate(texts):
        ids = list(tokenizer(text).input_ids)
        if len(ids) < length:
            raise ValueError(f"text {i} has {len(ids)} tokens; allowed: at least length={length}")
        rows.append(np.asarray(ids[:length], dtype=np.int64))
    return rows


def distance_record(model, samples: Sequence, cfg: AttentionDistanceConfig, progress: bool = True,
                    label: str = "") -> dict:
    """Per-layer distance histograms of ``model`` over ``samples`` (token-id arrays of one length), summed over
    the samples, plus each sample's per-layer summaries (for paired comparisons across models)."""
    if not samples:
        raise ValueError("no samples; allowed: at least one token-id array")
    length = len(samples[0])
    cfg.check(length)
    edges = distance_edges(length, cfg.bins)
    device = next(model.parameters()).device
    total: dict = {}
    per_sample: list[dict] = []
    t0 = time.perf_counter()
    for ids in tqdm(samples, desc=f"attention distance {label}".strip(), disable=not progress):
        if len(ids) != length:
            raise ValueError(f"samples of lengths {length} and {len(ids)}; allowed: one length")
        one: dict = {}
        query_attention(model, torch.as_tensor(ids, device=device)[None], cfg.queries,
                        reduce=lambda layer, rows: one.__setitem__(
                            layer, distance_histogram(rows, edges, cfg.threshold, cfg.far)))
        per_sample.append({k: h.summary() for k, h in one.items()})
        for k, h in one.items():
            total[k] = total[k] + h if k in total else h
    layers = sorted(total)
    return {"length": length, "queries": cfg.queries, "samples": len(samples), "threshold": cfg.threshold,
            "far": cfg.far, "edges": edges.tolist(), "seconds": round(time.perf_counter() - t0, 2),
            "verdict_layer": cfg.verdict_layer(len(layers)),
            "layers": [{"layer": k, **total[k].to_dict(), **total[k].summary(),
                        "per_sample": {s: [ps[k][s] for ps in per_sample] for s in
                                       ("far_share", "far_mass_share", "mean_distance", "weighted_mean_distance")}}
                       for k in layers]}


def model_distances(path: str | Path, texts: Sequence[str], length: int, cfg: AttentionDistanceConfig,
                    tokenizer=None, progress: bool = True, label: str | None = None, device=None,
                    dtype=None, rope: dict | None = None) -> dict:
    """RP-Fig2's record of any HF causal LM folder (or model id): ``texts`` tokenized with ``tokenizer`` (default:
    the folder's own), cut to ``length``, the first ``cfg.samples`` of them; the model loaded on ``device`` as
    ``dtype`` (:func:`repro.models.load_model`); ``rope``: its ``rope_parameters`` replaced (``analyze
    --rope-scaling``; its positions then stay the model's own, which dynamic NTK reads)."""
    if len(texts) < cfg.samples:
        raise ValueError(f"{len(texts)} texts; allowed: at least samples={cfg.samples}")
    cfg.check(length)
    model = load_model(path, rope=rope, max_positions=None if rope else length, device=device, dtype=dtype).eval()
    tok = tokenizer
    if tok is None:
        tok = AutoTokenizer.from_pretrained(str(path))
    rec = distance_record(model, _tokenized(texts[:cfg.samples], tok, length), cfg, progress,
                          label or Path(str(path)).name)
    return {"model": label or str(path), "checkpoint": str(path), **rec}
