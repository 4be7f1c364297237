"""The index checker: provenance from one run, verdicts that say what their recorded claim tests say."""

import json

from repro.claims import headline_of
from repro.reports.attention import per_layer
from repro.reports.headline import judge
from repro.figures_index import render_pages
from repro.reports.index_check import check_index, main

RUN, COMMIT = "20261201T120000Z-abc123", "0123456789ab"


def _row(agrees="n/a", claims=(), run=RUN, commit=COMMIT, profile="tiny", **extra):
    return {"files": [], "profile": profile, "date": "2026-12-01", "commit": commit, "run": run, "ours": "",
            "agrees": agrees, "note": "", "claims": [dict(c) for c in claims], **extra}


def _judged(target, ours, se):
    j = judge(headline_of(target), ours, lambda a, b: se)
    return _row(j.verdict, j.claims)


def _fig5(r=0.5, se=0.01):
    return _judged("CD-Fig5", {"Pearson r (IG, grad L2)": r, "0 (uncorrelated)": 0.0}, se)


def consistent():
    """A pipeline of one run (a yes, a tie, a target without headline) and a separate command's row."""
    tie = _judged("CD-Fig14", {"after CDT": 0.101, "before CDT (CE)": 0.100}, 0.01)
    assert tie["agrees"] == "tie within noise"
    return {"CD-Fig5": _fig5(), "CD-Fig14": tie, "TB-Base": _row(),
            "TB-BaseSearch": _row(run="interactive", commit="fedcba987654")}


def test_a_consistent_index_passes():
    assert check_index(consistent()) == []


def test_rows_from_two_runs_fail():
    idx = consistent()
    idx["CD-Fig14"] = {**idx["CD-Fig14"], "run": "20261202T090000Z-def456", "commit": "ba9876543210"}
    problems = check_index(idx)
    assert any("2 runs" in p and "CD-Fig14" in p for p in problems)
    assert any("2 commits" in p for p in problems)


def test_a_pipeline_row_written_outside_reproduce_fails():
    idx = {k: {**v, "run": "interactive"} for k, v in consistent().items()}
    assert any("outside reproduce" in p and "CD-Fig5" in p for p in check_index(idx))


def test_a_dirty_or_unknown_commit_fails():
    for commit, said in ((COMMIT + "+dirty", "uncommitted"), ("unknown", "names no code")):
        idx = {k: {**v, "commit": commit} for k, v in consistent().items()}
        problems = check_index(idx)
        assert any(said in p and p.startswith("CD-Fig5") for p in problems), problems


def test_missing_provenance_fails():
    idx = consistent()
    idx["TB-Base"] = {k: v for k, v in idx["TB-Base"].items() if k not in ("commit", "run")}
    problems = check_index(idx)
    assert "TB-Base: no commit" in problems and "TB-Base: no run" in problems
    old = {"CD-Fig5": {k: v for k, v in _fig5().items() if k not in ("commit", "run", "claims")}}
    assert {"CD-Fig5: no commit", "CD-Fig5: no run"} <= set(check_index(old))


def test_a_yes_whose_claim_tests_say_tie_fails():
    idx = consistent()
    tie = _fig5(r=0.01, se=0.01)
    assert tie["agrees"] == "tie within noise"
    idx["CD-Fig5"] = {**tie, "agrees": "yes"}
    problems = check_index(idx)
    assert len(problems) == 1 and "agrees 'yes' but its recorded claim tests say 'tie within noise'" in problems[0]


def test_a_recorded_outcome_that_its_gap_does_not_give_fails():
    idx = consistent()
    row = _fig5(r=0.01, se=0.01)
    row["claims"][0]["outcome"], row["agrees"] = "holds", "yes"
    problems = check_index({**idx, "CD-Fig5": row})
    assert any("recorded as 'holds', its gap and SE say 'tie'" in p for p in problems)


def test_a_verdict_without_claim_tests_fails_and_n_a_without_them_passes():
    idx = consistent()
    assert any("no recorded claim tests" in p for p in check_index({**idx, "CD-Fig5": _row("yes")}))
    assert check_index({**idx, "CD-Fig5": _row("n/a")}) == []


def test_claims_that_are_not_the_declared_headline_fail():
    row = _fig5()
    row["claims"][0]["b"] = "0.3"
    assert any("not the declared headline's" in p for p in check_index({"CD-Fig5": row}))


def test_rp_fig2_is_checked_at_its_layers():
    h = per_layer(headline_of("RP-Fig2"), [0, 1])
    ours = {f"{c.a}": 1.5 for c in h.claims} | {c.b: 1.0 for c in h.claims}
    j = judge(h, ours, lambda a, b: 0.1)
    assert j.verdict == "yes" and check_index({"RP-Fig2": _row(j.verdict, j.claims)}) == []
    assert check_index({"RP-Fig2": _row("tie within noise", j.claims)})


def test_the_command_reads_a_folder(tmp_path, capsys):
    (tmp_path / "index.json").write_text(json.dumps(consistent()))
    assert main([str(tmp_path)]) == 1 and "INDEX.md: missing" in capsys.readouterr().out  # the pages belong to it
    for name, text in render_pages(consistent()).items():
        (tmp_path / name).write_text(text)
    assert main([str(tmp_path)]) == 0 and "0 problem(s)" in capsys.readouterr().out
    (tmp_path / "index.json").write_text(json.dumps({**consistent(), "CD-Fig5": _row("yes")}))
    assert main([str(tmp_path)]) == 1
