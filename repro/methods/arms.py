"""The names of trained arms, and the one parser for them.

An arm name is ``<extension arm>[+<stage>][@seed<k>]``:

- the extension arm is a key of :data:`EXTENSION_METHODS` (``flt``, ``pose``, ``rpes``,
  ``longrecipe``, ``longrecipe_wo_t``, ``longrecipe_random_t``) or ``longrecipe_r<percent>``
  (LongRecipe at that token ratio, Table 4), a self-distillation arm of :data:`RP_ARMS` (``rp_skip``,
  ``rp_standard``, ...; no replay or merge stage), a CDT arm of :data:`CD_ARMS` (``cdt``; neither), a ProLong
  arm of :data:`PL_ARMS` (``prolong``, ``pl_long0``, ...; neither), or ``base`` (the base model itself);
- the stage suffix is ``+replay`` (LongRecipe §4.3 pretraining-data replay) or ``+merge``
  (the replayed model merged with the base, Eq. 8);
- the training-seed suffix ``@seed<k>`` (``k >= 1``) names the k-th extra training run of the same
  arm from the same base (``flt@seed2``, ``pose+merge@seed1``); the plain name is replicate 0. The
  reports show an arm with replicates as mean ± std across them (:mod:`repro.reports.seeds`).

:func:`parse_arm` is the only place that reads these strings (the reports read the seed suffix
through :func:`split_seed`, which parses nothing else).
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.methods.extension import ExtensionSpec
from repro.methods.selfdistill import SelfDistillSpec

EXTENSION_METHODS: dict[str, ExtensionSpec] = {
    "flt": ExtensionSpec("identity", None),
    "pose": ExtensionSpec("pose", sample_ratio=None),
    "rpes": ExtensionSpec("rpes", sample_ratio=None),
    "longrecipe": ExtensionSpec("longrecipe", sample_ratio=None, selection="anchors"),
    "longrecipe_wo_t": ExtensionSpec("longrecipe", sample_ratio=None),
    "longrecipe_random_t": ExtensionSpec("longrecipe", sample_ratio=None, selection="random"),
}
"""Named extension arms (LongRecipe §5.1 and Table 3). ``pose``, ``rpes`` and the LongRecipe arms
use ``longrecipe.sample_ratio`` of the target per sample; the ratio sweep of Table 4 adds
``longrecipe_r<percent>`` (see :func:`extension_spec`)."""

@dataclass(frozen=True)
class RPArm:
    """A self-distillation arm: its objective and its schedule."""

    spec: SelfDistillSpec
    """The objective (:class:`repro.methods.selfdistill.SelfDistillSpec`)."""
    schedule: str = "main"
    """``main`` (``extend.steps``), ``early`` (stopped at ``selfdistill.ablation_steps``) or ``matched``
    (``selfdistill.matched_steps_ratio`` x the steps, checkpoints kept along the way: RP-Fig4)."""
    paper: str = ""
    """The paper's row it stands for."""
    curve: bool = False
    """Keep a checkpoint every ``selfdistill.curve_every`` steps for RP-Fig4 (accuracy vs wall-clock)."""


_SD = SelfDistillSpec()
_STANDARD = SelfDistillSpec(consistency="none")
RP_ARMS: dict[str, RPArm] = {
    "rp_standard": RPArm(_STANDARD, paper="Standard"),
    "rp_longce": RPArm(_STANDARD.with_(longce=True), paper="LongCE"),
    "rp_pose": RPArm(_STANDARD.with_(standard_clm=False), paper="PoSE (CLM on the skip view)"),
    "rp_cyclic": RPArm(_SD.with_(view="cyclic"), paper="Ours (cyclic shift)"),
    "rp_skip": RPArm(_SD, paper="Ours (skip)", curve=True),
    "rp_skip_longce": RPArm(_SD.with_(longce=True), paper="Ours (skip) + LongCE"),
    "rp_standard_matched": RPArm(_STANDARD, "matched", "Standard, compute-matched (Fig. 4)", curve=True),
    "rp_standard_early": RPArm(_STANDARD, "early", "Baseline"),
    "rp_skip_early": RPArm(_SD, "early", "Ours"),
    "rp_fwd_kl": RPArm(_SD.with_(direction="forward"), "early", "w/ forward KL"),
    "rp_clm": RPArm(_SD.with_(consistency="clm"), "early", "w/ CLM"),
    "rp_fixed_skip": RPArm(_SD.with_(fixed_split=True), "early", "w/o random skip (s = y = L/2)"),
    "rp_dropout": RPArm(SelfDistillSpec(view="none", perturbation="dropout"), "early", "Dropout"),
    "rp_attn_noise": RPArm(SelfDistillSpec(view="none", perturbation="attention_noise"), "early", "Attention noise"),
    "rp_y050": RPArm(_SD.with_(max_skip=0.5), "early", "Y = L/2"),
    "rp_y200": RPArm(_SD.with_(max_skip=2.0), "early", "Y = 2L"),
    "rp_nope": RPArm(_SD.with_(view="nope"), "early", "NoPE"),
    "rp_dilation": RPArm(_SD.with_(view="dilation"), "early", "Random dilation [0.5, 2]"),
    "rp_chunk_perm": RPArm(_SD.with_(view="chunk_permutation"), "early", "Chunked permutation"),
    "rp_lam020": RPArm(_SD.with_(lam=0.2), "early", "lambda = 0.2"),
    "rp_lam050": RPArm(_SD.with_(lam=0.5), "early", "lambda = 0.5"),
    "rp_lam200": RPArm(_SD.with_(lam=2.0), "early", "lambda = 2"),
}
"""The self-distillation comparison (Tables 1-5, 8-11, Fig. 4): every arm trains on full-length rows at the
target with ``selfdistill.rope_theta``; ``rp_standard`` is FLT with that RoPE base (the paper's Standard)."""


