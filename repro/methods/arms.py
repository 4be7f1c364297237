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
through :func:`split_seed`, which parses nothing else). The arm tables themselves live beside each paper's
objective and builder (``EXTENSION_METHODS`` in :mod:`repro.methods.extension`, ``RP_ARMS`` in
:mod:`repro.methods.selfdistill`, ``CD_ARMS`` in :mod:`repro.methods.cdt`, ``PL_ARMS`` in
:mod:`repro.methods.prolong`) and are re-exported here.
"""

from __future__ import annotations

from dataclasses import dataclass

from repro.methods.armspec import SEED_MARK, split_seed
from repro.methods.cdt import CD_ARMS, CE_BASELINES, cd_arm
from repro.methods.extension import EXTENSION_METHODS, RATIO_PREFIX, extension_spec, ratio_of
from repro.methods.prolong import PL_ARMS, PLArm, pl_arm
from repro.methods.selfdistill import RP_ARMS, RPArm, rp_arm

__all__ = ["ArmName", "BASE", "CD_ARMS", "CE_BASELINES", "EXTENSION_METHODS", "PLArm", "PL_ARMS", "RATIO_PREFIX",
           "RPArm", "RP_ARMS", "SEED_MARK", "STAGES", "cd_arm", "extension_family", "extension_spec", "parse_arm",
           "pl_arm", "ratio_arm", "ratio_of", "rp_arm", "split_seed"]


def extension_family(name: str) -> bool:
    """True for an arm of the LongRecipe comparison (FLT, PoSE, RPES, LongRecipe and its variants, their
    ``+replay``/``+merge`` stages and replicates), trained by the extension stage with an
    :class:`ExtensionSpec`; False for the self-distillation (``rp_*``) and CDT arms, which train as
    ``rp_standard`` with their own objectives, and for ProLong's arms (their own data recipe)."""
    arm = name.split("+")[0]
    return rp_arm(arm) is None and cd_arm(arm) is None and pl_arm(arm) is None


STAGES = ("replay", "merge")
"""Stage suffixes after ``+``: pretraining-data replay, then the merge with the base (LongRecipe §4.3)."""
BASE = "base"
"""The base model's own name."""


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


def ratio_arm(ratio: float, default_ratio: float) -> str:
    """The arm name of a token ratio: ``longrecipe`` at the profile's ratio, else ``longrecipe_r<pct>``."""
    pct = int(round(ratio * 100))
    return "longrecipe" if pct == int(round(default_ratio * 100)) else f"{RATIO_PREFIX}{pct}"
