"""Every report of the evaluation suite is built and names a known target."""

from repro.profiles import get_profile
from repro.reports.suite import all_reports
from tests.reports.records import make_suite

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def test_all_reports_cover_every_target():
    _, reps = all_reports(make_suite(), P)
    from repro.targets import get_target

    assert [r.target for r in reps] == ["RP-Tab1/2", "RP-Fig1a", "RP-Tab14", "RP-Tab15",
                                        "RP-Tab4/5"]
    for r in reps:
        get_target(r.target)
        assert r.agrees in {"yes", "no", "partly", "tie within noise", "n/a"}
        for t in r.tables:
            assert t["rows"] and t["caption"] and "/" not in t["name"]
