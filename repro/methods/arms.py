"""The names of trained arms, and the one parser for them.

An arm name is ``<extension arm>[+<stage>][@seed<k>]``:

- the extension arm is a key of :data:`EXTENSION_METHODS` (``flt``, ``pose``, ``rpes``,
  ``longrecipe``, ``longrecipe_wo_t``, ``longrecipe_random_t``) or ``longrecipe_r<percent>``
  (LongRecipe at that token ratio, Table 4), or ``base`` (the base model itself);
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
                      f"{RATIO_PREFIX}<percent> (1..100), each extension arm optionally followed by "
                      f"{' or '.join('+' + s for s in STAGES)} and then by {SEED_MARK}<k> (k >= 1)")


def parse_arm(name: str) -> ArmName:
    """Parse an arm name; ValueError naming the allowed forms when it is not one."""
    stem, replicate = split_seed(name)
    arm, plus, stage = stem.partition("+")
    if arm == BASE:
        if plus or replicate:  # one base model: every arm's replicates extend the same base
            raise _unknown(name)
        return ArmName(BASE, "base")
    if plus and stage not in STAGES:
        raise _unknown(name)
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
