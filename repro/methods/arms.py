"""The names of trained arms, and the one parser for them.

An arm name is ``<extension arm>[+<stage>]``:

- the extension arm is a key of :data:`EXTENSION_METHODS` (``flt``, ``pose``, ``rpes``,
  ``longrecipe``, ``longrecipe_wo_t``, ``longrecipe_random_t``) or ``longrecipe_r<percent>``
  (LongRecipe at that token ratio, Table 4), or ``base`` (the base model itself);
- the stage suffix is ``+replay`` (LongRecipe §4.3 pretraining-data replay) or ``+merge``
  (the replayed model merged with the base, Eq. 8).

:func:`parse_arm` is the only place that reads these strings.
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


@dataclass(frozen=True)
class ArmName:
    """A parsed arm name."""

    arm: str
    """The extension arm (``flt``, ``longrecipe_r20``, ...) or ``base``."""
    stage: str = "extend"
    """``extend`` (the arm's own checkpoint), ``replay`` or ``merge``; ``base`` for the base model."""
    ratio: int | None = None
    """The token ratio in percent of a ``longrecipe_r<percent>`` arm, else None."""

    @property
    def name(self) -> str:
        """The name back as a string (``parse_arm(n).name == n``)."""
        return self.arm if self.stage in ("extend", "base") else f"{self.arm}+{self.stage}"


def ratio_of(arm: str) -> int | None:
    """The percent of a ``longrecipe_r<percent>`` arm name, else None."""
    if arm.startswith(RATIO_PREFIX) and arm[len(RATIO_PREFIX):].isdigit():
        return int(arm[len(RATIO_PREFIX):])
    return None


def _unknown(name: str) -> ValueError:
    return ValueError(f"unknown arm {name!r}; allowed: {BASE}, {', '.join(EXTENSION_METHODS)}, "
                      f"{RATIO_PREFIX}<percent> (1..100), each extension arm optionally followed by "
                      f"{' or '.join('+' + s for s in STAGES)}")


def parse_arm(name: str) -> ArmName:
    """Parse an arm name; ValueError naming the allowed forms when it is not one."""
    arm, plus, stage = name.partition("+")
    if arm == BASE:
        if plus:
            raise _unknown(name)
        return ArmName(BASE, "base")
    if plus and stage not in STAGES:
        raise _unknown(name)
    ratio = ratio_of(arm)
    if arm not in EXTENSION_METHODS and not (ratio is not None and 1 <= ratio <= 100):
        raise _unknown(name)
    return ArmName(arm, stage or "extend", ratio)


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
