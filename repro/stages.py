"""Pipeline stages with config-hash caching: corpus, tokenizer, base model, extension, evaluation.

Each stage writes under ``<run_dir>/<profile>/<stage>-<hash>/`` where the hash
covers every config field that can change its result (and the upstream
stages' hashes). A finished stage is reused; an unfinished training stage
resumes from its last checkpoint; ``force=True`` recomputes.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np

from repro.data.corpus import Document, iter_heldout_code, iter_source, manifest
from repro.data.synthetic import CorpusRows
from repro.data.tokenizer import load_tokenizer, save_tokenizer, train_tokenizer
from repro.io import atomic_dir, atomic_write_json, atomic_write_text, config_hash, read_json, read_jsonl
from repro.profiles import Profile, get_profile

STAGE_VERSION = {"corpus": 1, "base": 1, "extend": 1, "eval": 1, "analysis": 1, "replay": 1, "merge": 1}
"""Bumped when a stage's code changes what it produces (invalidates caches)."""


def _profile(p: Profile | str) -> Profile:
    return get_profile(p) if isinstance(p, str) else p


def stage_dir(run_dir: str | Path, profile: Profile, stage: str, key: str) -> Path:
    return Path(run_dir) / profile.name / f"{stage}-{key}"


# -- corpus + tokenizer ------------------------------------------------------------------------
@dataclass
class Corpus:
    """The built corpus: documents, their token arrays and the manifest."""

    path: Path
    documents: list[Document]
    tokens: np.ndarray
    offsets: np.ndarray
    sources: list[str]
    manifest: dict

    def rows(self, sources: tuple[str, ...] | None = None, weight: float = 1.0) -> CorpusRows:
        """Language-modelling rows over documents of ``sources`` (default: every non-synthetic source)."""
        keep = [i for i, s in enumerate(self.sources) if (s in sources if sources else s != "synthetic")]
        parts = [self.tokens[self.offsets[i]:self.offsets[i + 1]] for i in keep]
        toks = np.concatenate(parts) if parts else np.zeros(0, dtype=self.tokens.dtype)
        offs = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
        return CorpusRows(toks, offs, weight)


def corpus_key(p: Profile) -> str:
    return config_hash({"v": STAGE_VERSION["corpus"], "corpus": p.corpus, "tokenizer": p.tokenizer})


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
    p = _profile(profile)
    path = stage_dir(run_dir, p, "corpus", corpus_key(p))
    if force and path.exists():
        shutil.rmtree(path)
    if not (path / "manifest.json").exists():
        t0 = time.perf_counter()
        docs = _read_documents(p)
        if p.tokenizer.pretrained:
            from transformers import AutoTokenizer
            tok = AutoTokenizer.from_pretrained(p.tokenizer.pretrained)
        else:
            tok = train_tokenizer(_tokenizer_sample(docs, p.tokenizer.train_bytes), p.tokenizer.vocab_size)
        enc = tok([d.text for d in docs], add_special_tokens=False).input_ids
        ids = [[tok.bos_token_id, *e] for e in enc]
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
                     build_seconds=round(time.perf_counter() - t0, 1), config=p.corpus)
            atomic_write_json(tmp / "manifest.json", m)
    return _load_corpus(str(path))


@lru_cache(maxsize=4)
def _load_corpus(path: str) -> Corpus:
    path = Path(path)
    recs = read_jsonl(path / "documents.jsonl")
    docs = [Document(r["text"], r["source"], r["name"]) for r in recs]
    return Corpus(path, docs, np.load(path / "tokens.npy"), np.load(path / "offsets.npy"),
                  [d.source for d in docs], read_json(path / "manifest.json"))


def get_corpus(profile: Profile | str, run_dir: str | Path = "runs") -> Corpus:
    return build_corpus(profile, run_dir)


def get_tokenizer(profile: Profile | str, run_dir: str | Path = "runs"):
    return load_tokenizer(build_corpus(profile, run_dir).path / "tokenizer")


# -- base model --------------------------------------------------------------------------------
def base_key(p: Profile) -> str:
    return config_hash({"v": STAGE_VERSION["base"], "corpus": corpus_key(p), "model": p.model, "base": p.base,
                        "max_pos": max(p.eval.lengths)})


