"""``python -m repro train``: metrics and final weights of a few steps on a tiny random Llama; bad arguments."""

import json
import math
import subprocess
import sys

import pytest

from repro.__main__ import main
from repro.io import read_jsonl
from repro.pipeline import REPO


def _args(model, data, out, method="flt", steps=6, *extra):
    return ["train", "--model", str(model), "--method", method, "--target", "128", "--data", f"folder:{data}",
            "--steps", str(steps), "--batch-size", "2", "--lr", "3e-3", "--out", str(out), "--profile", "smoke",
            "--no-progress", *extra]


def test_train_flt_writes_falling_finite_losses_and_final(tiny_model_dir, text_folder, tmp_path):
    out = tmp_path / "flt"
    assert main(_args(tiny_model_dir, text_folder, out, "flt", 8)) == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(8))
    losses = [r["loss"] for r in rows]
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3  # the loss falls
    assert (out / "final" / "model.safetensors").exists() and (out / "final" / "tokenizer.json").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["arm"] == "flt" and run["train_config"]["max_steps"] == 8


@pytest.mark.parametrize("method,arm", [("selfdistill", "rp_skip"), ("cdt", "cdt"), ("prolong", "prolong")])
def test_train_other_families_take_two_steps(tiny_model_dir, text_folder, tmp_path, method, arm):
    out = tmp_path / method
    assert main(_args(tiny_model_dir, text_folder, out, method, 2)) == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert len(rows) == 2 and all(math.isfinite(r["loss"]) for r in rows)
    assert json.loads((out / "run.json").read_text())["arm"] == arm


def test_tokenizer_from_a_separate_file(tiny_model_dir, text_folder, tmp_path):
    model = tmp_path / "bare"
    model.mkdir()
    for f in ("config.json", "model.safetensors"):
        (model / f).write_bytes((tiny_model_dir / f).read_bytes())
    out = tmp_path / "out"
    assert main(_args(model, text_folder, out, "flt", 1)) == 2  # no tokenizer in the model folder
    assert not out.exists()
    assert main(_args(model, text_folder, out, "flt", 1, "--tokenizer", str(tiny_model_dir / "tokenizer.json"))) == 0
    assert len(read_jsonl(out / "metrics.jsonl")) == 1


@pytest.mark.parametrize("change,named", [
    ({"--method": "lora"}, "'lora'"),
    ({"--target": "0"}, "0; allowed"),
    ({"--steps": "-3"}, "-3; allowed"),
    ({"--target": "100000"}, "--target 100000 is longer than allowed"),
    ({"--target": "9999999"}, "--target 9999999 is longer than allowed"),
    ({"--data": "s3:bucket"}, "'s3:bucket' does not parse"),
    ({"--data": "folder:/no/such/dir"}, "'/no/such/dir' does not exist"),
    ({"--model": "/no/such/model"}, "'/no/such/model' does not exist"),
])
def test_bad_arguments_name_the_value_and_write_nothing(tiny_model_dir, text_folder, tmp_path, capsys, change, named):
    out = tmp_path / "bad"
    argv = _args(tiny_model_dir, text_folder, out, "flt", 2)
    for flag, value in change.items():
        argv[argv.index(flag) + 1] = value
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "allowed" in err
    assert not out.exists()


def test_longrecipe_needs_anchors(tiny_model_dir, text_folder, tmp_path, capsys):
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "lr", "longrecipe", 1)) == 2
    assert "--anchors" in capsys.readouterr().err
    anchors = tmp_path / "anchors.json"
    anchors.write_text(json.dumps({"anchors": [13, 14, 15]}))
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "lr", "longrecipe", 1, "--anchors", str(anchors))) == 0


def test_python_m_repro_train_subprocess(tiny_model_dir, text_folder, tmp_path):
    out = tmp_path / "sub"
    proc = subprocess.run([sys.executable, "-m", "repro", *_args(tiny_model_dir, text_folder, out, "pose", 2)],
                          cwd=REPO, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "trained pose (pose) for 2 steps" in proc.stdout
    assert len(read_jsonl(out / "metrics.jsonl")) == 2 and (out / "final" / "config.json").exists()
    bad = subprocess.run([sys.executable, "-m", "repro", "train", "--model", str(tiny_model_dir), "--method", "nope",
                          "--target", "128", "--data", f"folder:{text_folder}"], cwd=REPO, capture_output=True,
                         text=True, timeout=300)
    assert bad.returncode == 2 and bad.stderr.strip().splitlines()[-1].startswith("error: unknown method 'nope'")
