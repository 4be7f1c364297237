"""``python -m repro analyze``: the analyses' JSON with shapes that follow the arguments."""

import json

import numpy as np

from repro.__main__ import main
from repro.cli.common import load_cli_model
from repro.models import load_model


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


# -- --rope-scaling and the positions warning

def _watch(monkeypatch, target: str, loader) -> list:
    """The models loaded through ``target`` (a module's loader, watched), in order."""
    models = []

    def watch(*args, **kwargs):
        models.append(loader(*args, **kwargs))
        return models[-1]

    monkeypatch.setattr(target, watch)
    return models


def test_attention_distance_scales_rope_or_warns_past_the_positions(short_model, text_folder, tmp_path, monkeypatch,
                                                                    capsys):
    loaded = _watch(monkeypatch, "repro.analysis.distance_records.load_model", load_model)
    argv = ["analyze", "attention-distance", "--model", str(short_model), "--data", f"folder:{text_folder}",
            "--length", "320", "--samples", "1", "--queries", "16", "--bins", "8", "--no-progress"]
    assert main([*argv, "--out", str(tmp_path / "scaled"), "--rope-scaling", "linear:2"]) == 0
    err = capsys.readouterr().err
    assert "warning" not in err and "note: --rope-scaling linear:2: rope_parameters" in err
    expected = {"rope_type": "linear", "rope_theta": 10_000.0, "factor": 2.0}
    assert loaded[0].config.rope_parameters == expected and loaded[0].config.max_position_embeddings == 256
    rec = json.loads((tmp_path / "scaled" / "attention_distance.json").read_text())
    assert rec["rope_scaling"] == "linear:2" and rec["rope_parameters"] == expected
    assert main([*argv, "--out", str(tmp_path / "plain")]) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "--length 320 is past the model's 256 positions" in warnings[0]
    assert loaded[1].config.rope_parameters == {"rope_type": "default", "rope_theta": 10_000.0}
    assert json.loads((tmp_path / "plain" / "attention_distance.json").read_text())["rope_scaling"] == "none"


def test_tokens_scales_both_models(short_model, text_folder, tmp_path, monkeypatch, capsys):
    loaded = _watch(monkeypatch, "repro.cli.analyze.load_cli_model", load_cli_model)
    out = tmp_path / "tok"
    assert main(["analyze", "tokens", "--model", str(short_model), "--base", str(short_model), "--data",
                 f"folder:{text_folder}", "--length", "128", "--samples", "2", "--min-count", "1", "--out", str(out),
                 "--no-progress", "--rope-scaling", "yarn:2"]) == 0
    assert [m.config.rope_parameters["rope_type"] for m in loaded] == ["yarn", "yarn"]
    assert [m.config.rope_parameters["original_max_position_embeddings"] for m in loaded] == [256, 256]
    assert "warning" not in capsys.readouterr().err
    rec = json.loads((out / "tokens.json").read_text())
    assert rec["rope_scaling"] == "yarn:2" and rec["base_rope_parameters"] == rec["rope_parameters"]


def test_ig_loads_the_scaled_model_and_refuses_a_bad_value(tiny_model_dir, tmp_path, monkeypatch, capsys):
    out = tmp_path / "ig"
    argv = ["analyze", "ig", "--model", str(tiny_model_dir), "--profile", "smoke", "--length", "192", "--samples", "1",
            "--out", str(out), "--no-progress"]
    assert main([*argv, "--rope-scaling", "yarn:0.5"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --rope-scaling 'yarn:0.5'; allowed: none, linear:F")
    assert not out.exists()
    loaded = _watch(monkeypatch, "repro.analysis.cdt_record.load_model", load_model)
    assert main([*argv, "--rope-scaling", "dynamic:2"]) == 0
    assert loaded[0].config.rope_parameters == {"rope_type": "dynamic", "rope_theta": 10_000.0, "factor": 2.0}
    assert json.loads((out / "ig.json").read_text())["rope_scaling"] == "dynamic:2"
