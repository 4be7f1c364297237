"""Fixtures shared by the command-line tests."""

import json
import shutil

import pytest


@pytest.fixture(scope="module")
def short_model(tiny_model_dir, tmp_path_factory):
    """The session's tiny model with a 256-position window (its config's max_position_embeddings)."""
    path = tmp_path_factory.mktemp("short") / "model"
    shutil.copytree(tiny_model_dir, path)
    cfg = json.loads((path / "config.json").read_text())
    (path / "config.json").write_text(json.dumps({**cfg, "max_position_embeddings": 256}))
    return path
