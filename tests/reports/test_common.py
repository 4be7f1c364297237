"""Shared report pieces: reading records, n/a cells, the order verdict, task specs."""

import pytest

from repro.profiles import get_profile
from repro.reports import common
from repro.tasks.summary import RULER_TASKS
from tests.reports.records import make_suite

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def test_skipped_cell_reads_min_length_not_zero():
    suite = make_suite()
    s = common.Scores(suite["base"]["suite"])
    assert s.cell("cwe", 256) == "n/a (min length 300)"
    assert s.mean("cwe", 256) is None and s.average(RULER_TASKS, 256) is None
    assert s.cell("vt", 256) == 0.0


class FakeNoise:
    """Standard errors by pair (either order), as a GapTest gives them."""

    z = 2.0

    def __init__(self, se):
        self._se = se

    def se(self, a, b):
        return self._se.get((a, b), self._se.get((b, a)))

    def method(self):
        return "fake, 2 SE"


def test_direction_agrees_without_noise_takes_gaps_as_they_are():
    paper = {"flt": 82.3, "rpes": 71.8, "pose": 68.8}
    assert common.direction_agrees({"flt": 0.9, "rpes": 0.5, "pose": 0.4}, paper)[0] == "yes"
    assert common.direction_agrees({"flt": 0.1, "rpes": 0.5, "pose": 0.6}, paper)[0] == "no"
    assert common.direction_agrees({"flt": 0.9, "rpes": 0.3, "pose": 0.4}, paper) == \
        ("partly", "order of flt, rpes, pose as in the paper on 2/3 significant pairs; "
                   "3/3 gaps significant (no noise estimate: gaps taken as they are)")
    assert common.direction_agrees({"flt": 0.5, "base": 0.1}, paper)[0] == "yes"
    assert common.direction_agrees({"flt": 0.1, "base": 0.1}, paper)[0] == common.TIE  # a tie says nothing
    assert common.direction_agrees({"flt": 0.9, "rpes": 0.4, "pose": 0.4}, paper) == \
        ("yes", "order of flt, rpes, pose as in the paper on 2/2 significant pairs; 1 pair(s) tied within noise; "
                "2/3 gaps significant (no noise estimate: gaps taken as they are)")
    assert common.direction_agrees({"flt": 0.4, "rpes": 0.4, "pose": 0.4}, paper)[0] == common.TIE
    assert common.direction_agrees({"flt": 0.5}, paper)[0] == "n/a"


def test_direction_agrees_counts_only_significant_gaps():
    paper = {"flt": 82.3, "rpes": 71.8, "pose": 68.8}
    ours = {"flt": 60.0, "rpes": 50.0, "pose": 52.0}  # rpes < pose against the paper, by 2 points
    se = {("flt", "rpes"): 3.0, ("flt", "pose"): 3.0, ("rpes", "pose"): 3.0}
    v, how = common.direction_agrees(ours, paper, noise=FakeNoise(se))
    assert v == "yes"  # the one disagreeing gap (2 points) is within 2 x 3: a tie, not a disagreement
    assert how == ("order of flt, rpes, pose as in the paper on 2/2 significant pairs; 1 pair(s) tied within noise; "
                   "2/3 gaps significant (fake, 2 SE)")
    v, how = common.direction_agrees(ours, paper, noise=FakeNoise({k: 6.0 for k in se}))
    assert v == common.TIE and how == ("every pair of flt, rpes, pose is tied within noise; "
                                       "0/3 gaps significant (fake, 2 SE)")
    v, how = common.direction_agrees(ours, paper, noise=FakeNoise({("flt", "rpes"): 1.0, ("flt", "pose"): 1.0,
                                                                  ("rpes", "pose"): 0.5}))
    assert v == "partly" and "on 2/3 significant pairs; 3/3 gaps significant" in how
    # no estimate for a pair (fewer than two prompts per cell): taken as it is, and said so
    v, how = common.direction_agrees(ours, paper, noise=FakeNoise({("flt", "rpes"): 1.0, ("flt", "pose"): 1.0}))
    assert v == "partly" and how.endswith("(fake, 2 SE; 1 gap(s) without a noise estimate (fewer than 2 prompts "
                                          "per cell) taken as they are)")
    # the fallback pair (flt vs base) is tested too
    assert common.direction_agrees({"flt": 30.0, "base": 25.0}, paper, noise=FakeNoise({("flt", "base"): 3.0})) == \
        (common.TIE, "one paper method present; flt and base tie within noise; 0/1 gaps significant (fake, 2 SE)")
    assert common.direction_agrees({"flt": 32.0, "base": 25.0}, paper, noise=FakeNoise({("flt", "base"): 3.0}))[0] \
        == "yes"


def test_order_and_combined_verdicts():
    assert common.order_verdict(2, 0, 3) == "yes" and common.order_verdict(1, 1, 0) == "partly"
    assert common.order_verdict(0, 2, 1) == "no" and common.order_verdict(0, 0, 2) == common.TIE
    assert common.order_verdict(0, 0, 0) == "n/a"
    assert common.combine_verdicts("yes", common.TIE) == "yes" and common.combine_verdicts("yes", "no") == "partly"
    assert common.combine_verdicts(common.TIE, "n/a") == common.TIE and common.combine_verdicts("n/a") == "n/a"
    assert common.combine_verdicts("no", "no") == "no" and common.combine_verdicts("partly", "yes") == "partly"


@pytest.mark.parametrize("spec,expected", [("niah_position:ordinal=first", ("niah_position", {"ordinal": "first"})),
                                           ("vt", ("vt", {})), ("x:a=1,b=0.5", ("x", {"a": 1, "b": 0.5}))])
def test_parse_task_spec(spec, expected):
    from repro.evaluate import parse_task_spec

    assert parse_task_spec(spec) == expected
