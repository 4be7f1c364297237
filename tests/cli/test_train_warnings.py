"""``python -m repro train`` on legal but surprising inputs: the run goes on, with one ``warning: ...`` line on
stderr each, saying what happens (the bad inputs that stop a run are in ``tests/test_bad_inputs.py``)."""

import argparse
import json
import shutil

import pytest

from repro.__main__ import main


def _args(model, data, out, *extra, target="128"):
    return ["train", "--model", str(model), "--method", "flt", "--target", target, "--data", f"folder:{data}",
            "--steps", "1", "--batch-size", "2", "--lr", "3e-3", "--out", str(out), "--profile", "smoke",
            "--no-progress", *extra]


def _warnings(capsys) -> list[str]:
    """The ``warning:`` lines of the finished command's stderr (transformers' progress bars aside)."""
    return [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("warning: ")]


def _model_copy(src, dst, **config):
    """A copy of the model folder ``src`` with ``config`` fields of config.json replaced."""
    shutil.copytree(src, dst)
    cfg = json.loads((dst / "config.json").read_text())
    (dst / "config.json").write_text(json.dumps({**cfg, **config}))
    return dst


def test_a_txt_file_of_nul_bytes_is_skipped_with_a_warning(tiny_model_dir, text_folder, tmp_path, capsys):
    data = shutil.copytree(text_folder, tmp_path / "texts")
    (data / "blob.txt").write_bytes(b"\x00" * 50_000)
    assert main(_args(tiny_model_dir, data, tmp_path / "out")) == 0
    (line,) = _warnings(capsys)
    assert "blob.txt" in line and "NUL bytes (50000 of 50000" in line and "skipped" in line


def test_a_folder_of_nul_files_only_is_an_error(tiny_model_dir, tmp_path, capsys):
    data = tmp_path / "blobs"
    data.mkdir()
    (data / "blob.txt").write_bytes(b"\x00" * 100)
    out = tmp_path / "out"
    assert main(_args(tiny_model_dir, data, out)) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1].startswith("error: --data ")
    assert not out.exists()


def test_a_target_beyond_max_position_embeddings_raises_it_in_the_saved_config(tiny_model_dir, text_folder, tmp_path,
                                                                                capsys):
    model = _model_copy(tiny_model_dir, tmp_path / "short", max_position_embeddings=128)
    out = tmp_path / "out"
    assert main(_args(model, text_folder, out, target="256")) == 0
    (line,) = _warnings(capsys)
    assert "max_position_embeddings is 128, below --target 256" in line and "max_position_embeddings=256" in line
    assert json.loads((out / "final" / "config.json").read_text())["max_position_embeddings"] == 256


def test_a_tokenizer_without_pad_token_pads_with_eos_and_says_where(tiny_model_dir, text_folder, tmp_path, capsys):
    model = _model_copy(tiny_model_dir, tmp_path / "nopad", pad_token_id=None)
    tok_cfg = json.loads((model / "tokenizer_config.json").read_text())
    tok_cfg.pop("pad_token", None)
    (model / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    out = tmp_path / "out"
    assert main(_args(model, text_folder, out)) == 0
    (line,) = _warnings(capsys)
    eos = tok_cfg["eos_token"]
    assert "has no pad token" in line and repr(eos) in line and str(out / "final") in line
    saved_tok = json.loads((out / "final" / "tokenizer_config.json").read_text())
    saved_cfg = json.loads((out / "final" / "config.json").read_text())
    assert saved_tok["pad_token"] == eos
    assert saved_cfg["pad_token_id"] == saved_cfg["eos_token_id"]


def _counts(**kw) -> argparse.Namespace:
    return argparse.Namespace(**{"seed": None, "steps": None, "batch_size": None, "target": 128, **kw})


def test_the_sanity_bounds_move_with_their_environment_variables(monkeypatch):
    from repro.cli.common import CLIError
    from repro.cli.train import MAX_STEPS, MAX_TOKENS_PER_STEP, check_counts

    check_counts(_counts(steps=MAX_STEPS, batch_size=MAX_TOKENS_PER_STEP // 128, seed=2**32 - 1))
    monkeypatch.setenv("REPRO_MAX_STEPS", str(10**13))
    monkeypatch.setenv("REPRO_MAX_TOKENS_PER_STEP", str(10**9))
    check_counts(_counts(steps=10**12, batch_size=100_000))
    monkeypatch.setenv("REPRO_MAX_STEPS", "lots")
    with pytest.raises(CLIError, match=r"REPRO_MAX_STEPS='lots'; allowed: an integer >= 1"):
        check_counts(_counts(steps=5))