def train_base(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False, progress: bool = True) -> Path:
    """Train (or reuse) the base model; returns its ``final`` folder (weights + tokenizer)."""
    from repro.models import build_tiny
    from repro.train import Trainer, TrainConfig, get_method

    p = _profile(profile)
    if p.model.pretrained:
        return Path(p.model.pretrained)
    out = stage_dir(run_dir, p, "base", base_key(p))
    if force and out.exists():
        shutil.rmtree(out)
    final = out / "final"
    if final.exists():
        return final
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    max_pos = max(max(p.eval.lengths), p.extend.target_window) * 2
    model = build_tiny(p.model, len(tok), max_pos, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, p.base.seed)
    method = get_method("base_curriculum", cfg=p.base, tokenizer=tok, corpus=corpus.rows(weight=p.base.lm_weight),
                        vocab_size=len(tok))
    b = p.base
    cfg = TrainConfig(max_steps=method.max_steps(), lr=b.lr, warmup_steps=b.warmup_steps, schedule="constant",
                      grad_clip=b.grad_clip, bf16=b.bf16, checkpoint_every=b.checkpoint_every, seed=b.seed)
    final = Trainer(model, method, cfg, out, progress=progress).train()
    tok.save_pretrained(final)
    return final


def _finished(out: Path, force: bool) -> Path | None:
    """``out/final`` when a training stage already finished there (``force`` deletes it first)."""
    if force and out.exists():
        shutil.rmtree(out)
    return out / "final" if (out / "final").exists() else None


# -- extension ---------------------------------------------------------------------------------
def _spec_key(p: Profile, method: str) -> dict:
    """What of an arm's spec changes its result (defaults of later fields are left out so that
    earlier caches stay valid)."""
    from repro.methods import ExtensionSpec, extension_spec

    spec = extension_spec(method)
    key = {"transform": spec.transform, "sample_len": spec.sample_len, "params": spec.params}
    default = ExtensionSpec()
    if spec.sample_ratio != default.sample_ratio or spec.selection != default.selection:
        key.update(sample_ratio=spec.sample_ratio, selection=spec.selection,
                   resolved_len=spec.resolve_len(p.extend.target_window, p.longrecipe.sample_ratio))
    if spec.selection == "anchors":
        key["anchors"] = analysis_key(p)
    return key


def extension_key(p: Profile, method: str) -> str:
    return config_hash({"v": STAGE_VERSION["extend"], "base": base_key(p), "extend": p.extend,
                        "method": method, "spec": _spec_key(p, method)})


def train_extension(profile: Profile | str, method: str = "flt", run_dir: str | Path = "runs", force: bool = False,
                    progress: bool = True) -> Path:
    """Extend the base model to the target window with a named method; returns ``final``."""
    from repro.methods import extension_spec
    from repro.models import load_model, rope_parameters
    from repro.train import Trainer, TrainConfig

    p = _profile(profile)
    spec = extension_spec(method)
    out = stage_dir(run_dir, p, f"extend-{method}", extension_key(p, method))
    if (done := _finished(out, force)) is not None:
        return done
    e = p.extend
    if e.deepspeed_config:
        raise NotImplementedError(
            f"extend.deepspeed_config={e.deepspeed_config!r}: DeepSpeed training is not wired into the trainer "
            "yet (repro.accel holds the guarded helpers); set deepspeed_config=None to train single-process")
    anchors = impactful_tokens(p, run_dir, progress=progress)["anchors"] if spec.selection == "anchors" else None
    base = train_base(p, run_dir, progress=progress)
    rope = None
    if e.rope_type != "default" or e.rope_theta is not None:
        theta = e.rope_theta or p.model.rope_theta
        rope = rope_parameters(e.rope_type, theta, e.rope_factor, p.base.window)
    model = load_model(base, rope=rope, attn_implementation=p.model.attn_implementation)
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    m = extension_method(p, method, tok, corpus.rows(), anchors)
    cfg = TrainConfig(max_steps=e.steps, lr=e.lr, warmup_steps=e.warmup_steps, schedule="cosine",
                      min_lr_ratio=e.min_lr_ratio, grad_clip=e.grad_clip, bf16=e.bf16,
                      checkpoint_every=e.checkpoint_every, seed=e.seed)
    final = Trainer(model, m, cfg, out, progress=progress).train()
    tok.save_pretrained(final)
    return final


