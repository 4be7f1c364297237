"""The four papers, and which of them a run covers (``reproduce --paper``).

Target ids start with the paper's prefix (``LR-``, ``RP-``, ``CD-``, ``PL-``);
``TB-`` ids belong to the shared testbed (corpus, base model, FLT) that every
paper builds on, so a run for any one paper regenerates them too.
"""

from __future__ import annotations

PAPERS: dict[str, str] = {
    "longrecipe": "LR",
    "selfdistill": "RP",
    "cdt": "CD",
    "prolong": "PL",
}
"""Paper name -> the prefix of its target ids (``repro.targets``)."""
ALL = "all"
"""Every paper."""
TESTBED = "TB"
"""Prefix of the testbed's own figures (produced for every paper)."""


def check_paper(paper: str) -> str:
    """``paper`` when it names a paper or ``all``; ValueError naming the allowed values otherwise."""
    if paper != ALL and paper not in PAPERS:
        raise ValueError(f"paper={paper!r}; allowed: {ALL}, {', '.join(PAPERS)}")
    return paper


def includes(selected: str, paper: str) -> bool:
    """Does a run for ``selected`` (a paper or ``all``) cover ``paper``?"""
    check_paper(selected)
    if paper not in PAPERS:
        raise ValueError(f"paper={paper!r}; allowed: {', '.join(PAPERS)}")
    return selected in (ALL, paper)


def paper_of(target_id: str) -> str | None:
    """The paper a target id belongs to (None for the testbed's ``TB-`` ids)."""
    prefix = target_id.split("-", 1)[0]
    if prefix == TESTBED:
        return None
    for name, pre in PAPERS.items():
        if pre == prefix:
            return name
    raise ValueError(f"target id {target_id!r} has no known prefix; allowed: {TESTBED}-, "
                     f"{', '.join(p + '-' for p in PAPERS.values())}")
