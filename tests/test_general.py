"""General abilities through lm-evaluation-harness: a checkpoint loaded our way, offline, pooled per benchmark."""

import math

import pytest

from repro.general import benchmark_accuracy
from repro.tasks.summary import summarize


def rows(task, scores):
    return [{"task": task, "target_length": None, "score": float(s)} for s in scores]


def test_benchmark_accuracy_pools_the_samples_of_its_leaves():
    a, b = [1, 0, 1, 1], [0, 0, 1]
    record = {"cells": summarize(rows("mmlu_x", a) + rows("mmlu_y", b)), "groups": {"mmlu": ["mmlu_x", "mmlu_y"]}}
    acc, se, n = benchmark_accuracy(record, "mmlu")
    pooled = a + b
    mean = sum(pooled) / len(pooled)
    assert n == 7 and math.isclose(acc, 4 / 7)
    assert math.isclose(se, math.sqrt(sum((x - mean) ** 2 for x in pooled) / 7) / math.sqrt(7))
    assert benchmark_accuracy(record, "mmlu_y")[:2] == (1 / 3, pytest.approx(math.sqrt(2 / 9) / math.sqrt(3)))
    assert benchmark_accuracy(record, "gsm8k") is None and benchmark_accuracy({}, "mmlu") is None


def test_lm_eval_scores_runs_a_local_copy_offline(tiny_model_dir, tmp_path):
    pytest.importorskip("lm_eval")
    from repro.general import lm_eval_scores
    from tests.harness.local_data import write_local_mmlu

    data = write_local_mmlu(tmp_path / "data")
    record = lm_eval_scores(tiny_model_dir, ["mmlu_abstract_algebra"], data=data, cache=tmp_path, progress=False)
    assert record["groups"] == {"mmlu_abstract_algebra": ["mmlu_abstract_algebra"]}
    assert record["harness"]["sources"] == {"mmlu_abstract_algebra": str(data / "cais" / "mmlu")}
    (cell,) = record["cells"]
    assert cell["n"] == 2 and cell["length"] is None and cell["accuracy"] in (0.0, 0.5, 1.0)
    assert benchmark_accuracy(record, "mmlu_abstract_algebra") == pytest.approx((cell["accuracy"], cell["se"], 2))
    with pytest.raises(ValueError, match="no benchmark tasks given"):
        lm_eval_scores(tiny_model_dir, [])
