"""The one table of trained arms: arm name -> the builder that turns a profile into its :class:`ArmSpec`.

Each paper's builder sits at the end of its objective's module (``build`` in :mod:`repro.methods.extension`,
:mod:`repro.methods.selfdistill`, :mod:`repro.methods.cdt`, :mod:`repro.methods.prolong`), so reading an arm from
the command line to its loss is this file and that one. The cached pipeline (:mod:`repro.stages.arms`) and the
command line (:mod:`repro.cli.train`) both build every arm through :func:`build_arm`; the cache keys read the
spec's ``cache_fields`` (:mod:`repro.stages.keys`).

A new method is one objective, one builder and one line in :data:`ARMS` (``tests/recipes/test_new_method.py`` adds
one from the test file itself and trains it through ``python -m repro train``)::

    from repro.arms import ArmData, build_arm, prepare_model
    from repro.models import load_model
    from repro.profiles import get_profile, scaled_profile
    from repro.train import Trainer
    p = scaled_profile(get_profile("tiny"), 4096, base_window=1024)
    spec = build_arm(p, "rp_skip", tokenizer, ArmData(corpus_rows=rows))  # self-distillation, skip view
    model = load_model(path, **spec.model)  # its RoPE base and position range
    prepare_model(p, spec.method, model)
    Trainer(model, spec.method, spec.train, out).train()
"""

from __future__ import annotations

from typing import Callable

from repro.attention.doc_masked import use_doc_masked_attention
from repro.methods import cdt, extension, prolong, selfdistill
from repro.methods.arms import ratio_arm
from repro.methods.armspec import DATA_KINDS, SEED_MARK, ArmData, ArmSpec, Upstream, split_seed
from repro.papers import includes
from repro.profiles import REPLICATE_SEED_STRIDE, Profile, get_profile

__all__ = ["ALIASES", "ARMS", "ArmData", "ArmSpec", "Builder", "DATA_KINDS", "METHOD_NAMES", "PATTERNS", "Upstream",
           "arm_names", "build_arm", "builder_of", "extension_arms", "prepare_model", "replicate_profile"]

Builder = Callable[..., ArmSpec]
"""``build(profile, name, tokenizer=None, data: ArmData | None = None) -> ArmSpec`` (:mod:`repro.methods.armspec`)."""

ARMS: dict[str, Builder] = {
    **{a: extension.build for a in extension.EXTENSION_METHODS},  # FLT, PoSE, RPES, LongRecipe (+ Table 3)
    **{a: selfdistill.build for a in selfdistill.RP_ARMS},  # rp_*: RoPE-perturbed self-distillation, its controls
    **{a: cdt.build for a in cdt.CD_ARMS},  # Context Denoising Training
    **{a: prolong.build for a in prolong.PL_ARMS},  # ProLong's recipe and its ablations
}
"""Every arm name -> its builder."""

PATTERNS: tuple[tuple[Callable[[str], bool], Builder], ...] = (
    (extension.is_ratio_arm, extension.build),  # longrecipe_r<percent>: LongRecipe at that token ratio (Table 4)
)
"""Arm-name patterns -> builder, for names not in :data:`ARMS`."""

METHOD_NAMES: dict[str, str] = {
    "flt": "flt", "pose": "pose", "rpes": "rpes", "longrecipe": "longrecipe",
    "selfdistill": "rp_skip",  # the paper's method: the skip view
    "longce": cdt.CE_BASELINES["longce"],  # LongCE's own arm (the self-distillation comparison's)
    "cdt": "cdt", "prolong": "prolong",
}
"""``python -m repro train --method`` names of the papers' methods -> the arm each trains (any arm name of
:data:`ARMS` and of :data:`ALIASES` is accepted too)."""

ALIASES: dict[str, str] = {"ce": cdt.CE_BASELINES["ce"]}
"""Other names ``--method`` takes: ``ce`` is plain CE at the self-distillation RoPE base (CDT's CE baseline, the
self-distillation comparison's Standard, arm ``rp_standard``)."""


def arm_names() -> tuple[str, ...]:
    """The arm names of :data:`ARMS` and the patterns' forms, for error messages."""
    return (*ARMS, f"{extension.RATIO_PREFIX}<percent> (1..100)")


