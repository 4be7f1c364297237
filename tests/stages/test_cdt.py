"""CDT's training stages on the smoke profile: the CD arm trains on rp_standard's rows with its RoPE base, logs the
detection metrics and keeps its curve; the task models share their rows; beta = 0 reproduces rp_standard."""

import json

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro.models import load_model
from repro.profiles import get_profile
from repro.stages.cdt import task_checkpoints, train_task_model
from repro.stages.extension import train_extension
from repro.stages.curves import curve_checkpoints


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("cd")


def _rows(final):
    return [json.loads(x) for x in (final.parent / "metrics.jsonl").read_text().splitlines()]


def test_cdt_arm_trains_on_standard_rows(run_dir):
    p = get_profile("smoke")
    cdt = train_extension(p, "cdt", run_dir, progress=False)
    std = train_extension(p, "rp_standard", run_dir, progress=False)
    rows = _rows(cdt)
    assert len(rows) == p.extend.steps and all(0 < r["noise_fraction"] < 1 and r["detect_loss"] > 0 for r in rows)
    assert load_model(cdt).config.rope_parameters["rope_theta"] == p.selfdistill.rope_theta
    a, b = (np.load(f / "input_ids.npy") for f in sorted(run_dir.glob("smoke/data-*"))
            if f.name.startswith(("data-cdt-", "data-rp_standard-")))
    assert np.array_equal(a, b)  # same rows as CE: only the objective differs
    assert set(curve_checkpoints(cdt)) == {2} and set(task_checkpoints(cdt)) == {2, 3}
    # beta = 0: exactly the CE arm
    p0 = p.override(cdt={"beta": 0.0})
    zero = train_extension(p0, "cdt", run_dir, progress=False)
    x, y = load_file(str(zero / "model.safetensors")), load_file(str(std / "model.safetensors"))
    assert x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_task_models_share_rows_and_keep_checkpoints(run_dir):
    p = get_profile("smoke")
    ce = train_task_model(p, "ce", run_dir, progress=False)
    cd = train_task_model(p, "cdt", run_dir, progress=False)
    assert len(list(run_dir.glob("smoke/data-cdtask-*"))) == 1
    assert set(task_checkpoints(ce)) == set(task_checkpoints(cd)) == {2, 4}
    assert all("noise_fraction" in r for r in _rows(cd)) and not any("noise_fraction" in r for r in _rows(ce))
    assert train_task_model(p, "ce", run_dir, progress=False) == ce  # cached
    with pytest.raises(ValueError, match="objective='kl'; allowed: ce, cdt"):
        train_task_model(p, "kl", run_dir)


def test_scores_of_a_model_folder_given_by_path(run_dir):
    """The IG-scores stage on any HF folder with a tokenizer (here the smoke task model, copied elsewhere)."""
    import shutil

    from repro.stages.cdt_analysis import cd_scores

    p = get_profile("smoke")
    src = train_task_model(p, "ce", run_dir, progress=False)
    mine = run_dir / "my_model"
    shutil.copytree(src, mine, dirs_exist_ok=True)
    rec = cd_scores(p, run_dir, progress=False, path=mine)
    n = p.cdt.analysis_samples
    assert rec["checkpoint"] == str(mine) and len(rec["scores"]) == len(rec["correct"]) == len(rec["manual"]) == n
    s = rec["scores"][0]
    assert abs(sum(s["ig_share"].values()) - 1) < 1e-9 and len(s["ig_token"]) == len(rec["types"][0])
    assert [r["lr"] for r in rec["sweep"]] == list(p.cdt.lr_sweep) and all("gain_se" in r for r in rec["sweep"])


def test_smoke_cd_evaluation_runs_the_babilong_part(monkeypatch, tmp_path):
    """``run_cd_suite`` on the smoke profile evaluates every part of ``cd_plan``, BABILong's qa1-qa5 among them,
    and merges their rows into ``all`` (what CD-Tab2 reads); the evaluation itself is stubbed."""
    from repro.stages import evaluation

    calls = []

    def fake_eval(p, name, **kw):
        calls.append(kw)
        return {"results": [{"task": t, "length": L, "score": 1.0} for t in kw["tasks"] for L in kw["lengths"]],
                "skipped": [], "seconds": 1.0}

    monkeypatch.setattr(evaluation, "evaluate_checkpoint", fake_eval)
    monkeypatch.setattr(evaluation, "checkpoint_rope_theta", lambda p, name, run_dir: 40_000.0)
    out = evaluation.run_cd_suite("smoke", "cdt", tmp_path, progress=False)
    assert set(out) == {"suite", "multihop", "babilong", "all"}
    bl = next(c for c in calls if c["tasks"][0].startswith("babilong_"))
    assert bl["tasks"] == tuple(f"babilong_qa{k}" for k in range(1, 6)) and bl["lengths"] == (384,)
    assert (bl["depths"], bl["samples"], bl["seeds"], bl["record"]) == ((0.5,), 1, (0,), True)
    assert sorted(r["task"] for r in out["all"]["results"] if r["task"].startswith("babilong_")) == list(bl["tasks"])
    assert out["all"]["seconds"] == 3.0
