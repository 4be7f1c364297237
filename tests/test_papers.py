"""The papers and what a run for one of them covers."""

import pytest

from repro.papers import PAPERS, check_paper, includes, paper_of
from repro.targets import TARGETS


def test_every_target_id_belongs_to_a_paper_or_the_testbed():
    owners = {tid: paper_of(tid) for tid in TARGETS}
    assert {o for o in owners.values() if o} == set(PAPERS)
    assert owners["TB-NIAH"] is None and owners["LR-Tab1"] == "longrecipe" and owners["RP-Fig1a"] == "selfdistill"
    assert owners["CD-Tab2"] == "cdt" and owners["PL-Tab3"] == "prolong"


def test_includes_and_refusals():
    assert includes("all", "cdt") and includes("cdt", "cdt") and not includes("prolong", "cdt")
    assert check_paper("all") == "all"
    with pytest.raises(ValueError, match="paper='LongRecipe'; allowed: all, longrecipe, selfdistill, cdt, prolong"):
        check_paper("LongRecipe")
    with pytest.raises(ValueError, match="paper='all'; allowed: longrecipe"):
        includes("cdt", "all")
    with pytest.raises(ValueError, match="target id 'XX-1' has no known prefix"):
        paper_of("XX-1")
