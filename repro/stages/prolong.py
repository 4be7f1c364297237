"""ProLong's stages: the data streams (PL-Tab3) and the recipe's arms (PL-Fig1/3, PL-Tab7/18/20).

- :func:`build_streams`: each ``prolong.sources`` entry read and tokenized once (:mod:`repro.data.long_sources`),
  split by the long threshold (long streams keep documents at or above it, the others the shorter ones), cached
  with PL-Tab3's counts per source.
- :func:`train_prolong`: a ProLong arm of :data:`repro.methods.arms.PL_ARMS` from the base, ``extend``'s steps,
  batch, lr and schedule, rows from the arm's mixture (:class:`repro.methods.prolong.ProLongMix`), the arm's RoPE
  base and training length. With document masks the model attends within each document alone
  (:func:`repro.attention.doc_masked.use_doc_masked_attention`: ``sdpa_varlen`` on CPU, flash-attn varlen on
  GPUs), as ProLong trains; the checkpoint's config keeps the profile's implementation for evaluation.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence

import numpy as np

from repro.io import atomic_dir, atomic_write_json, read_json
from repro.manifest import with_environment
from repro.profiles import Profile
from repro.stages.cache import as_profile, compute_once, stage_dir, stage_key

TASK_STREAM = "tasks"
"""Name of the testbed's task rows in a ProLong mixture."""


def long_threshold(p: Profile) -> int:
    """Tokens from which a document counts as long (``prolong.long_threshold``, 0: the target window)."""
    return p.prolong.long_threshold or p.extend.target_window


def ntk_theta(p: Profile) -> float:
    """The dynamic-NTK RoPE base for the target (emozilla 2023, ProLong B.1): ``theta * t^(d/(d-2))``, t = target /
    base window, d = head dimension."""
    m = p.model
    d = m.hidden_size // m.num_heads
    t = p.extend.target_window / p.base.window
    return float(m.rope_theta * t ** (d / (d - 2)))


def arm_rope_theta(p: Profile, name: str) -> float:
    """RoPE base of ProLong arm ``name`` at the target: the base model's (``orig``, or a multiple of 0), else the
    multiple (``recipe``: ``prolong.rope_ntk_multiple``) of :func:`ntk_theta`."""
    rope = _arm(name).rope
    multiple = 0.0 if rope == "orig" else p.prolong.rope_ntk_multiple if rope == "recipe" else float(rope)
    return ntk_theta(p) * multiple if multiple > 0 else float(p.model.rope_theta)


def arm_proportions(p: Profile, name: str) -> dict[str, float]:
    """Stream -> share of rows of arm ``name``: ``prolong.task_share`` task rows, the rest by ``prolong.mix``
    (a long-share arm keeps the ratio among the long streams and among the short ones)."""
    pl, arm = p.prolong, _arm(name)
    mix = dict(pl.mix)
    if arm.long_share is not None:
        long_total = sum(mix[n] for n in pl.long_streams)
        short = [n for n in mix if n not in pl.long_streams]
        short_total = sum(mix[n] for n in short)
        if arm.long_share > 0 and long_total <= 0 or arm.long_share < 1 and short and short_total <= 0:
            raise ValueError(f"arm {name!r}: prolong.mix={pl.mix} has no share to scale on one side")
        mix = {n: (arm.long_share * mix[n] / long_total if n in pl.long_streams else
                   (1 - arm.long_share) * mix[n] / short_total if short_total else 0.0) for n in mix}
    out = {n: (1 - pl.task_share) * v for n, v in mix.items()}
    out[TASK_STREAM] = pl.task_share
    return out


def _arm(name: str):
    from repro.methods.arms import PL_ARMS, pl_arm

    arm = pl_arm(name)
    if arm is None:
        raise ValueError(f"{name!r} is not a ProLong arm; allowed: {', '.join(PL_ARMS)} (optionally @seed<k>)")
    return arm


def streams_key(p: Profile) -> str:
    from repro.stages.keys import corpus_key

    pl = p.prolong
    return stage_key("pldata", {"corpus": corpus_key(p), "sources": pl.sources, "long": pl.long_streams,
                                "threshold": long_threshold(p)})


def build_streams(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False) -> Path:
    """Read, tokenize and split ``prolong.sources`` once; returns the folder (``manifest.json`` holds PL-Tab3's
    counts per source: documents and tokens in all and at or above the threshold, and what each stream keeps)."""
    from repro.data.long_sources import long_tokens, source_documents, split_by_length
    from repro.data.tokenizer import load_tokenizer
    from repro.stages.corpus import build_corpus

    p = as_profile(profile)
    out = stage_dir(run_dir, p, "pldata", streams_key(p))
    with compute_once(out, "manifest.json", force) as done:
        if done is not None:
            return out
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        thr = long_threshold(p)
        manifest: dict = {"threshold": thr, "sources": {}}
        with atomic_dir(out) as tmp:
            for name, spec in p.prolong.sources:
                docs = source_documents(spec, corpus, tok, thr)
                long = name in p.prolong.long_streams
                kept = split_by_length(docs, thr, long)
                if not kept:
                    raise ValueError(f"prolong.sources {name!r} ({spec}) has no document "
                                     f"{'at or above' if long else 'below'} the long threshold {thr}")
                np.save(tmp / f"{name}.tokens.npy", np.concatenate(kept).astype(np.int32), allow_pickle=False)
                np.save(tmp / f"{name}.lengths.npy", np.array([len(d) for d in kept], dtype=np.int64),
                        allow_pickle=False)
                manifest["sources"][name] = {"spec": spec, "kind": "long" if long else "short",
                                             **long_tokens(docs, thr), "kept_documents": len(kept),
                                             "kept_tokens": int(sum(len(d) for d in kept))}
            atomic_write_json(tmp / "manifest.json", with_environment(manifest))
        return out


