"""``--device`` and ``--dtype`` on train, evaluate, analyze and reproduce."""

import json

import pytest
import torch

from repro.__main__ import main


def _train(model, data, out, *extra):
    return ["train", "--model", str(model), "--method", "flt", "--target", "128", "--data", f"folder:{data}",
            "--steps", "2", "--batch-size", "2", "--out", str(out), "--profile", "smoke", "--no-progress", *extra]


@pytest.mark.parametrize("cmd", ["train", "evaluate", "analyze ig", "reproduce"])
def test_help_shows_device_and_dtype(cmd, capsys):
    assert main([*cmd.split(), "--help"]) == 0
    out = capsys.readouterr().out
    assert "--device" in out and "--dtype" in out


def test_train_on_the_named_device_in_the_named_precision(tiny_model_dir, text_folder, tmp_path):
    out = tmp_path / "bf16"
    assert main(_train(tiny_model_dir, text_folder, out, "--device", "cpu", "--dtype", "bfloat16")) == 0
    cfg = json.loads((out / "run.json").read_text())["train_config"]
    assert cfg["device"] == "cpu" and cfg["bf16"] is True
    out = tmp_path / "auto"
    assert main(_train(tiny_model_dir, text_folder, out)) == 0  # auto: the method's own precision on the CPU
    cfg = json.loads((out / "run.json").read_text())["train_config"]
    assert cfg["device"] == "auto" and cfg["bf16"] is (torch.cuda.is_available())


@pytest.mark.parametrize("flag, value, named", [
    ("--device", "gpu", "--device 'gpu'; allowed: auto, cpu, cuda, cuda:N"),
    ("--dtype", "float16", "--dtype 'float16'; allowed: auto, float32, bfloat16"),
])
def test_bad_device_or_dtype_is_one_line_naming_the_allowed(tiny_model_dir, text_folder, tmp_path, capsys, flag,
                                                             value, named):
    assert main(_train(tiny_model_dir, text_folder, tmp_path / "x", flag, value)) == 2
    assert named in capsys.readouterr().err and not (tmp_path / "x").exists()
    assert main(["evaluate", "--model", str(tiny_model_dir), "--tasks", "niah_single_1", "--lengths", "128",
                 "--out", str(tmp_path / "e"), flag, value]) == 2
    assert named in capsys.readouterr().err


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_cuda_device_on_a_machine_without_one_is_refused(tiny_model_dir, text_folder, tmp_path, capsys):
    assert main(_train(tiny_model_dir, text_folder, tmp_path / "x", "--device", "cuda")) == 2
    assert "--device 'cuda': this machine has 0 CUDA device(s); allowed: cpu or auto" in capsys.readouterr().err


def test_evaluate_loads_the_weights_in_the_named_dtype(tiny_model_dir, tmp_path):
    out = tmp_path / "eval"
    assert main(["evaluate", "--model", str(tiny_model_dir), "--tasks", "niah_single_1", "--lengths", "128",
                 "--samples", "2", "--out", str(out), "--no-progress", "--device", "cpu", "--dtype",
                 "bfloat16"]) == 0
    assert (out / "summary.json").exists()
