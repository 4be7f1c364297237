"""``python -m repro analyze``: the analyses' JSON with shapes that follow the arguments."""

import json

import numpy as np

from repro.__main__ import main


def test_attention_distance_has_one_histogram_per_layer(tiny_model_dir, text_folder, tmp_path):
    out = tmp_path / "ad"
    argv = ["analyze", "attention-distance", "--model", str(tiny_model_dir), "--data", f"folder:{text_folder}",
            "--length", "256", "--samples", "2", "--queries", "16", "--bins", "8", "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    rec = json.loads((out / "attention_distance.json").read_text())
    assert rec["length"] == 256 and rec["samples"] == 2 and rec["queries"] == 16 and len(rec["edges"]) == 9
    assert len(rec["layers"]) == 1
    layer = rec["layers"][0]
    assert len(layer["per_sample"]["mean_distance"]) == 2 and 0 <= layer["far_share"] <= 1


def test_tokens_scores_every_position_and_writes_anchors(tiny_model_dir, text_folder, tmp_path):
    out = tmp_path / "tok"
    argv = ["analyze", "tokens", "--model", str(tiny_model_dir), "--base", str(tiny_model_dir), "--data",
            f"folder:{text_folder}", "--length", "128", "--samples", "3", "--min-count", "1", "--out", str(out),
            "--no-progress"]
    assert main(argv) == 0
    rec = json.loads((out / "tokens.json").read_text())
    assert rec["samples_shape"] == [3, 128] and rec["changes_shape"] == [3, 127] and rec["selected_shape"] == [3, 127]
    assert np.allclose(rec["mean_change_by_position"], 0.0)  # the same model twice: no logit changes
    assert json.loads((out / "anchors.json").read_text())["anchors"] == rec["anchors"]


def test_ig_scores_one_value_per_token(tiny_model_dir, tmp_path):
    out = tmp_path / "ig"
    argv = ["analyze", "ig", "--model", str(tiny_model_dir), "--profile", "smoke", "--length", "192", "--samples", "2",
            "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    rec = json.loads((out / "ig.json").read_text())
    assert rec["samples"] == 2 and len(rec["correct"]) == 2 and len(rec["types"]) == 2
    for s, types, n in zip(rec["scores"], rec["types"], rec["sample_tokens"]):
        assert len(s["ig_token"]) == len(types) == n and np.isfinite(s["ig_token"]).all()
        assert abs(sum(s["ig_share"].values()) - 1) < 1e-6


def test_unknown_analysis_and_missing_model(tiny_model_dir, tmp_path, capsys):
    assert main(["analyze", "saliency", "--model", str(tiny_model_dir)]) == 2
    assert "'saliency'" in capsys.readouterr().err
    assert main(["analyze", "ig", "--model", str(tmp_path / "none"), "--out", str(tmp_path / "o")]) == 2
    assert "does not exist" in capsys.readouterr().err and not (tmp_path / "o").exists()