def load_streams(path: Path, seed: int) -> list:
    """The :class:`repro.data.streams.TokenStream` of each stream in a :func:`build_streams` folder."""
    from repro.data.streams import TokenStream

    out = []
    for name in read_json(path / "manifest.json")["sources"]:
        toks = np.load(path / f"{name}.tokens.npy", allow_pickle=False).astype(np.int64)
        ends = np.cumsum(np.load(path / f"{name}.lengths.npy", allow_pickle=False))
        out.append(TokenStream(name, np.split(toks, ends[:-1]), seed=seed))
    return out


def arm_length(p: Profile, name: str) -> tuple[int, int]:
    """``(row length, rows per step)`` of arm ``name``: the target and ``extend.batch_size``, or for the
    long-training arm the length times ``prolong.train_length_factor`` and the rows divided by it."""
    f = p.prolong.train_length_factor if _arm(name).length_factor > 1 else 1
    return p.extend.target_window * f, p.extend.batch_size // f


def prolong_method(p: Profile, name: str, tokenizer, streams: Path | Sequence, seed: int | None = None):
    """The :class:`repro.methods.prolong.ProLongMix` of ProLong arm ``name`` (``seed``: ``extend.seed``) over
    ``streams``: a :func:`build_streams` folder, or :class:`repro.data.streams.TokenStream` objects named as
    ``prolong.sources`` (a user's own data)."""
    from repro.data.mixing import Mixture
    from repro.data.streams import TaskStream
    from repro.data.synthetic import RetrievalRows
    from repro.methods.prolong import ProLongMix

    e, arm = p.extend, _arm(name)
    seed = e.seed if seed is None else seed
    streams = load_streams(Path(streams), seed) if isinstance(streams, (str, Path)) else list(streams)
    tasks = TaskStream(TASK_STREAM, RetrievalRows(tokenizer, e.train_tasks, context_weight=e.context_weight), seed)
    mixture = Mixture([*streams, tasks], arm_proportions(p, name), seed=seed)
    length, rows = arm_length(p, name)
    masks = p.prolong.doc_masks if arm.doc_masks is None else arm.doc_masks
    return ProLongMix(name, mixture, length, rows, tokenizer.pad_token_id, doc_masks=masks)


def spec_fields(p: Profile, name: str) -> dict:
    """What of the profile a ProLong arm's weights depend on beyond ``extend`` and the base."""
    from repro.methods.arms import split_seed

    pl = dataclasses.asdict(p.prolong)
    used = ("mix", "task_share", "doc_masks", "rope_ntk_multiple", "train_length_factor")
    return {"arm": dataclasses.asdict(_arm(split_seed(name)[0])), "prolong": {k: pl[k] for k in used},
            "data": streams_key(p), "rope_theta": arm_rope_theta(p, name)}


def train_prolong(profile: Profile | str, name: str = "prolong", run_dir: str | Path = "runs", force: bool = False,
                  progress: bool = True) -> Path:
    """Train (or reuse) ProLong arm ``name`` (``prolong@seed<k>`` for a replicate); returns its ``final`` folder."""
    from repro.data.tokenizer import load_tokenizer
    from repro.methods.prepared import PreparedBatches
    from repro.models import load_model
    from repro.stages.base import train_base
    from repro.stages.builders import model_settings, prepare_model
    from repro.stages.corpus import build_corpus
    from repro.stages.extension import prepare_extension_data
    from repro.stages.keys import extension_key, replicate_profile
    from repro.train import Trainer, TrainConfig

    p = as_profile(profile)
    rp, arm = replicate_profile(p, name)
    _arm(arm)
    out = stage_dir(run_dir, p, f"extend-{name}", extension_key(p, name))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        e = rp.extend
        base = train_base(p, run_dir, progress=progress)
        model = load_model(base, attn_implementation=p.model.attn_implementation, **model_settings(p, arm))
        tok = load_tokenizer(build_corpus(p, run_dir).path / "tokenizer")
        m = prolong_method(rp, arm, tok, build_streams(p, run_dir))
        prepare_model(p, m, model)  # document masks: each packed document attended alone (App. A.3)
        data = prepare_extension_data(p, name, m, run_dir)
        cfg = TrainConfig.from_section(e, e.steps, schedule="cosine")
        final = Trainer(model, PreparedBatches(data, inner=m), cfg, out, progress=progress).train()
        tok.save_pretrained(final)
        return final