def extension_method(p: Profile, method: str, tokenizer, corpus_rows: CorpusRows, anchors: np.ndarray | None = None,
                     seed: int | None = None):
    """The :class:`repro.methods.Extension` of a named arm with the profile's settings (``seed``
    overrides ``extend.seed``); ``anchors`` are needed by arms that select anchor sentences."""
    from repro.methods import extension_spec
    from repro.train import get_method

    spec, e = extension_spec(method), p.extend
    return get_method("extension", name=method, spec=spec, target=e.target_window, batch_size=e.batch_size,
                      retrieval_fraction=e.retrieval_fraction, tokenizer=tokenizer, corpus=corpus_rows,
                      seed=e.seed if seed is None else seed, context_weight=e.context_weight,
                      train_tasks=e.train_tasks, sample_len=spec.resolve_len(e.target_window, p.longrecipe.sample_ratio),
                      anchors=anchors)


def extension_arms(profile: Profile | str) -> tuple[str, ...]:
    """Every extension arm the training notebook trains: FLT, the LongRecipe Table 1 and Table 3 arms,
    and the token-ratio arms of ``longrecipe.ratios`` (Table 4)."""
    from repro.methods import EXTENSION_METHODS, ratio_arm

    p = _profile(profile)
    arms = list(EXTENSION_METHODS)
    arms += [n for n in (ratio_arm(r, p.longrecipe.sample_ratio) for r in p.longrecipe.ratios) if n not in arms]
    return tuple(arms)


# -- LongRecipe: impactful tokens, replay, merging -----------------------------------------------
def analysis_key(p: Profile) -> str:
    lr = p.longrecipe
    return config_hash({"v": STAGE_VERSION["analysis"], "base": base_key(p), "flt": extension_key(p, "flt"),
                        "fields": [lr.analysis_texts, lr.analysis_source, lr.top_fraction, lr.anchor_enrichment,
                                   lr.anchor_min_count, lr.max_anchor_types], "target": p.extend.target_window})


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
    rng = np.random.default_rng(12345)
    pick = sorted(rng.choice(ok, size=p.longrecipe.analysis_texts, replace=False).tolist())
    return [corpus.documents[i].text for i in pick]


def impactful_tokens(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
                     progress: bool = True) -> dict:
    """LongRecipe §4.1 on base vs FLT: logit changes, top tokens per position, POS tags, anchors (cached).

    Returns ``{"path", "anchors" (int array), "summary" (dict)}``; the arrays are in ``analysis.npz``
    and the per-token tags in ``tags.json``.
    """
    from repro import token_analysis as ta
    from repro.models import load_model

    p = _profile(profile)
    lr = p.longrecipe
    out = stage_dir(run_dir, p, "analysis", analysis_key(p))
    if force and out.exists():
        shutil.rmtree(out)
    if not (out / "summary.json").exists():
        t0 = time.perf_counter()
        base = load_model(train_base(p, run_dir, progress=progress)).eval()
        ext = load_model(train_extension(p, "flt", run_dir, progress=progress)).eval()
        tok = get_tokenizer(p, run_dir)
        res = ta.analyse(base, ext, tok, analysis_texts(p, run_dir), p.extend.target_window, fraction=lr.top_fraction,
                         tagger=ta.load_tagger(), progress=progress, enrichment=lr.anchor_enrichment,
                         min_count=lr.anchor_min_count, max_types=lr.max_anchor_types)
        with atomic_dir(out) as tmp:
            np.savez_compressed(tmp / "analysis.npz", samples=res.samples, changes=res.changes,
                                selected=res.selected, delta=res.delta, counts=res.counts, anchors=res.anchors)
            atomic_write_json(tmp / "tags.json", res.tags)
            atomic_write_json(tmp / "summary.json", {
                "anchors": [int(a) for a in res.anchors],
                "anchor_pieces": [tok.decode([int(a)]) for a in res.anchors],
                "texts": lr.analysis_texts, "length": p.extend.target_window, "source": lr.analysis_source,
                "seconds": round(time.perf_counter() - t0, 1)})
    summary = read_json(out / "summary.json")
    return {"path": out, "anchors": np.asarray(summary["anchors"], dtype=np.int64), "summary": summary}