CD_ARMS: dict[str, str] = {"cdt": "CDT"}
"""Context Denoising Training arms -> the paper's row. A CD arm trains like ``rp_standard`` (same base, rows,
RoPE base, precision and schedule) with the objective of :mod:`repro.methods.cdt` (``cdt.beta``,
``cdt.threshold``); CD-Tab2's CE and LongCE are ``rp_standard`` and ``rp_longce``."""


@dataclass(frozen=True)
class PLArm:
    """A ProLong arm: the recipe (``prolong.*`` settings) with at most one thing changed."""

    paper: str
    """The paper's row or point."""
    long_share: float | None = None
    """Share of long data among the non-task rows (None: the recipe's ``prolong.mix``)."""
    doc_masks: bool | None = None
    """Document masks (None: ``prolong.doc_masks``)."""
    rope: str | float = "recipe"
    """RoPE base at the target: ``recipe`` (``prolong.rope_ntk_multiple`` x the dynamic-NTK value), ``orig`` (the
    base model's own), or a multiple of the dynamic-NTK value."""
    length_factor: int = 1
    """Training length as a multiple of the target (>1: ``prolong.train_length_factor``'s arm)."""


PL_ARMS: dict[str, PLArm] = {
    "prolong": PLArm("ProLong recipe (60% long: code 30 + books 30; ShortMix 40; masks; RoPE 2x NTK)"),
    **{f"pl_long{pct}": PLArm(f"{pct}% long", long_share=pct / 100) for pct in (0, 20, 40, 80, 100)},
    "pl_nomask": PLArm("w/o document masks", doc_masks=False),
    "pl_rope_orig": PLArm("RoPE base of the base model", rope="orig"),
    "pl_rope_ntk": PLArm("RoPE base = dynamic-NTK value", rope=1.0),
    "pl_rope_ntk4": PLArm("RoPE base = 4x dynamic-NTK value", rope=4.0),
    "pl_train2x": PLArm("trained at 2x the target", length_factor=2),
}
"""ProLong's recipe and its ablations (PL-Fig1/3: long share; PL-Tab20: masks; PL-Tab18: RoPE base; PL-Tab7:
training length), all from the same base with ``extend``'s steps and optimisation (:mod:`repro.stages.prolong`)."""


def pl_arm(name: str) -> PLArm | None:
    """The :class:`PLArm` of a ProLong arm name (replicate suffix allowed), else None."""
    return PL_ARMS.get(split_seed(name)[0])


def cd_arm(name: str) -> str | None:
    """The paper row of a CDT arm name (replicate suffix allowed), else None."""
    return CD_ARMS.get(split_seed(name)[0])


def rp_arm(name: str) -> RPArm | None:
    """The :class:`RPArm` of a self-distillation arm name (replicate suffix allowed), else None."""
    return RP_ARMS.get(split_seed(name)[0])


def extension_family(name: str) -> bool:
    """True for an arm of the LongRecipe comparison (FLT, PoSE, RPES, LongRecipe and its variants, their
    ``+replay``/``+merge`` stages and replicates), trained by the extension stage with an
    :class:`ExtensionSpec`; False for the self-distillation (``rp_*``) and CDT arms, which train as
    ``rp_standard`` with their own objectives, and for ProLong's arms (their own data recipe)."""
    arm = name.split("+")[0]
    return rp_arm(arm) is None and cd_arm(arm) is None and pl_arm(arm) is None


