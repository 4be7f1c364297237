"""RP-Fig2's attention-distance histograms as a cached stage: checkpoints by name, or any HF model folder.

Each model reads the same texts (:func:`repro.stages.analysis.analysis_texts`: corpus documents of the
analysis source, seen in training as language-modelling rows in the tiny profile), cut to the target
window), recorded by :mod:`repro.analysis.distance_records`. One JSON record per model
under ``<run_dir>/<profile>/eval/attn-<name>-<key>.json`` (:func:`repro.stages.cache.cached_json`), keyed by
the checkpoint (:func:`repro.stages.cache.checkpoint_id`), the texts and :class:`AttentionDistanceConfig`.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

from repro.analysis import distance_records
from repro.analysis.distance_records import AttentionDistanceConfig
from repro.profiles import Profile
from repro.stages.analysis import analysis_texts
from repro.stages.cache import as_profile, cached_json, checkpoint_id, eval_path, stage_key
from repro.stages.checkpoints import checkpoint_path
from repro.stages.corpus import get_tokenizer
from repro.stages.keys import corpus_key

RP_CHECKPOINTS: tuple[str, ...] = ("base", "flt", "rp_standard", "rp_pose", "rp_skip", "rp_cyclic")
"""The models of RP-Fig2: the base, FLT, and the self-distillation comparison's arms (standard full-length
fine-tuning, PoSE, skip and cyclic views); those not trained are reported as missing."""

_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.@+-]*$")
"""Labels of user model folders (they name the cache files)."""


def model_distances(path: str | Path, texts: Sequence[str], length: int, cfg: AttentionDistanceConfig,
                    tokenizer=None, cache_file: str | Path | None = None, force: bool = False,
                    progress: bool = True, label: str | None = None, device=None, dtype=None) -> dict:
    """:func:`repro.analysis.distance_records.model_distances` (on ``device`` as ``dtype``), cached at
    ``cache_file`` when given."""
    def compute() -> dict:
        return distance_records.model_distances(path, texts, length, cfg, tokenizer=tokenizer, progress=progress,
                                                label=label, device=device, dtype=dtype)

    if len(texts) < cfg.samples:
        raise ValueError(f"{len(texts)} texts; allowed: at least samples={cfg.samples}")
    cfg.check(length)
    return compute() if cache_file is None else cached_json(Path(cache_file), force, compute)


def checkpoint_distances(profile: Profile | str, names: Sequence[str] = RP_CHECKPOINTS, run_dir: str | Path = "runs",
                         cfg: AttentionDistanceConfig | None = None, paths: Mapping[str, str | Path] | None = None,
                         force: bool = False, progress: bool = True) -> dict:
    """RP-Fig2's records of the named checkpoints (:func:`repro.stages.checkpoints.checkpoint_path`) and of
    ``paths`` (label -> any HF model folder, e.g. a user's own model; its own tokenizer when it has one), on the
    profile's analysis texts at ``extend.target_window``, each cached under ``<run_dir>/<profile>/eval/``.

    Returns ``{"records": {name: record}, "missing": {name: why}}``: a name not trained yet (or not a known arm)
    is skipped and listed under ``missing``.
    """
    p = as_profile(profile)
    length = p.extend.target_window
    cfg = (cfg or AttentionDistanceConfig.for_profile(p)).check(length)
    if cfg.samples > p.longrecipe.analysis_texts:
        raise ValueError(f"samples={cfg.samples}; allowed: <= longrecipe.analysis_texts={p.longrecipe.analysis_texts}")
    found: dict[str, Path] = {}
    missing: dict[str, str] = {}
    for name in names:
        try:
            found[name] = checkpoint_path(p, name, run_dir)
        except (FileNotFoundError, ValueError) as e:
            missing[name] = f"not trained ({type(e).__name__}: {str(e).splitlines()[0][:160]})"
    for label, path in (paths or {}).items():
        if not _LABEL.match(label) or label in found:
            raise ValueError(f"model label {label!r}; allowed: a new name matching {_LABEL.pattern}")
        if not Path(path).exists() and str(path).startswith((".", "/")):
            missing[label] = f"no model folder at {path}"
        else:
            found[label] = Path(path)
    texts = analysis_texts(p, run_dir)[:cfg.samples] if found else []
    lr = p.longrecipe
    records = {}
    for name, ckpt in found.items():
        own = (ckpt / "tokenizer.json").exists() or (ckpt / "tokenizer_config.json").exists()
        key = stage_key("attn", {"ckpt": checkpoint_id(ckpt, run_dir), "cfg": cfg, "length": length,
                                 "texts": [corpus_key(p), lr.analysis_source, lr.analysis_texts],
                                 "tokenizer": "own" if own else "profile"})
        tok = None if own else get_tokenizer(p, run_dir)
        records[name] = model_distances(ckpt, texts, length, cfg, tokenizer=tok, label=name, force=force,
                                        **p.run.load_kwargs(),
                                        cache_file=eval_path(run_dir, p, f"attn-{name}-{key}"), progress=progress)
    return {"records": records, "missing": missing}
