"""The committed figures index, checked as it is: every row carries its commit, profile and run, the rows of
``reproduce`` come from one run at one clean commit, and no verdict contradicts its own declared headline's test
(:func:`repro.reports.index_check.check_index`, over ``figures/index.json`` and ``figures/costs/index.json``)."""

from pathlib import Path

import pytest

from repro.io import read_json
from repro.reports.index_check import check_index

FIGURES = Path(__file__).resolve().parents[1] / "figures"


@pytest.mark.parametrize("index", ["index.json", "costs/index.json"])
def test_committed_index_is_one_runs_and_says_what_its_claim_tests_say(index):
    problems = check_index(read_json(FIGURES / index))
    assert not problems, f"figures/{index}: {len(problems)} problem(s):\n" + "\n".join(problems)
