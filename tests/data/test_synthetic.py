"""Retrieval training rows: the share of each task under per-task weights."""

from collections import Counter

import numpy as np
import pytest

from repro.data.synthetic import RetrievalRows

TASKS = ("niah_single_1", "niah_single_2", "niah_single_3")


def _shares(rows: RetrievalRows, length: int, n: int, seed: int = 0) -> dict[str, float]:
    """Fraction of ``n`` rows of ``length`` tokens that each task generated."""
    used = Counter()
    for task in rows.tasks:
        def spy(*args, _task=task, _gen=task.generate, **kw):
            ex = _gen(*args, **kw)
            used[_task.name] += 1
            return ex
        task.generate = spy
    rows.eligible(length)  # probe once per length before counting
    used.clear()
    rng = np.random.default_rng(seed)
    for _ in range(n):
        rows.segment(rng, length)
    return {name: used[name] / n for name in TASKS}


def test_weights_set_the_share_of_each_task(small_tokenizer):
    n = 300
    weighted = _shares(RetrievalRows(small_tokenizer, TASKS, weights=(1.0, 1.0, 6.0)), 256, n)
    equal = _shares(RetrievalRows(small_tokenizer, TASKS), 256, n)
    # binomial standard error at n=300 is at most 0.029: allow about 3 of them
    assert weighted["niah_single_3"] == pytest.approx(0.75, abs=0.09)
    assert weighted["niah_single_1"] == pytest.approx(0.125, abs=0.09)
    assert equal["niah_single_3"] == pytest.approx(1 / 3, abs=0.09)


def test_weights_are_renormalised_over_the_tasks_that_fit(small_tokenizer):
    rows = RetrievalRows(small_tokenizer, TASKS, weights=(1.0, 3.0, 6.0))
    # at 150 tokens the uuid task (prompt >= 138 tokens plus 40 answer tokens) does not fit
    assert [t.name for t in rows.eligible(150)] == ["niah_single_1", "niah_single_2"]
    shares = _shares(rows, 150, 300)
    assert shares["niah_single_3"] == 0
    assert shares["niah_single_2"] == pytest.approx(0.75, abs=0.09)


def test_bad_weights_are_refused(small_tokenizer):
    with pytest.raises(ValueError, match=r"weights=\(1.0,\); allowed: one positive weight per task \(3\)"):
        RetrievalRows(small_tokenizer, TASKS, weights=(1.0,))
    with pytest.raises(ValueError, match="allowed: one positive weight"):
        RetrievalRows(small_tokenizer, TASKS, weights=(1.0, -1.0, 1.0))
