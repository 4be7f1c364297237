"""The self-distillation training stage on the smoke profile: schedules, curve checkpoints, what is saved."""

import json

import pytest
import torch
from safetensors.torch import load_file

from repro.methods.arms import RP_ARMS
from repro.models import load_model
from repro.profiles import get_profile
from repro.stages.extension import train_extension
from repro.methods.selfdistill import rp_cache_fields, rp_schedule, rp_steps
from repro.stages.curves import curve_checkpoints


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("rp")


def test_schedules():
    p = get_profile("tiny")
    assert rp_schedule(p, "rp_skip") == (200, None) and rp_steps(p, "rp_skip@seed2") == 200
    assert rp_schedule(p, "rp_nope") == (200, 40)  # the main cosine horizon, stopped at the early checkpoint
    assert rp_schedule(p, "rp_standard_matched") == (450, None)  # 2.25 x 200: past skip's measured 1.9-2.1x
    # only the matched arm's key carries the ratio; only the early arms' carry the early stop
    fields = {n: rp_cache_fields(p, RP_ARMS[n])["selfdistill"] for n in ("rp_skip", "rp_nope", "rp_standard_matched")}
    assert "matched_steps_ratio" not in fields["rp_skip"] and "ablation_steps" not in fields["rp_skip"]
    assert fields["rp_nope"]["ablation_steps"] == 40 and fields["rp_standard_matched"]["matched_steps_ratio"] == 2.25
    with pytest.raises(ValueError, match="'flt' is not a self-distillation arm"):
        rp_schedule(p, "flt")
    assert all(a.schedule in ("main", "early", "matched") for a in RP_ARMS.values())


def test_early_arm_is_the_main_run_stopped(run_dir):
    """The ablations' early checkpoint: the same data and schedule as the main run, so its weights equal the
    main run's checkpoint at that step (kept for RP-Fig4)."""
    p = get_profile("smoke")
    early = train_extension(p, "rp_skip_early", run_dir, progress=False)
    main = train_extension(p, "rp_skip", run_dir, progress=False)
    step = p.selfdistill.ablation_steps
    curve = curve_checkpoints(main)
    assert step in curve and json.loads((early / "train_summary.json").read_text())["steps"] == step
    a, b = load_file(str(early / "model.safetensors")), load_file(str(curve[step] / "model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    model = load_model(curve[step])  # a curve checkpoint loads like a final folder, with the arm's RoPE base
    assert model.config.rope_parameters["rope_theta"] == p.selfdistill.rope_theta
    rows = [json.loads(x) for x in (main.parent / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == p.extend.steps and all("consistency" in r and "clm" in r for r in rows)


def test_dropout_arm_saves_a_model_without_dropout(run_dir):
    final = train_extension(get_profile("smoke"), "rp_dropout", run_dir, progress=False)
    assert json.loads((final / "config.json").read_text())["attention_dropout"] == 0.0
    rows = [json.loads(x) for x in (final.parent / "metrics.jsonl").read_text().splitlines()]
    assert all(r["consistency"] > 0 for r in rows)  # two dropout passes differ while training
