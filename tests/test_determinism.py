"""Same seed, same bytes: two from-scratch runs of a training stage and of a notebook write identical artifacts
up to their volatile fields (:mod:`repro.determinism`); a real difference is reported."""

import json
import os
import subprocess
import sys

import pytest

from repro.determinism import compare_runs
from repro.io import read_json, read_jsonl
from repro.manifest import environment
from repro.pipeline import REPO
from repro.profiles import get_profile

ENV_FIELDS = {"threads", "torch", "cpu_capability", "cpu_model", "transformers", "numpy", "python"}

_TRAIN_BASE = """
import sys
from repro.stages.base import train_base
train_base("smoke", run_dir=sys.argv[1], progress=False)
"""


def _train_base_in_fresh_processes(runs: dict) -> None:
    """The smoke profile's corpus and base stages from scratch, each run folder of ``runs`` (folder -> string-hash
    seed) in a process of its own with its own string-hash seed, so anything that depends on set order shows. The
    processes run at the same time: the trainer pins the profile's thread count, so the bits do not depend on what
    else runs (a difference would show here too)."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    procs = [subprocess.Popen([sys.executable, "-c", _TRAIN_BASE, str(run_dir)], cwd=REPO, text=True,
                              env={**env, "PYTHONHASHSEED": seed}, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for run_dir, seed in runs.items()]
    for p in procs:
        _, err = p.communicate(timeout=900)
        assert p.returncode == 0, err[-3000:]


def test_environment_names_what_decides_the_bits():
    env = environment()
    assert set(env) == ENV_FIELDS
    assert env["threads"] >= 1 and env["cpu_model"] and env["cpu_capability"]
    json.dumps(env)  # plain JSON values


def _two_runs(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    for root in (a, b):
        (root / "ckpt").mkdir(parents=True)
        (root / "ckpt" / "model.safetensors").write_bytes(bytes(range(64)))
        rec = {"checkpoint": str(root / "ckpt"), "score": 0.5, "seconds": 1.0 if root == a else 2.5,
               "environment": {"threads": 1}}
        (root / "rec.json").write_text(json.dumps(rec))
        (root / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0, "tokens_per_s": 3.0}) + "\n")
    (b / "rec.json").write_text((b / "rec.json").read_text().replace('"threads": 1', '"threads": 8'))
    (b / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0, "tokens_per_s": 9.5}) + "\n")
    return a, b


def test_compare_runs_skips_volatile_fields_and_the_run_folder(tmp_path):
    a, b = _two_runs(tmp_path)
    assert compare_runs(a, b) == []  # timings, environment and absolute paths differ only


def test_compare_runs_reports_one_changed_byte_a_changed_value_and_a_missing_file(tmp_path):
    a, b = _two_runs(tmp_path)
    weights = bytearray((b / "ckpt" / "model.safetensors").read_bytes())
    weights[17] ^= 1
    (b / "ckpt" / "model.safetensors").write_bytes(bytes(weights))
    assert compare_runs(a, b) == ["ckpt/model.safetensors: bytes differ (64 vs 64 bytes)"]
    (b / "metrics.jsonl").write_text(json.dumps({"step": 0, "loss": 1.0000001, "tokens_per_s": 3.0}) + "\n")
    (a / "extra.npy").write_bytes(b"\0")
    assert compare_runs(a, b) == ["extra.npy: only in a", "ckpt/model.safetensors: bytes differ (64 vs 64 bytes)",
                                  "metrics.jsonl: [0].loss: 1.0 != 1.0000001"]


@pytest.mark.slow
def test_two_from_scratch_runs_of_a_training_stage_are_byte_identical(tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    _train_base_in_fresh_processes({a: "1", b: "2"})
    assert compare_runs(a, b) == []
    (base,) = (a / "smoke").glob("base-*")
    other = b / "smoke" / base.name
    assert (base / "final" / "model.safetensors").read_bytes() == (other / "final" / "model.safetensors").read_bytes()
    assert read_jsonl(base / "metrics.jsonl") != read_jsonl(other / "metrics.jsonl")  # timings do differ
    summary = read_json(base / "final" / "train_summary.json")
    # the stage pins its own thread count (the profile's), whatever the process had
    assert ENV_FIELDS <= set(summary) and summary["threads"] == get_profile("smoke").base.threads
    assert summary["world_size"] == 1
    (corpus,) = (a / "smoke").glob("corpus-*")
    assert set(read_json(corpus / "manifest.json")["environment"]) == ENV_FIELDS


def test_evaluation_records_carry_the_environment_and_return_without_it(tmp_path):
    from repro.stages.cache import cached_json

    path = tmp_path / "eval" / "rec.json"
    fresh = cached_json(path, False, lambda: {"score": 1.0})
    assert fresh == {"score": 1.0} == cached_json(path, False, lambda: 1 / 0)  # cached: not recomputed
    assert set(read_json(path)["environment"]) == ENV_FIELDS
