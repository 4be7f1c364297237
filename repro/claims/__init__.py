"""Each target's declared headline (:class:`repro.reports.headline.Headline`), one module per paper.

:func:`headline_of` is what a report asks for; a target with no declared headline has none (testbed figures).
"""

from __future__ import annotations

from repro.claims import cdt, longrecipe, prolong, selfdistill
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


def headline_of(target: str) -> Headline | None:
    """The declared headline of ``target`` (a :mod:`repro.targets` id), or None."""
    return all_headlines().get(target)
