"""Every training stage's cache key, in one place (what of the profile each stage depends on).

Keys chain: a stage's key holds its upstream stages' keys, so changing the
corpus re-trains everything after it. LongRecipe's anchor arms depend on the
impactful-token analysis, which depends on FLT: :func:`extension_key` and
:func:`analysis_key` call each other (never for the same arm).
"""

from __future__ import annotations

import dataclasses

from repro.profiles import Profile
from repro.recipes.variants import replicate_profile
from repro.stages.cache import stage_key

__all__ = ["analysis_key", "base_key", "corpus_key", "extend_fields", "extension_key", "merge_key", "replay_key",
           "replicate_profile", "streams_key"]


def corpus_key(p: Profile) -> str:
    return stage_key("corpus", {"corpus": p.corpus, "tokenizer": p.tokenizer})


def base_key(p: Profile) -> str:
    return stage_key("base", {"corpus": corpus_key(p), "model": p.model, "base": p.base,
                              "max_pos": max(p.eval.lengths)})


def _spec_key(p: Profile, method: str) -> dict:
    """What of an arm's spec changes its result (defaults of later fields are left out so that
    earlier caches stay valid)."""
    from repro.methods import ExtensionSpec, extension_spec
    from repro.methods.arms import cd_arm, pl_arm, rp_arm
    from repro.recipes import BUILTIN, recipe_of

    recipe = recipe_of(method)
    if recipe.name not in BUILTIN:  # a recipe registered beside the papers': its own fields
        return {"recipe": recipe.name, "fields": recipe.key_fields(p, method)}

    if pl_arm(method) is not None:  # ProLong's own rows, RoPE base and length
        from repro.recipes.prolong import key_fields

        return {"pl": {**key_fields(p, method), "data": streams_key(p)}}
    if cd_arm(method) is not None:  # trained as rp_standard with the CDT objective
        from repro.recipes.cdt import key_fields

        sd = dataclasses.asdict(p.selfdistill)
        return {"cd": key_fields(p), "selfdistill": {k: sd[k] for k in ("rope_theta", "bf16")}}
    if (arm := rp_arm(method)) is not None:
        sd = dataclasses.asdict(p.selfdistill)
        used = ("rope_theta", "bf16", "ablation_steps", "matched_steps_ratio", "longce_window", "longce_stride")
        return {"rp": dataclasses.asdict(arm.spec), "schedule": arm.schedule, "selfdistill": {k: sd[k] for k in used}}
    spec = extension_spec(method)
    key = {"transform": spec.transform, "sample_len": spec.sample_len, "params": spec.params}
    default = ExtensionSpec()
    if spec.sample_ratio != default.sample_ratio or spec.selection != default.selection:
        key.update(sample_ratio=spec.sample_ratio, selection=spec.selection,
                   resolved_len=spec.resolve_len(p.extend.target_window, p.longrecipe.sample_ratio))
    if spec.selection == "anchors":
        key["anchors"] = analysis_key(p)
    return key


def extend_fields(p: Profile) -> dict:
    """``p.extend`` without :data:`repro.profiles.EXTEND_RUN_FIELDS` (scheduling only: the bits do not depend
    on them); ``sequence_parallel`` only when it is not 1, so keys of runs without sequence parallelism are
    unchanged."""
    from repro.profiles import EXTEND_RUN_FIELDS

    return {k: v for k, v in dataclasses.asdict(p.extend).items()
            if k not in EXTEND_RUN_FIELDS and not (k == "sequence_parallel" and v == 1)}


def extension_key(p: Profile, method: str) -> str:
    """Key of arm ``method``'s extension; a replicate ``<arm>@seed<k>`` is its arm at the replicate's seed."""
    p, method = replicate_profile(p, method)
    return stage_key("extend", {"base": base_key(p), "extend": extend_fields(p), "method": method,
                                "spec": _spec_key(p, method)})


def streams_key(p: Profile) -> str:
    """Key of ProLong's data streams: the corpus (its tokenizer), the sources, which are long, the threshold."""
    from repro.recipes.prolong import long_threshold

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