def load_analysis(profile: Profile | str, run_dir: str | Path = "runs", progress: bool = True):
    """The cached :class:`repro.token_analysis.TokenAnalysis` of :func:`impactful_tokens` (computed if missing)."""
    from repro.token_analysis import TokenAnalysis

    path = impactful_tokens(profile, run_dir, progress=progress)["path"]
    z = np.load(path / "analysis.npz")
    return TokenAnalysis(samples=z["samples"], changes=z["changes"], selected=z["selected"], delta=z["delta"],
                         counts=z["counts"], anchors=z["anchors"], tags=read_json(path / "tags.json"))


def extension_tokens(path: Path) -> int:
    """Tokens an extension run trained on (sample tokens, padding excluded), from its metrics."""
    rows = metrics(path)
    last = rows[-1]
    return int(last.get("method_tokens", sum(r["tokens"] for r in rows)))


def replay_key(p: Profile, method: str) -> str:
    return config_hash({"v": STAGE_VERSION["replay"], "ext": extension_key(p, method),
                        "lr": [p.longrecipe.replay_token_fraction, p.longrecipe.replay_lr_ratio]})


def replay_steps(p: Profile, ext_tokens: int) -> int:
    """Steps of ``extend.batch_size`` rows of the base window holding ``replay_token_fraction`` of the
    extension's tokens (at least one)."""
    per_step = p.extend.batch_size * p.base.window
    return max(1, int(round(p.longrecipe.replay_token_fraction * ext_tokens / per_step)))


def replay_method(p: Profile, tokenizer, corpus: Corpus):
    """The replay data stream: the base curriculum's last stage (retrieval, copy and corpus rows at the
    base window), ``extend.batch_size`` base windows of retrieval per step, its own seed."""
    from repro.train import get_method

    b = replace(p.base, seed=p.base.seed + 7919, tokens_per_step=p.extend.batch_size * p.base.window)
    m = get_method("base_curriculum", cfg=b, tokenizer=tokenizer, corpus=corpus.rows(weight=b.lm_weight),
                   vocab_size=len(tokenizer))
    m.load_state_dict({**m.state_dict(), "phase": "retrieval", "level": len(b.retrieval_lengths) - 1,
                       "final_left": -1})
    m.name = "replay"
    return m


