"""LongRecipe §4.3 as cached stages: pretraining-data replay after extension, then merging with the base."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from repro.data.tokenizer import load_tokenizer
from repro.io import atomic_write_json
from repro.merging import merge_checkpoints
from repro.methods import get_method
from repro.models import load_model
from repro.profiles import Profile
from repro.stages.base import train_base
from repro.stages.cache import as_profile, checkpoint_id, compute_once, stage_dir
from repro.stages.corpus import Corpus, build_corpus
from repro.stages.extension import extension_tokens, train_extension
from repro.stages.keys import merge_key, replay_key
from repro.train import Trainer, TrainConfig


def replay_steps(p: Profile, ext_tokens: int) -> int:
    """Steps of ``extend.batch_size`` rows of the base window holding ``replay_token_fraction`` of the
    extension's tokens (at least one)."""
    per_step = p.extend.batch_size * p.base.window
    return max(1, int(round(p.longrecipe.replay_token_fraction * ext_tokens / per_step)))


def replay_method(p: Profile, tokenizer, corpus: Corpus):
    """The replay data stream (the registered ``replay`` method): the base curriculum's last stage
    (retrieval, copy and corpus rows at the base window), ``extend.batch_size`` base windows of
    retrieval per step, its own seed."""
    # a seed of its own (a prime offset), so replay does not repeat the base model's batches
    b = replace(p.base, seed=p.base.seed + 7919, tokens_per_step=p.extend.batch_size * p.base.window)
    return get_method("replay", cfg=b, tokenizer=tokenizer, corpus=corpus.rows(weight=b.lm_weight),
                      vocab_size=len(tokenizer))


def train_replay(profile: Profile | str, method: str, run_dir: str | Path = "runs", force: bool = False,
                 progress: bool = True) -> Path:
    """LongRecipe §4.3 pretraining-data replay: continue an extension checkpoint on the base model's
    training distribution (the curriculum's last stage: retrieval, copy and corpus rows at the base
    window) at ``replay_lr_ratio`` x the extension learning rate, for ``replay_token_fraction`` of its
    tokens. Returns ``final``."""
    p = as_profile(profile)
    out = stage_dir(run_dir, p, f"replay-{method}", replay_key(p, method))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        ext = train_extension(p, method, run_dir, progress=progress)
        steps = replay_steps(p, extension_tokens(ext))
        model = load_model(ext, attn_implementation=p.model.attn_implementation)
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        m = replay_method(p, tok, corpus)
        e = p.extend
        cfg = TrainConfig.from_section(e, steps, lr=e.lr * p.longrecipe.replay_lr_ratio, warmup_steps=0,
                                       schedule="cosine", min_lr_ratio=0.1, checkpoint_every=0, seed=m.cfg.seed,
                                       device=p.run.device)
        out.mkdir(parents=True, exist_ok=True)  # the plan is written first, so a finished stage always has it
        atomic_write_json(out / "replay.json", {"from": checkpoint_id(ext, run_dir), "steps": steps, "lr": cfg.lr,
                                                "extension_tokens": extension_tokens(ext)})
        final = Trainer(model, m, cfg, out, progress=progress).train()
        tok.save_pretrained(final)
        return final


def merge_replayed(profile: Profile | str, method: str, run_dir: str | Path = "runs", force: bool = False,
                   progress: bool = True) -> Path:
    """Eq. 8: ``λ1 · base + λ2 · (method after replay)``; returns the merged folder."""
    p = as_profile(profile)
    out = stage_dir(run_dir, p, f"merge-{method}", merge_key(p, method))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        replayed = train_replay(p, method, run_dir, progress=progress)
        return merge_checkpoints(train_base(p, run_dir, progress=progress), replayed, out / "final",
                                 p.longrecipe.merge_lambdas)
