"""Every training stage's cache key, in one place (what of the profile each stage depends on).

Keys chain: a stage's key holds its upstream stages' keys, so changing the
corpus re-trains everything after it. LongRecipe's anchor arms depend on the
impactful-token analysis, which depends on FLT: :func:`extension_key` and
:func:`analysis_key` call each other (never for the same arm).
"""

from __future__ import annotations

import dataclasses

from repro.arms import build_arm, replicate_profile
from repro.methods.armspec import Upstream
from repro.methods.prolong import long_threshold
from repro.profiles import EXTEND_RUN_FIELDS, Profile
from repro.stages.cache import stage_key
from repro.train.config import adamw_impl_of

__all__ = ["analysis_key", "arm_fields", "base_key", "corpus_key", "extend_fields", "extension_key", "merge_key",
           "replay_key", "replicate_profile", "streams_key"]


def corpus_key(p: Profile) -> str:
    return stage_key("corpus", {"corpus": p.corpus, "tokenizer": p.tokenizer})


def base_key(p: Profile) -> str:
    return stage_key("base", {"corpus": corpus_key(p), "model": p.model, "base": p.base,
                              "max_pos": max(p.eval.lengths), **adamw_fields(p.base)})


def adamw_fields(section) -> dict:
    """``{"adamw": impl}`` of the AdamW implementation a training section uses (:func:`adamw_impl_of`), or
    nothing for ``for-loop``: the rounding of every update depends on it, and keys of runs trained with the
    for-loop (this project's earlier versions) stay as they were."""
    impl = adamw_impl_of(section)
    return {} if impl == "for-loop" else {"adamw": impl}


def arm_fields(p: Profile, method: str) -> dict:
    """What of an arm's settings changes its result: its builder's ``cache_fields``
    (:attr:`repro.arms.ArmSpec.cache_fields`), each :class:`~repro.methods.armspec.Upstream` replaced by the key of
    the stage it names (LongRecipe's analysis for the anchor arms, ProLong's streams)."""
    upstream = {"analysis": analysis_key, "streams": streams_key}

    def fill(v):
        if isinstance(v, Upstream):
            return upstream[v.stage](p)
        return {k: fill(x) for k, x in v.items()} if isinstance(v, dict) else v

    return fill(build_arm(p, method).cache_fields)


def extend_fields(p: Profile) -> dict:
    """``p.extend`` without :data:`repro.profiles.EXTEND_RUN_FIELDS` (scheduling only: the bits do not depend
    on them); ``sequence_parallel`` only when it is not 1, so keys of runs without sequence parallelism are
    unchanged."""
    return {k: v for k, v in dataclasses.asdict(p.extend).items()
            if k not in EXTEND_RUN_FIELDS and not (k == "sequence_parallel" and v == 1)}


def extension_key(p: Profile, method: str) -> str:
    """Key of arm ``method``'s extension; a replicate ``<arm>@seed<k>`` is its arm at the replicate's seed."""
    p, method = replicate_profile(p, method)
    return stage_key("extend", {"base": base_key(p), "extend": extend_fields(p), "method": method,
                                "spec": arm_fields(p, method), **adamw_fields(p.extend)})


def streams_key(p: Profile) -> str:
    """Key of ProLong's data streams: the corpus (its tokenizer), the sources, which are long, the threshold."""
    pl = p.prolong
    return stage_key("pldata", {"corpus": corpus_key(p), "sources": pl.sources, "long": pl.long_streams,
                                "threshold": long_threshold(p)})


def analysis_key(p: Profile) -> str:
    lr = p.longrecipe
    return stage_key("analysis", {"base": base_key(p), "flt": extension_key(p, "flt"),
                                  "fields": [lr.analysis_texts, lr.analysis_source, lr.top_fraction,
                                             lr.anchor_enrichment, lr.anchor_min_count, lr.max_anchor_types],
                                  "target": p.extend.target_window})


def replay_key(p: Profile, method: str) -> str:
    return stage_key("replay", {"ext": extension_key(p, method),
                                "lr": [p.longrecipe.replay_token_fraction, p.longrecipe.replay_lr_ratio]})


def merge_key(p: Profile, method: str) -> str:
    return stage_key("merge", {"replay": replay_key(p, method), "lambdas": p.longrecipe.merge_lambdas})
