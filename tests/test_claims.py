"""Every paper target has a declared headline from the paper's text (the configuration table LR-Tab6 aside)."""

from repro.claims import all_headlines, headline_of
from repro.papers import paper_of
from repro.targets import TARGETS

NO_HEADLINE = {"LR-Tab6": "a configuration table: nothing to compare"}


def test_every_paper_target_declares_its_headline():
    declared = all_headlines()
    missing = [t for t in TARGETS if paper_of(t) and t not in declared and t not in NO_HEADLINE]
    assert not missing
    assert set(declared) <= set(TARGETS)
    for tid, h in declared.items():
        assert h.source.strip(), tid  # where the paper says it
        assert headline_of(tid) is h
    assert not any(paper_of(t) is None for t in declared)  # testbed figures have no paper claim
