"""The corpus stage: read the sources, train (or load) the tokenizer, tokenize, write a manifest."""

from __future__ import annotations

import json
import time
from functools import lru_cache
from pathlib import Path

import numpy as np
from transformers import AutoTokenizer

from repro import model_store
from repro.data.corpus import Corpus, Document, iter_source, manifest
from repro.data.special_tokens import document_separator
from repro.data.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer
from repro.io import atomic_dir, atomic_write_json, atomic_write_text, read_json, read_jsonl
from repro.manifest import environment
from repro.profiles import Profile
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.keys import corpus_key


def _read_documents(p: Profile) -> list[Document]:
    docs: list[Document] = []
    for spec in p.corpus.sources:
        docs += list(iter_source(spec, p.corpus.max_bytes_per_source, p.corpus.synthetic_docs, p.corpus.seed))
    if not docs:
        raise ValueError(f"corpus sources {p.corpus.sources} produced no documents")
    return docs


def _tokenizer_sample(docs: list[Document], cap: int | None) -> list[str]:
    """Round-robin over sources until ``cap`` bytes, so every source shapes the vocabulary."""
    by_src: dict[str, list[str]] = {}
    for d in docs:
        by_src.setdefault(d.source, []).append(d.text)
    out, used, i = [], 0, 0
    while cap is None or used < cap:
        progressed = False
        for texts in by_src.values():
            if i < len(texts):
                t = texts[i][:200_000]
                out.append(t)
                used += len(t)
                progressed = True
        if not progressed:
            break
        i += 1
    return out


def build_corpus(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False) -> Corpus:
    """Read the sources, train (or load) the tokenizer, tokenize, and write the manifest."""
    p = as_profile(profile)
    path = stage_dir(run_dir, p, "corpus", corpus_key(p))
    with compute_once(path, "manifest.json", force) as done:
        if done is None:
            t0 = time.perf_counter()
            docs = _read_documents(p)
            if p.tokenizer.pretrained:
                tok = AutoTokenizer.from_pretrained(model_store.resolve(p.tokenizer.pretrained))  # a name: fetched
            else:
                tok = train_tokenizer(_tokenizer_sample(docs, p.tokenizer.train_bytes), p.tokenizer.vocab_size)
            enc = tok([d.text for d in docs], add_special_tokens=False).input_ids
            sep = document_separator(tok)  # the tokenizer's BOS, unless that opens a chat turn
            ids = [[sep, *e] for e in enc]
            counts = [len(e) for e in ids]
            with atomic_dir(path) as tmp:
                save_tokenizer(tok, tmp / "tokenizer")
                dtype = np.uint16 if len(tok) < 65_536 else np.int32
                np.save(tmp / "tokens.npy", np.concatenate([np.asarray(e, dtype=dtype) for e in ids]))
                np.save(tmp / "offsets.npy", np.concatenate([[0], np.cumsum(counts)]).astype(np.int64))
                atomic_write_text(tmp / "documents.jsonl", "".join(
                    json.dumps({"source": d.source, "name": d.name, "text": d.text}) + "\n" for d in docs))
                m = manifest(docs, counts)
                m.update(tokenizer={"vocab_size": len(tok), "pretrained": p.tokenizer.pretrained},
                         build_seconds=round(time.perf_counter() - t0, 1), config=p.corpus,
                         environment=environment())
                atomic_write_json(tmp / "manifest.json", m)
    return _load_corpus(str(path))


@lru_cache(maxsize=4)
def _load_corpus(path: str) -> Corpus:
    path = Path(path)
    recs = read_jsonl(path / "documents.jsonl")
    docs = [Document(r["text"], r["source"], r["name"]) for r in recs]
    return Corpus(path, docs, np.load(path / "tokens.npy", allow_pickle=False),
                  np.load(path / "offsets.npy", allow_pickle=False), [d.source for d in docs],
                  read_json(path / "manifest.json"))


def get_corpus(profile: Profile | str, run_dir: str | Path = "runs") -> Corpus:
    """The built corpus (built first if missing)."""
    return build_corpus(profile, run_dir)


def get_tokenizer(profile: Profile | str, run_dir: str | Path = "runs"):
    """The tokenizer trained (or loaded) by the corpus stage."""
    return load_tokenizer(build_corpus(profile, run_dir).path / "tokenizer")