def builder_of(name: str) -> Builder:
    """The builder of arm ``name`` (a ``@seed<k>`` suffix allowed); ValueError naming the allowed arms."""
    stem = split_seed(name)[0]
    if stem in ARMS:
        return ARMS[stem]
    for matches, build in PATTERNS:
        if matches(stem):
            return build
    raise ValueError(f"unknown arm {name!r}; allowed: {', '.join(arm_names())}, each optionally followed by "
                     f"{SEED_MARK}<k> (k >= 1)")


def replicate_profile(p: Profile, name: str) -> tuple[Profile, str]:
    """``(profile, arm)`` that train replicate ``name``: ``flt@seed2`` -> ``p`` with ``extend.seed`` moved by
    ``2 * REPLICATE_SEED_STRIDE``, ``"flt"``; a plain name -> ``(p, name)``. Replay/merge suffixes stay in
    ``arm`` (``pose+replay@seed1`` -> ``pose+replay``)."""
    stem, k = split_seed(name)
    if not k:
        return p, name
    return p.override(extend={"seed": p.extend.seed + REPLICATE_SEED_STRIDE * k}), stem


def build_arm(p: Profile, name: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """The :class:`ArmSpec` of arm ``name`` (``<arm>@seed<k>``: the arm at the replicate's seed,
    :func:`replicate_profile`); without ``data`` its method is None (what a cache key or a plan needs)."""
    build = builder_of(name)
    return build(replicate_profile(p, name)[0], name, tokenizer, data)


def prepare_model(p: Profile, method, model) -> None:
    """What a method changes on the model before training: with document masks (ProLong) under ``sdpa``, each
    packed document is attended alone (:func:`repro.attention.doc_masked.use_doc_masked_attention`: flash-attn
    varlen or else flex attention's block mask on CUDA, ``sdpa_varlen`` on the CPU)."""
    attn = getattr(model.config, "_attn_implementation", None) or p.model.attn_implementation
    if getattr(method, "doc_masks", False) and attn == "sdpa":
        use_doc_masked_attention(model)


def extension_arms(p: Profile | str, paper: str = "all") -> tuple[str, ...]:
    """The arms the training notebook trains for ``paper`` (:mod:`repro.papers`).

    FLT is the testbed's shared extension (every paper compares against it); LongRecipe adds its
    Table 1 and Table 3 arms and the token-ratio arms of ``longrecipe.ratios`` (Table 4). The arms in
    ``extend.replicate_arms`` follow with their training-seed replicates ``<arm>@seed1`` ... (``extend.seed_replicates``
    seeds in all). Self-distillation adds ``selfdistill.main_arms``, ``matched_arms`` and ``ablation_arms``, then
    the replicates of ``selfdistill.replicate_arms``. CDT adds its CE and LongCE (``cdt.compare_arms``, with their
    replicates; trained once when self-distillation is also run) and ``cdt.arms`` with their replicates. ProLong
    adds ``prolong.arms`` and the replicates of ``prolong.replicate_arms``. A profile that trains nothing
    (``real.enabled``: ``smol``) has none.
    """
    p = get_profile(p) if isinstance(p, str) else p
    if p.real.enabled:
        return ()
    k_all = range(1, p.extend.seed_replicates)
    if not includes(paper, "longrecipe"):
        arms = ["flt"]
    else:
        arms = list(extension.EXTENSION_METHODS)
        arms += [n for n in (ratio_arm(r, p.longrecipe.sample_ratio) for r in p.longrecipe.ratios) if n not in arms]
    arms += [f"{a}{SEED_MARK}{k}" for a in p.extend.replicate_arms if a in arms for k in k_all]
    if includes(paper, "selfdistill"):
        sd = p.selfdistill
        arms += [*sd.main_arms, *sd.matched_arms, *sd.ablation_arms]
        arms += [f"{a}{SEED_MARK}{k}" for a in sd.replicate_arms for k in k_all]
    if includes(paper, "cdt"):
        cd, sd = p.cdt, p.selfdistill
        compare = [*cd.compare_arms, *(f"{a}{SEED_MARK}{k}" for a in cd.compare_arms if a in sd.replicate_arms
                                       for k in k_all)]
        arms += [a for a in compare if a not in arms]
        arms += [*cd.arms, *(f"{a}{SEED_MARK}{k}" for a in cd.replicate_arms for k in k_all)]
    if includes(paper, "prolong"):
        pl = p.prolong
        arms += [*pl.arms, *(f"{a}{SEED_MARK}{k}" for a in pl.replicate_arms for k in k_all)]
    return tuple(arms)
