"""A new method is one method module, one recipe entry and one registry line: this file is all three.

``ShiftedWindow`` (a toy position-shift method: each row is a corpus chunk of the target length whose position
ids start at a random offset below the target) is defined and registered here, its recipe is registered here,
and it trains for two steps through ``python -m repro train`` without any other module knowing of it.
"""

import json
import math

import numpy as np
import pytest

from repro import recipes
from repro.__main__ import main
from repro.data.packing import Segment, pack_rows
from repro.io import read_jsonl
from repro.methods import METHODS, register_method
from repro.methods.registry import step_rng

NAME = "shifted_window"


# 1. the method module (registered by the fixture below, so that no other test sees it)
class ShiftedWindow:
    """Rows of ``target`` corpus tokens, position ids ``s .. s + target - 1`` with ``s`` drawn below ``target``."""

    def __init__(self, target: int, batch_size: int, corpus_rows, pad_id: int, seed: int):
        self.name, self.target, self.batch_size = NAME, target, batch_size
        self.rows, self.pad_id, self.seed = corpus_rows, pad_id, seed

    def batch(self, step: int) -> dict[str, np.ndarray]:
        rng = step_rng(self.seed, step)
        segs = []
        for _ in range(self.batch_size):
            seg = self.rows.segment(rng, self.target, whole=True)
            shift = int(rng.integers(0, self.target))
            segs.append(Segment(seg.tokens, seg.weights, np.arange(len(seg.tokens), dtype=np.int64) + shift))
        return pack_rows(segs, self.target, self.pad_id)

    def observe(self, step: int, metrics: dict) -> None:
        pass

    def finished(self, step: int) -> bool:
        return False

    def state_dict(self) -> dict:
        return {}

    def load_state_dict(self, state: dict) -> None:
        pass


# 2. the recipe entry
def _build(p, arm, tokenizer, inputs, seed):
    e = p.extend
    return METHODS[NAME](target=e.target_window, batch_size=e.batch_size, corpus_rows=inputs.corpus_rows,
                         pad_id=tokenizer.pad_token_id, seed=e.seed if seed is None else seed)


def _settings(p, arm):  # positions reach twice the target
    return {"rope": None, "max_positions": 2 * p.extend.target_window}


RECIPE = recipes.Recipe(NAME, owns=lambda arm: arm == NAME, method=_build, cli={"shifted": NAME},
                        model_settings=_settings)


@pytest.fixture
def registered():
    register_method(NAME)(ShiftedWindow)  # what @register_method(NAME) does in a method module
    recipes.register_recipe(RECIPE)  # 3. the registry line
    yield
    recipes.unregister_recipe(NAME)
    METHODS.pop(NAME)


def test_a_method_defined_here_trains_through_the_command_line(registered, tiny_model_dir, text_folder, tmp_path):
    assert recipes.cli_methods()["shifted"] == NAME and recipes.family(NAME) == NAME
    out = tmp_path / "shifted"
    assert main(["train", "--model", str(tiny_model_dir), "--method", "shifted", "--target", "128", "--data",
                 f"folder:{text_folder}", "--steps", "2", "--batch-size", "2", "--lr", "3e-3", "--out", str(out),
                 "--profile", "smoke", "--no-progress"]) == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1] and all(math.isfinite(r["loss"]) and r["loss"] > 0 for r in rows)
    assert json.loads((out / "run.json").read_text())["arm"] == NAME
    assert json.loads((out / "final" / "train_summary.json").read_text())["method"] == NAME
    assert (out / "final" / "model.safetensors").exists()


def test_the_recipe_builds_what_the_method_defines(registered, small_tokenizer):
    from repro.data.synthetic import CorpusRows
    from repro.profiles import get_profile

    p = recipes.scaled_profile(get_profile("smoke"), 64, batch_size=3)
    toks = np.arange(1, 301, dtype=np.int64) % 500
    m = recipes.build_method(p, NAME, small_tokenizer, corpus_rows=CorpusRows(toks, np.array([0, 300])))
    b = m.batch(0)
    assert b["input_ids"].shape == (3, 64)
    starts = b["position_ids"][:, 0]
    assert (b["position_ids"] == starts[:, None] + np.arange(64)).all() and (starts < 64).all()
    assert (m.batch(0)["position_ids"] == b["position_ids"]).all()  # a pure function of the step
    assert recipes.model_settings(p, NAME) == {"rope": None, "max_positions": 128}
    assert recipes.train_config(p, NAME).max_steps == p.extend.steps  # FLT's defaults where the recipe is silent


def test_unregistered_the_method_is_unknown_to_the_command_line(tiny_model_dir, text_folder, tmp_path, capsys):
    assert "shifted" not in recipes.cli_methods()
    assert main(["train", "--model", str(tiny_model_dir), "--method", "shifted", "--target", "128", "--data",
                 f"folder:{text_folder}", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'shifted'; allowed: flt, pose" in err and not (tmp_path / "x").exists()


def test_registering_a_clashing_command_line_name_is_refused():
    with pytest.raises(ValueError, match=r"command-line names \['flt'\] already belong to \['extension'\]"):
        recipes.register_recipe(recipes.Recipe("other", owns=lambda arm: False, method=_build, cli={"flt": "x"}))
    assert "other" not in recipes.RECIPES


def test_the_pipeline_keys_the_new_arm_by_its_recipe(registered, monkeypatch):
    from repro.profiles import get_profile
    from repro.stages.keys import extension_key

    p = get_profile("smoke")
    key = extension_key(p, NAME)
    assert key not in (extension_key(p, "flt"), extension_key(p, f"{NAME}@seed1"))
    monkeypatch.setitem(recipes.RECIPES, NAME, RECIPE.__class__(**{**RECIPE.__dict__,
                                                                    "key_fields": lambda p, arm: {"x": 1}}))
    assert extension_key(p, NAME) != key  # what the recipe says its weights depend on enters the key