def train_replay(profile: Profile | str, method: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> Path:
    """LongRecipe §4.3 pretraining-data replay: continue an extension checkpoint on the base model's
    training distribution (the curriculum's last stage: retrieval, copy and corpus rows at the base
    window) at ``replay_lr_ratio`` x the extension learning rate, for ``replay_token_fraction`` of its
    tokens. Returns ``final``."""
    from repro.models import load_model
    from repro.train import Trainer, TrainConfig

    p = _profile(profile)
    out = stage_dir(run_dir, p, f"replay-{method}", replay_key(p, method))
    if (done := _finished(out, force)) is not None:
        return done
    ext = train_extension(p, method, run_dir, progress=progress)
    steps = replay_steps(p, extension_tokens(ext))
    model = load_model(ext, attn_implementation=p.model.attn_implementation)
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    m = replay_method(p, tok, corpus)
    e = p.extend
    cfg = TrainConfig(max_steps=steps, lr=e.lr * p.longrecipe.replay_lr_ratio, warmup_steps=0, schedule="cosine",
                      min_lr_ratio=0.1, grad_clip=e.grad_clip, bf16=e.bf16, checkpoint_every=0, seed=m.cfg.seed)
    out.mkdir(parents=True, exist_ok=True)  # the plan is written first, so a finished stage always has it
    atomic_write_json(out / "replay.json", {"from": str(ext), "steps": steps, "lr": cfg.lr,
                                            "extension_tokens": extension_tokens(ext)})
    final = Trainer(model, m, cfg, out, progress=progress).train()
    tok.save_pretrained(final)
    return final


def merge_key(p: Profile, method: str) -> str:
    return config_hash({"v": STAGE_VERSION["merge"], "replay": replay_key(p, method),
                        "lambdas": p.longrecipe.merge_lambdas})


def merge_replayed(profile: Profile | str, method: str, run_dir: str | Path = "runs", force: bool = False,
                   progress: bool = True) -> Path:
    """Eq. 8: ``λ1 · base + λ2 · (method after replay)``; returns the merged folder."""
    from repro.merging import merge_checkpoints

    p = _profile(profile)
    out = stage_dir(run_dir, p, f"merge-{method}", merge_key(p, method))
    if (done := _finished(out, force)) is not None:
        return done
    replayed = train_replay(p, method, run_dir, progress=progress)
    return merge_checkpoints(train_base(p, run_dir, progress=progress), replayed, out / "final",
                             p.longrecipe.merge_lambdas)


def checkpoint_path(profile: Profile | str, name: str, run_dir: str | Path = "runs") -> Path:
    """Path of a finished checkpoint by name; error if missing.

    Names: ``base``, an extension arm (``flt``, ``pose``, ``longrecipe_r10``, ...), ``<arm>+replay``
    (after pretraining-data replay) and ``<arm>+merge`` (replayed model merged with the base, Eq. 8).
    """
    p = _profile(profile)
    if name == "base":
        path = Path(p.model.pretrained) if p.model.pretrained else stage_dir(run_dir, p, "base", base_key(p)) / "final"
    elif name.endswith("+replay"):
        m = name[:-len("+replay")]
        path = stage_dir(run_dir, p, f"replay-{m}", replay_key(p, m)) / "final"
    elif name.endswith("+merge"):
        m = name[:-len("+merge")]
        path = stage_dir(run_dir, p, f"merge-{m}", merge_key(p, m)) / "final"
    else:
        path = stage_dir(run_dir, p, f"extend-{name}", extension_key(p, name)) / "final"
    if not p.model.pretrained and not path.exists():
        raise FileNotFoundError(f"checkpoint {name!r} for profile {p.name!r} not found at {path}; "
                                "run the training notebook first (python -m repro reproduce --only training)")
    return path


def metrics(path: Path) -> list[dict]:
    """The metrics log of a training stage (``path`` is its ``final`` folder or the stage folder)."""
    d = path.parent if path.name == "final" else path
    return read_jsonl(d / "metrics.jsonl")


# -- evaluation --------------------------------------------------------------------------------
def evaluate_checkpoint(profile: Profile | str, name: str, tasks: tuple[str, ...] = ("niah_single_1",),
                        run_dir: str | Path = "runs", force: bool = False, progress: bool = True,
                        rope: dict | None = None, *, lengths: tuple[int, ...] | None = None,
                        depths: tuple[float, ...] | None = None, samples: int | None = None,
                        seeds: tuple[int, ...] | None = None, record: bool = False):
    """Evaluate a named checkpoint on the profile's grid (cached as JSON).

    ``lengths``, ``depths``, ``samples`` and ``seeds`` (evaluation seeds, see
    :class:`repro.evaluate.EvalGrid`) override the profile's ``eval`` grid.
    Cells too short for their task are skipped and listed under ``skipped``.
    Returns the result rows, or with ``record=True`` the whole cached record
    (``results``, ``skipped``, ``seconds``, ``grid``, ``checkpoint``, ``rope``).
    """
    from repro.evaluate import EvalGrid, run_grid
    from repro.models import load_model

    p = _profile(profile)
    ckpt = checkpoint_path(p, name, run_dir)
    grid = EvalGrid(tasks=tuple(tasks), lengths=tuple(lengths or p.eval.lengths),
                    depths=tuple(depths or p.eval.depths), samples=samples or p.eval.samples,
                    seed=p.eval.seed, batch_size=p.eval.batch_size, eval_seeds=tuple(seeds or (0,)))
    key = config_hash({"v": STAGE_VERSION["eval"], "ckpt": str(ckpt), "grid": grid, "rope": rope})
    out = Path(run_dir) / p.name / "eval" / f"{name}-{key}.json"
    if out.exists() and not force:
        rec = read_json(out)
        return rec if record else rec["results"]
    model = load_model(ckpt, rope=rope, max_positions=max(*p.eval.lengths, *grid.lengths) * 2)
    tok = load_tokenizer(ckpt) if (ckpt / "tokenizer.json").exists() else get_tokenizer(p, run_dir)
    t0 = time.perf_counter()
    skipped: list[dict] = []
    results = run_grid(model, tok, grid, progress=progress, label=name, skipped=skipped)
    rec = {"checkpoint": str(ckpt), "model": name, "seconds": time.perf_counter() - t0, "grid": grid,
           "rope": rope, "skipped": skipped, "results": results}
    atomic_write_json(out, rec)
    return read_json(out) if record else results


def available_checkpoints(profile: Profile | str, run_dir: str | Path = "runs") -> list[str]:
    """Names of the finished checkpoints in ``run_dir``: ``base``, extension arms, ratio arms, replay/merge."""
    p = _profile(profile)
    out = []
    names = ["base", *extension_arms(p)]
    names += [f"{m}+{stage}" for m in p.longrecipe.replay_methods for stage in ("replay", "merge")]
    for name in names:
        try:
            checkpoint_path(p, name, run_dir)
        except FileNotFoundError:
            continue
        out.append(name)
    return out


def checkpoint_rope_theta(profile: Profile | str, name: str, run_dir: str | Path = "runs") -> float:
    """The RoPE base in a checkpoint's config (what a YaRN override must keep)."""
    from transformers import AutoConfig

    cfg = AutoConfig.from_pretrained(str(checkpoint_path(profile, name, run_dir)))
    params = getattr(cfg, "rope_parameters", None) or {}
    return float(params.get("rope_theta", getattr(cfg, "rope_theta", _profile(profile).model.rope_theta)))


def run_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True) -> dict[str, dict]:
    """Evaluate a checkpoint on every part of :func:`repro.reports.suite_plan`; part -> cached record."""
    from repro.reports import suite_plan

    p = _profile(profile)
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
    rng = np.random.default_rng(4242)
    return [rows.segment(rng, w, whole=True).tokens for _ in range(n)], "corpus windows (seen in training)"


