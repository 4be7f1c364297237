"""Real SIGKILLs (:mod:`repro.bench.kill`): killed training runs resume to bitwise-equal weights, killed
evaluation runs never leave a partial result that reads as finished, and their re-runs complete (a killed notebook
run: tests/test_pipeline.py, on the smoke run's folder)."""

import json

import pytest

from repro.bench import kill as K
from repro.bench.kill_process import run_once


@pytest.fixture(scope="module")
def kill_kinds(tmp_path_factory):
    """The three kinds of work on a tiny random Llama and a folder of texts."""
    return K.kinds(K.make_assets(tmp_path_factory.mktemp("kill") / "assets"))


def _reference(kind, root):
    ref = root / "reference"
    ref.mkdir(parents=True)
    return ref, run_once(kind.command(ref), ref, ref / "log.txt")


@pytest.mark.slow
def test_killed_training_resumes_to_bitwise_equal_weights(kill_kinds, tmp_path):
    """A kill aimed at a checkpoint write (the hidden ``.ckpt-*.tmp`` folder is left behind): the re-run ends with
    the uninterrupted run's weights, bit for bit, and its metrics (kills at random moments: ``python -m
    repro.bench.kill``; Ctrl-C and killed multi-process runs: tests/cli/test_train_processes.py,
    tests/test_distributed.py)."""
    kind = kill_kinds["train"]
    ref, _ = _reference(kind, tmp_path)
    # the command a user runs, as a process of its own: what it prints at the end
    assert f"trained pose (pose) for {K.TRAIN_STEPS} steps" in (ref / "log.txt").read_text()
    aimed = K.run_trial(kind, tmp_path / "aimed", ref, 0, True, 0.0)
    assert aimed.killed and aimed.inside_write and any(e.startswith(".ckpt-") for e in aimed.left), aimed
    assert aimed.ok and aimed.resumes == 1, aimed


@pytest.mark.slow
def test_killed_evaluation_leaves_no_partial_result(kill_kinds, tmp_path):
    kind = kill_kinds["evaluate"]
    ref, duration = _reference(kind, tmp_path)
    trial = K.run_trial(kind, tmp_path / "t", ref, 0, False, 0.7 * duration)
    assert trial.ok and not trial.partial_read, trial


def test_checks_catch_inconsistent_results(tmp_path):
    """The readers' checks: a summary that disagrees with the predictions and a stamp without its executed notebook
    are reported (half-written files and temporary entries: tests/bench/test_kill_process.py)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "predictions.jsonl").write_text('{"index": 0, "task": "vt", "target_length": 256, "score": 1.0}\n')
    (out / "summary.json").write_text(json.dumps({"cells": [{"task": "vt", "length": 256, "n": 1, "accuracy": 0.0,
                                                             "se": 0.0}]}))
    assert "summary.json cells do not match predictions.jsonl" in K.eval_consistency(out)
    nb = tmp_path / "nb"
    nb.mkdir()
    (nb / "positions.done.json").write_text("{}")
    assert K.notebook_consistency(nb) == ["positions.done.json without positions.ipynb"]