RATIO_PREFIX = "longrecipe_r"
"""Prefix of the token-ratio arms (``longrecipe_r20``: LongRecipe with 20% of the target per sample)."""
STAGES = ("replay", "merge")
"""Stage suffixes after ``+``: pretraining-data replay, then the merge with the base (LongRecipe §4.3)."""
BASE = "base"
"""The base model's own name."""
SEED_MARK = "@seed"
"""Training-seed suffix: ``<arm>@seed<k>`` is replicate ``k >= 1`` of ``<arm>`` (the plain name is replicate 0)."""


@dataclass(frozen=True)
class ArmName:
    """A parsed arm name."""

    arm: str
    """The extension arm (``flt``, ``longrecipe_r20``, ...) or ``base``."""
    stage: str = "extend"
    """``extend`` (the arm's own checkpoint), ``replay`` or ``merge``; ``base`` for the base model."""
    ratio: int | None = None
    """The token ratio in percent of a ``longrecipe_r<percent>`` arm, else None."""
    replicate: int = 0
    """Training-seed replicate: 0 for the plain name, ``k`` for ``@seed<k>``."""

    @property
    def name(self) -> str:
        """The name back as a string (``parse_arm(n).name == n``)."""
        name = self.arm if self.stage in ("extend", "base") else f"{self.arm}+{self.stage}"
        return f"{name}{SEED_MARK}{self.replicate}" if self.replicate else name


def split_seed(name: str) -> tuple[str, int]:
    """``"flt@seed2"`` -> ``("flt", 2)``; a name without the suffix is replicate 0. Reads only the suffix."""
    stem, at, rest = name.partition("@")
    if not at:
        return name, 0
    suffix = at + rest
    k = suffix[len(SEED_MARK):]
    if not suffix.startswith(SEED_MARK) or not k.isdigit() or k.startswith("0") or not stem:
        raise ValueError(f"arm {name!r}: bad training-seed suffix {suffix!r}; allowed: {SEED_MARK}<k> with "
                         f"k >= 1 after an arm name (the plain name is replicate 0)")
    return stem, int(k)


def ratio_of(arm: str) -> int | None:
    """The percent of a ``longrecipe_r<percent>`` arm name, else None."""
    if arm.startswith(RATIO_PREFIX) and arm[len(RATIO_PREFIX):].isdigit():
        return int(arm[len(RATIO_PREFIX):])
    return None


def _unknown(name: str) -> ValueError:
    return ValueError(f"unknown arm {name!r}; allowed: {BASE}, {', '.join(EXTENSION_METHODS)}, "
                      f"{RATIO_PREFIX}<percent> (1..100), {', '.join(RP_ARMS)}, {', '.join(CD_ARMS)}, "
                      f"{', '.join(PL_ARMS)}, "
                      "each LongRecipe-style "
                      "extension arm optionally followed by "
                      f"{' or '.join('+' + s for s in STAGES)} and then by {SEED_MARK}<k> (k >= 1)")


def parse_arm(name: str) -> ArmName:
    """Parse an arm name; ValueError naming the allowed forms when it is not one."""
    stem, replicate = split_seed(name)
    arm, plus, stage = stem.partition("+")
    if arm == BASE:
        if plus or replicate:  # one base model: every arm's replicates extend the same base
            raise _unknown(name)
        return ArmName(BASE, "base")
    own = arm in RP_ARMS or arm in CD_ARMS or arm in PL_ARMS  # arms of a stage of their own: no replay or merge
    if plus and (stage not in STAGES or own):
        raise _unknown(name)
    if own:
        return ArmName(arm, "extend", None, replicate)
    ratio = ratio_of(arm)
    if arm not in EXTENSION_METHODS and not (ratio is not None and 1 <= ratio <= 100):
        raise _unknown(name)
    return ArmName(arm, stage or "extend", ratio, replicate)


def extension_spec(name: str) -> ExtensionSpec:
    """The spec of a named arm, including ``longrecipe_r<percent>`` (LongRecipe at that token ratio)."""
    if name in EXTENSION_METHODS:
        return EXTENSION_METHODS[name]
    ratio = ratio_of(name)
    if ratio is not None and 1 <= ratio <= 100:
        return ExtensionSpec("longrecipe", sample_ratio=ratio / 100, selection="anchors")
    raise ValueError(f"unknown extension method {name!r}; allowed: {', '.join(EXTENSION_METHODS)}, "
                     f"{RATIO_PREFIX}<percent> (1..100)")


def ratio_arm(ratio: float, default_ratio: float) -> str:
    """The arm name of a token ratio: ``longrecipe`` at the profile's ratio, else ``longrecipe_r<pct>``."""
    pct = int(round(ratio * 100))
    return "longrecipe" if pct == int(round(default_ratio * 100)) else f"{RATIO_PREFIX}{pct}"
