"""Samples per cell for a 2-point standard error on a headline, from a plan part."""

import pytest

from repro.profiles import get_profile
from repro.reports import noise, sizing
from repro.recipes.plans import lr_plan, suite_plan
from repro.tasks.summary import NIAH_TASKS, RULER_TASKS
from tests.reports.records import record, rows

P = get_profile("tiny")  # LR: 20 samples x 3 depths x 1 evaluation seed; suite: 16 samples


def test_samples_needed_for_the_documented_headlines():
    part = lr_plan(P, "flt", 10_000.0)["ruler"]
    nm = sizing.samples_needed(part, noise.niah_m(1024))
    assert nm == {"samples": 20, "cells": 3, "se": 3.29, "needed": 55, "prompts_per_arm": 55 * 3 * 5}
    ru = sizing.samples_needed(part, noise.macro(RULER_TASKS, 1024))
    assert (ru["se"], ru["needed"]) == (1.79, 17)
    rp = sizing.samples_needed(suite_plan(P)["suite"], noise.macro(NIAH_TASKS, 1024))
    assert (rp["samples"], rp["se"], rp["needed"]) == (16, 2.55, 27)
    with pytest.raises(ValueError, match="plan part without 'depths'"):
        sizing.samples_needed({"samples": 6, "seeds": (0,)}, noise.niah_m(1024))


def test_observed_spread_needs_fewer_samples():
    rec = record(rows("vt", 1024, [1] * 9 + [0]) + rows("cwe", 1024, [1] * 5 + [0] * 5))
    sd = sizing.observed_sd(rec, noise.macro(("vt", "cwe"), 1024))
    assert sd == {("vt", 1024): pytest.approx(0.3), ("cwe", 1024): pytest.approx(0.5)}
    part = {"samples": 6, "depths": (0.1, 0.5, 0.9), "seeds": (0,)}
    # (0.25 * 0.09 + 0.25 * 0.25) / (3 * 0.0004) = 70.8 -> 71; the worst case: 0.125 / 0.0012 = 104.2 -> 105
    assert sizing.samples_needed(part, noise.macro(("vt", "cwe"), 1024), sd)["needed"] == 71
    assert sizing.samples_needed(part, noise.macro(("vt", "cwe"), 1024))["needed"] == 105
    with pytest.raises(ValueError, match=r"no scored rows for \[\('qa_1', 1024\)\]"):
        sizing.observed_sd(rec, noise.macro(("vt", "qa_1"), 1024))
