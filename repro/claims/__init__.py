"""Each target's declared headline (:class:`repro.reports.headline.Headline`), one module per paper.

:func:`headline_of` is what a report asks for; a target with no declared headline has none (testbed figures). A
profile that trains nothing (``real.enabled``: ``smol``) declares its own (:mod:`repro.claims.as_is`).
"""

from __future__ import annotations

from repro.claims import as_is, cdt, longrecipe, prolong, selfdistill
from repro.profiles import PROFILES
from repro.reports.headline import Headline


def all_headlines() -> dict[str, Headline]:
    """Every declared headline, by target id."""
    out: dict[str, Headline] = {}
    for module in (longrecipe, selfdistill, cdt, prolong):
        clash = set(out) & set(module.HEADLINES)
        if clash:
            raise ValueError(f"targets {sorted(clash)} declared twice; allowed: one headline per target")
        out.update(module.HEADLINES)
    return out


def headline_of(target: str, profile: str | None = None) -> Headline | None:
    """The declared headline of ``target`` (a :mod:`repro.targets` id), or None; under a ``profile`` that trains
    nothing, that profile's own where it declares one (:func:`repro.claims.as_is.headlines`: TB-NIAH, RP-Tab4/5)."""
    own = as_is.headlines(PROFILES[profile]) if profile in PROFILES and PROFILES[profile].real.enabled else {}
    return own.get(target) or all_headlines().get(target)
