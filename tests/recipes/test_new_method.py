"""A new method is one objective (here a data method), one builder and one line in the arm table: this file is all
three.

``ShiftedWindow`` (a toy position-shift method: each row is a corpus chunk of the target length whose position
ids start at a random offset below the target) is defined here, its builder too, and the fixture adds its table line;
it trains for two steps through ``python -m repro train`` without any other module knowing of it.
"""

import json
import math

import numpy as np
import pytest

from repro import arms
from repro.__main__ import main
from repro.data.packing import Segment, pack_rows
from repro.data.synthetic import CorpusRows
from repro.io import read_jsonl
from repro.methods.registry import step_rng
from repro.profiles import REPLICATE_SEED_STRIDE, get_profile, scaled_profile
from repro.stages.keys import extension_key
from repro.train import TrainConfig

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


# 2. the builder: the spec of the arm from a profile (its method only when data is given)
def build(p, name, tokenizer=None, data=None, fields=None):
    e = p.extend
    method = None if data is None else ShiftedWindow(e.target_window, e.batch_size, data.corpus_rows,
                                                     tokenizer.pad_token_id, e.seed)
    return arms.ArmSpec(name, method, {"rope": None, "max_positions": 2 * e.target_window},  # positions reach 2x
                        TrainConfig.from_section(e, e.steps, schedule="cosine", device=p.run.device),
                        fields or {"shift": "uniform below the target"}, steps=e.steps)


@pytest.fixture
def registered(monkeypatch):
    monkeypatch.setitem(arms.ARMS, NAME, build)  # 3. the table line (in repro/arms.py: NAME: build)
    monkeypatch.setitem(arms.METHOD_NAMES, "shifted", NAME)  # and its command-line name


def test_a_method_defined_here_trains_through_the_command_line(registered, tiny_model_dir, text_folder, tmp_path):
    assert arms.METHOD_NAMES["shifted"] == NAME and arms.builder_of(f"{NAME}@seed1") is build
    out = tmp_path / "shifted"
    assert main(["train", "--model", str(tiny_model_dir), "--method", "shifted", "--target", "128", "--data",
                 f"folder:{text_folder}", "--steps", "2", "--batch-size", "2", "--lr", "3e-3", "--out", str(out),
                 "--profile", "smoke", "--no-progress"]) == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == [0, 1] and all(math.isfinite(r["loss"]) and r["loss"] > 0 for r in rows)
    assert json.loads((out / "run.json").read_text())["arm"] == NAME
    assert json.loads((out / "final" / "train_summary.json").read_text())["method"] == NAME
    assert (out / "final" / "model.safetensors").exists()


def test_the_table_builds_what_the_method_defines(registered, small_tokenizer):
    p = scaled_profile(get_profile("smoke"), 64, batch_size=3)
    toks = np.arange(1, 301, dtype=np.int64) % 500
    spec = arms.build_arm(p, NAME, small_tokenizer, arms.ArmData(corpus_rows=CorpusRows(toks, np.array([0, 300]))))
    m = spec.method
    b = m.batch(0)
    assert b["input_ids"].shape == (3, 64)
    starts = b["position_ids"][:, 0]
    assert (b["position_ids"] == starts[:, None] + np.arange(64)).all() and (starts < 64).all()
    assert (m.batch(0)["position_ids"] == b["position_ids"]).all()  # a pure function of the step
    assert spec.model == {"rope": None, "max_positions": 128} and spec.train.max_steps == p.extend.steps
    assert arms.build_arm(p, NAME).method is None  # without data: what a key or a plan needs
    assert arms.build_arm(p, f"{NAME}@seed2").train.seed == p.extend.seed + 2 * REPLICATE_SEED_STRIDE  # its seed


def test_unregistered_the_method_is_unknown_to_the_command_line(tiny_model_dir, text_folder, tmp_path, capsys):
    assert "shifted" not in arms.METHOD_NAMES and NAME not in arms.ARMS
    assert main(["train", "--model", str(tiny_model_dir), "--method", "shifted", "--target", "128", "--data",
                 f"folder:{text_folder}", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown method 'shifted'; allowed: flt, pose" in err and not (tmp_path / "x").exists()


def test_the_pipeline_keys_the_new_arm_by_its_cache_fields(registered, monkeypatch):
    p = get_profile("smoke")
    key = extension_key(p, NAME)
    assert key not in (extension_key(p, "flt"), extension_key(p, f"{NAME}@seed1"))
    monkeypatch.setitem(arms.ARMS, NAME, lambda *a, **k: build(*a, **k, fields={"x": 1}))
    assert extension_key(p, NAME) != key  # what the builder says its weights depend on enters the key