def short_lm_loss(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False) -> dict:
    """Short-window language-modelling loss: the stand-in for general abilities (LongRecipe Tab. 1-2).

    Mean next-token cross-entropy (nats) of the named checkpoint on :func:`short_lm_windows`;
    returns ``{"loss", "windows", "tokens", "window", "source"}``.
    """
    import torch

    from repro.models import forward, load_model

    p = _profile(profile)
    ckpt = checkpoint_path(p, name, run_dir)
    n, w = p.longrecipe.short_lm_windows, p.base.window
    key = config_hash({"ckpt": str(ckpt), "n": n, "w": w, "v": 2})
    out = Path(run_dir) / p.name / "eval" / f"lmloss-{name}-{key}.json"
    if out.exists() and not force:
        return read_json(out)
    windows, source = short_lm_windows(p, run_dir)
    model = load_model(ckpt).eval()
    total, count = 0.0, 0
    with torch.no_grad():
        for toks in windows:
            ids = torch.as_tensor(toks[None])
            logits = forward(model, ids).logits[0, :-1].float()
            total += float(torch.nn.functional.cross_entropy(logits, ids[0, 1:], reduction="sum"))
            count += ids.shape[1] - 1
    rec = {"checkpoint": str(ckpt), "loss": total / count, "windows": len(windows), "tokens": count, "window": w,
           "source": source}
    atomic_write_json(out, rec)
    return rec


def run_lr_suite(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> dict[str, dict]:
    """Evaluate a checkpoint on the LongRecipe grid (:func:`repro.reports_longrecipe.lr_plan`).

    LR-Tab1's arms also get the YaRN column; replayed and merged checkpoints (LR-Tab2) only the
    short-window part. Returns part -> cached record.
    """
    from repro.reports_longrecipe import TAB1_ARMS, lr_plan

    p = _profile(profile)
    plan = lr_plan(p, name, checkpoint_rope_theta(p, name, run_dir), yarn=name in TAB1_ARMS)
    if "+" in name or name == "base":
        plan = {"short": plan["short"]}
    return _run_plan(p, name, plan, run_dir, force, progress)


def general_abilities(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False) -> dict:
    """The paper's general-ability benchmarks (``longrecipe.general_benchmarks``) on a checkpoint, cached.

    Runs lm-evaluation-harness (:func:`repro.general.lm_eval_scores`; GPU profile). Returns
    ``{}`` when no benchmark is configured (the tiny profile uses :func:`short_lm_loss` instead).
    """
    from repro.general import lm_eval_scores

    p = _profile(profile)
    tasks = p.longrecipe.general_benchmarks
    if not tasks:
        return {}
    ckpt = checkpoint_path(p, name, run_dir)
    out = Path(run_dir) / p.name / "eval" / f"general-{name}-{config_hash({'ckpt': str(ckpt), 'tasks': tasks})}.json"
    if out.exists() and not force:
        return read_json(out)
    rec = lm_eval_scores(ckpt, tasks)
    atomic_write_json(out, rec)
    return rec
