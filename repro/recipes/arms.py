"""Which arms a paper's run trains (the training notebook's list), from the profile."""

from __future__ import annotations

from repro.profiles import Profile


def extension_arms(p: Profile | str, paper: str = "all") -> tuple[str, ...]:
    """The arms the training notebook trains for ``paper`` (:mod:`repro.papers`).

    FLT is the testbed's shared extension (every paper compares against it); LongRecipe adds its
    Table 1 and Table 3 arms and the token-ratio arms of ``longrecipe.ratios`` (Table 4). The arms in
    ``extend.replicate_arms`` follow with their training-seed replicates ``<arm>@seed1`` ... (``extend.seed_replicates``
    seeds in all). Self-distillation adds ``selfdistill.main_arms``, ``matched_arms`` and ``ablation_arms``, then
    the replicates of ``selfdistill.replicate_arms``. CDT adds its CE and LongCE (``cdt.compare_arms``, with their
    replicates; trained once when self-distillation is also run) and ``cdt.arms`` with their replicates. ProLong
    adds ``prolong.arms`` and the replicates of ``prolong.replicate_arms``.
    """
    from repro.methods import EXTENSION_METHODS, ratio_arm
    from repro.methods.arms import SEED_MARK
    from repro.papers import includes
    from repro.profiles import get_profile

    p = get_profile(p) if isinstance(p, str) else p
    if not includes(paper, "longrecipe"):
        arms = ["flt"]
    else:
        arms = list(EXTENSION_METHODS)
        arms += [n for n in (ratio_arm(r, p.longrecipe.sample_ratio) for r in p.longrecipe.ratios) if n not in arms]
    arms += [f"{a}{SEED_MARK}{k}" for a in p.extend.replicate_arms if a in arms
             for k in range(1, p.extend.seed_replicates)]
    if includes(paper, "selfdistill"):
        sd = p.selfdistill
        rp = [*sd.main_arms, *sd.matched_arms, *sd.ablation_arms]
        arms += rp + [f"{a}{SEED_MARK}{k}" for a in sd.replicate_arms for k in range(1, p.extend.seed_replicates)]
    if includes(paper, "cdt"):
        cd, sd, k_all = p.cdt, p.selfdistill, range(1, p.extend.seed_replicates)
        compare = [*cd.compare_arms, *(f"{a}{SEED_MARK}{k}" for a in cd.compare_arms if a in sd.replicate_arms
                                       for k in k_all)]
        arms += [a for a in compare if a not in arms]
        arms += [*cd.arms, *(f"{a}{SEED_MARK}{k}" for a in cd.replicate_arms for k in k_all)]
    if includes(paper, "prolong"):
        pl, k_all = p.prolong, range(1, p.extend.seed_replicates)
        arms += [*pl.arms, *(f"{a}{SEED_MARK}{k}" for a in pl.replicate_arms for k in k_all)]
    return tuple(arms)
