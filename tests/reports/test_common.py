"""Shared report pieces: reading records, n/a cells, the order verdict, standard errors, task specs."""

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


def test_direction_agrees():
    paper = {"flt": 82.3, "rpes": 71.8, "pose": 68.8}
    assert common.direction_agrees({"flt": 0.9, "rpes": 0.5, "pose": 0.4}, paper)[0] == "yes"
    assert common.direction_agrees({"flt": 0.1, "rpes": 0.5, "pose": 0.6}, paper)[0] == "no"
    assert common.direction_agrees({"flt": 0.9, "rpes": 0.3, "pose": 0.4}, paper) == \
        ("partly", "order of flt, rpes, pose as in the paper on 2/3 pairs")
    assert common.direction_agrees({"flt": 0.5, "base": 0.1}, paper)[0] == "yes"
    assert common.direction_agrees({"flt": 0.1, "base": 0.1}, paper)[0] == "n/a"  # a tie says nothing
    assert common.direction_agrees({"flt": 0.9, "rpes": 0.4, "pose": 0.4}, paper) == \
        ("yes", "order of flt, rpes, pose as in the paper on 2/2 pairs; 1 tied pair(s) left out")
    assert common.direction_agrees({"flt": 0.4, "rpes": 0.4, "pose": 0.4}, paper)[0] == "n/a"
    assert common.direction_agrees({"flt": 0.5}, paper)[0] == "n/a"


def test_standard_error_and_noise_note():
    def part(score, n):  # n examples of one task at the target
        return {"ruler": {"results": [{"task": "vt", "length": 1024, "score": score}] * n}}

    suite = {"a": part(0.5, 4), "b": part(0.5, 4), "c": part(1.0, 4)}
    assert common.standard_error(suite, "a", ("vt",), 1024) == 25.0  # sqrt(0.25 / 4)
    assert common.standard_error(suite, "c", ("vt",), 1024) == 0.0
    assert common.standard_error(suite, "a", ("vt",), 512) is None
    # combined SE of a and b: sqrt(25^2 + 25^2) = 35.36 -> a gap counts above 70.7 points
    assert common.noise_note({"a": 90.0, "b": 10.0}, suite, ("vt",), 1024) == " (1/1 gaps exceed 2 standard errors)"
    assert common.noise_note({"a": 50.0, "b": 10.0}, suite, ("vt",), 1024) == " (0/1 gaps exceed 2 standard errors)"
    assert common.noise_note({"a": 50.0, "b": None}, suite, ("vt",), 1024) == ""
    # c has SE 0 (all correct), x has no record (SE taken as 0): a-c needs 50 points, x-c any gap
    assert common.noise_note({"a": 90.0, "c": 30.0}, suite, ("vt",), 1024) == " (1/1 gaps exceed 2 standard errors)"
    assert common.noise_note({"a": 90.0, "c": 45.0, "x": 45.5}, suite, ("vt",), 1024) == \
        " (1/3 gaps exceed 2 standard errors)"


@pytest.mark.parametrize("spec,expected", [("niah_position:ordinal=first", ("niah_position", {"ordinal": "first"})),
                                           ("vt", ("vt", {})), ("x:a=1,b=0.5", ("x", {"a": 1, "b": 0.5}))])
def test_parse_task_spec(spec, expected):
    from repro.evaluate import parse_task_spec

    assert parse_task_spec(spec) == expected
