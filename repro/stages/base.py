"""The base-model stage: a tiny Llama trained from scratch with the base curriculum."""

from __future__ import annotations

from pathlib import Path

from repro import model_store
from repro.data.tokenizer import load_tokenizer
from repro.methods import get_method
from repro.models import build_tiny
from repro.profiles import Profile
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.corpus import build_corpus
from repro.stages.keys import base_key
from repro.train import TrainConfig, Trainer


def train_base(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
               progress: bool = True) -> Path:
    """Train (or reuse) the base model; returns its ``final`` folder (weights + tokenizer).

    With ``model.pretrained`` set (paper profile, a user's model) that checkpoint is the base: a name of
    :data:`repro.model_store.MODELS` is its fetched folder (fetched now on first use).
    """
    p = as_profile(profile)
    if p.model.pretrained:
        return Path(model_store.resolve(p.model.pretrained, progress=progress))
    out = stage_dir(run_dir, p, "base", base_key(p))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        corpus = build_corpus(p, run_dir)
        tok = load_tokenizer(corpus.path / "tokenizer")
        # max_position_embeddings: twice the longest length the model is trained or evaluated at
        max_pos = max(max(p.eval.lengths), p.extend.target_window) * 2
        model = build_tiny(p.model, len(tok), max_pos, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id,
                           p.base.seed)
        method = get_method("base_curriculum", cfg=p.base, tokenizer=tok, corpus=corpus.rows(weight=p.base.lm_weight),
                            vocab_size=len(tok))
        cfg = TrainConfig.from_section(p.base, method.max_steps(), schedule="constant", device=p.run.device)
        final = Trainer(model, method, cfg, out, progress=progress).train()
        tok.save_pretrained(final)
        return final
