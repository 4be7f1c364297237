"""ProLong's data streams as a cached stage (PL-Tab3); the arms train through :func:`repro.stages.arms.train_arm`,
built by :func:`repro.methods.prolong.build`.

:func:`build_streams`: each ``prolong.sources`` entry read and tokenized once (:mod:`repro.data.long_sources`),
split by the long threshold (long streams keep documents at or above it, the others the shorter ones), cached
with PL-Tab3's counts per source.
"""

from __future__ import annotations

from pathlib import Path

from repro.data.long_sources import long_tokens, source_documents, split_by_length
from repro.data.streams import save_stream
from repro.data.tokenizer import load_tokenizer
from repro.io import atomic_dir, atomic_write_json
from repro.manifest import with_environment
from repro.methods.prolong import long_threshold
from repro.profiles import Profile
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.corpus import build_corpus
from repro.stages.keys import streams_key


def build_streams(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False) -> Path:
    """Read, tokenize and split ``prolong.sources`` once; returns the folder (``manifest.json`` holds PL-Tab3's
    counts per source: documents and tokens in all and at or above the threshold, and what each stream keeps)."""
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
                save_stream(tmp, name, kept)
                manifest["sources"][name] = {"spec": spec, "kind": "long" if long else "short",
                                             **long_tokens(docs, thr), "kept_documents": len(kept),
                                             "kept_tokens": int(sum(len(d) for d in kept))}
            atomic_write_json(tmp / "manifest.json", with_environment(manifest))
        return out
