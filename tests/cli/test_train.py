"""``python -m repro train``: metrics and final weights of a few steps on a tiny random Llama; bad arguments."""

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from repro.__main__ import build_parser, main, parse
from repro.cli.train import arm_spec, build_parts, model_rope, run_profile, run_rope
from repro.models import build_tiny
from repro.profiles import ModelConfig
from repro.io import read_jsonl
from repro.pipeline import REPO


def _args(model, data, out, method="flt", steps=6, *extra):
    return ["train", "--model", str(model), "--method", method, "--target", "128", "--data", f"folder:{data}",
            "--steps", str(steps), "--batch-size", "2", "--lr", "3e-3", "--out", str(out), "--profile", "smoke",
            "--no-progress", *extra]


def test_train_flt_writes_falling_finite_losses_and_final(tiny_model_dir, text_folder, tmp_path):
    out = tmp_path / "flt"
    assert main(_args(tiny_model_dir, text_folder, out, "flt", 8)) == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert [r["step"] for r in rows] == list(range(8))
    losses = [r["loss"] for r in rows]
    assert all(math.isfinite(v) for v in losses)
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3  # the loss falls
    assert (out / "final" / "model.safetensors").exists() and (out / "final" / "tokenizer.json").exists()
    run = json.loads((out / "run.json").read_text())
    assert run["arm"] == "flt" and run["train_config"]["max_steps"] == 8


@pytest.mark.parametrize("method,arm", [("selfdistill", "rp_skip"), ("cdt", "cdt"), ("prolong", "prolong")])
def test_train_other_families_take_two_steps(tiny_model_dir, text_folder, tmp_path, method, arm):
    out = tmp_path / method
    assert main(_args(tiny_model_dir, text_folder, out, method, 2)) == 0
    rows = read_jsonl(out / "metrics.jsonl")
    assert len(rows) == 2 and all(math.isfinite(r["loss"]) for r in rows)
    assert json.loads((out / "run.json").read_text())["arm"] == arm


def test_tokenizer_from_a_separate_file(tiny_model_dir, text_folder, tmp_path):
    model = tmp_path / "bare"
    model.mkdir()
    for f in ("config.json", "model.safetensors"):
        (model / f).write_bytes((tiny_model_dir / f).read_bytes())
    out = tmp_path / "out"
    assert main(_args(model, text_folder, out, "flt", 1)) == 2  # no tokenizer in the model folder
    assert not out.exists()
    assert main(_args(model, text_folder, out, "flt", 1, "--tokenizer", str(tiny_model_dir / "tokenizer.json"))) == 0
    assert len(read_jsonl(out / "metrics.jsonl")) == 1


@pytest.mark.parametrize("change,named", [
    ({"--method": "lora"}, "'lora'"),
    ({"--target": "0"}, "0; allowed"),
    ({"--steps": "-3"}, "-3; allowed"),
    ({"--target": "100000"}, "--target 100000 is longer than allowed"),
    ({"--target": "9999999"}, "--target 9999999 is longer than allowed"),
    ({"--data": "s3:bucket"}, "'s3:bucket' does not parse"),
    ({"--data": "folder:/no/such/dir"}, "'/no/such/dir' does not exist"),
    ({"--model": "/no/such/model"}, "'/no/such/model' does not exist"),
])
def test_bad_arguments_name_the_value_and_write_nothing(tiny_model_dir, text_folder, tmp_path, capsys, change, named):
    out = tmp_path / "bad"
    argv = _args(tiny_model_dir, text_folder, out, "flt", 2)
    for flag, value in change.items():
        argv[argv.index(flag) + 1] = value
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert named in err and "allowed" in err
    assert not out.exists()


def test_profile_fields_are_overridden_by_section_field_value(tiny_model_dir, text_folder, tmp_path):
    argv = [*_args(tiny_model_dir, text_folder, tmp_path / "o", "cdt", 2), "cdt.beta=3", "extend.warmup_steps=1"]
    argv.insert(3, "selfdistill.bf16=false")  # before the options too
    p = run_profile(parse(build_parser(), argv))
    assert (p.cdt.beta, p.extend.warmup_steps, p.selfdistill.bf16) == (3.0, 1, False)
    assert (p.extend.steps, p.extend.target_window) == (2, 128)  # the flags still apply
    spec = arm_spec(p, "cdt")
    assert spec.cache_fields["cd"]["beta"] == 3.0 and spec.train.warmup_steps == 1 and spec.train.bf16 is False
    assert main(argv) == 0
    assert json.loads((tmp_path / "o" / "run.json").read_text())["train_config"]["warmup_steps"] == 1
    # a field tied to the run's size moves along with it unless named: LongCE's window at most the base window
    small = run_profile(parse(build_parser(), [*argv, "--base-window", "64"]))
    assert small.selfdistill.longce_window <= 64
    named = run_profile(parse(build_parser(), [*argv, "selfdistill.eval_lengths=64,128"]))
    assert named.selfdistill.eval_lengths == (64, 128)


@pytest.mark.parametrize("override,named", [
    ("cdtx.beta=3", "unknown profile section 'cdtx' in 'cdtx.beta=3'; allowed: corpus, tokenizer"),
    ("cdt.betx=3", "unknown field 'betx' of section 'cdt' in 'cdt.betx=3'; allowed: beta, threshold"),
    ("cdt.beta=abc", "cdt.beta='abc' is not a number; allowed: a number"),
    ("extend.steps=2.5", "extend.steps='2.5' is not an integer; allowed: an integer"),
    ("cdt.beta=-1", "cdt.beta=-1.0, cdt.threshold='document'; allowed: a finite beta >= 0"),
    ("cdt.threshold=page", "cdt.threshold='page'; allowed: a finite beta >= 0, threshold document or row"),
    ("selfdistill.bf16=maybe", "selfdistill.bf16='maybe' is not a bool; allowed: true"),
    ("extend.target_window=64", "extend.target_window is set by --target; allowed: that flag"),
    ("cdt", "profile override 'cdt' does not parse; allowed: section.field=value"),
])
def test_bad_overrides_are_one_error_line_and_write_nothing(tiny_model_dir, text_folder, tmp_path, capsys, override,
                                                            named):
    out = tmp_path / "bad"
    assert main([*_args(tiny_model_dir, text_folder, out, "cdt", 2), override]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and named in err[0], err
    assert not out.exists()


@pytest.fixture(scope="module")
def base_100k(tmp_path_factory, small_tokenizer):
    """A 1-layer random Llama whose own RoPE base is 100,000 (as SmolLM2's)."""
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2,
                      rope_theta=100_000.0)
    path = tmp_path_factory.mktemp("rope") / "m"
    tok = small_tokenizer
    build_tiny(cfg, len(tok), 2048, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.mark.parametrize("method", ["cdt", "selfdistill", "prolong"])
def test_own_model_keeps_its_rope_base_without_rope_flags(base_100k, text_folder, tmp_path, capsys, method):
    out = tmp_path / method
    assert main(_args(base_100k, text_folder, out, method, 1)) == 0
    assert model_rope(out / "final")["rope_theta"] == 100_000.0  # not the profile's 40,000 nor an NTK value
    assert "note:" not in capsys.readouterr().err


def test_rope_theta_sets_the_base_with_one_note(base_100k, text_folder, tmp_path, capsys):
    out = tmp_path / "cdt"
    assert main(_args(base_100k, text_folder, out, "cdt", 1, "--rope-theta", "64000")) == 0
    assert model_rope(out / "final")["rope_theta"] == 64_000.0
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note:")]
    assert notes == ["note: RoPE changed from the model's default rope_theta=100000 to default rope_theta=64000 "
                     "(--rope-theta)"]


def test_a_profile_rope_scaling_stays_on_the_models_own_base():
    own = {"rope_type": "default", "rope_theta": 100_000.0}
    dynamic = {"rope_type": "dynamic", "rope_theta": 500_000.0, "factor": 4.0}
    rope, note = run_rope(dynamic, own, None)
    assert rope == {**dynamic, "rope_theta": 100_000.0} and "dynamic rope_theta=100000 factor=4" in note
    assert run_rope({"rope_type": "default", "rope_theta": 40_000.0}, own, None) == (None, None)
    assert run_rope(None, own, 100_000.0) == (None, None)  # the model's own base asked for: nothing changes


@pytest.mark.parametrize("method", ["cdt", "selfdistill", "longce"])
def test_dtype_governs_the_methods_autocast(tiny_model_dir, text_folder, tmp_path, method):
    def parts(dtype):
        argv = _args(tiny_model_dir, text_folder, tmp_path / dtype, method, 1, "--dtype", dtype, "--device", "cpu")
        argv[argv.index("smoke")] = "tiny"  # tiny's selfdistill.bf16 is on
        return build_parts(build_parser().parse_args(argv))

    f32, bf16, auto = parts("float32"), parts("bfloat16"), parts("auto")
    assert f32.method.bf16 is False and f32.cfg.bf16 is False
    assert bf16.method.bf16 is True and bf16.cfg.bf16 is True
    assert auto.method.bf16 is True  # auto on the CPU: the profile's setting


def test_longrecipe_needs_anchors(tiny_model_dir, text_folder, tmp_path, capsys):
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "lr", "longrecipe", 1)) == 2
    assert "--anchors" in capsys.readouterr().err
    anchors = tmp_path / "anchors.json"
    anchors.write_text(json.dumps({"anchors": [13, 14, 15]}))
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "lr", "longrecipe", 1, "--anchors", str(anchors))) == 0


def test_lora_trains_adapters_and_saves_the_merged_model(tiny_model_dir, text_folder, tmp_path):
    """``--lora 4``: the final folder holds the merged model and the adapters; the merge changed the attention
    projections (the adapters' targets) and left every other weight bitwise as the base had it."""
    from safetensors.torch import load_file

    out = tmp_path / "lora"
    assert main(_args(tiny_model_dir, text_folder, out, "flt", 3, "--lora", "4")) == 0
    assert (out / "final" / "adapter" / "adapter_model.safetensors").exists()
    base, merged = load_file(tiny_model_dir / "model.safetensors"), load_file(out / "final" / "model.safetensors")
    assert set(base) == set(merged)
    changed = {k for k in base if not torch.equal(base[k], merged[k])}
    assert changed and all(k.split(".")[-2] in ("q_proj", "k_proj", "v_proj", "o_proj") for k in changed)
    assert len(read_jsonl(out / "metrics.jsonl")) == 3


def test_gradient_checkpointing_gives_the_same_losses(tiny_model_dir, text_folder, tmp_path):
    losses = {}
    for name, extra in (("plain", ()), ("ckpt", ("--gradient-checkpointing",))):
        assert main(_args(tiny_model_dir, text_folder, tmp_path / name, "selfdistill", 3, *extra)) == 0
        losses[name] = [r["loss"] for r in read_jsonl(tmp_path / name / "metrics.jsonl")]
    assert losses["ckpt"] == pytest.approx(losses["plain"], rel=1e-5, abs=1e-6)


@pytest.mark.parametrize("extra,named", [
    (("--lora", "-1"), "--lora -1; allowed"),
    (("--lora-alpha", "8"), "need --lora R; allowed"),
    (("--lora", "4", "--lora-targets", "c_attn"), "['c_attn'] match no module"),
    (("--deepspeed", "/no/such.json"), "--deepspeed '/no/such.json' does not exist; allowed"),
    (("--lora", "4", "--deepspeed", "configs/deepspeed_zero3_cpu.json"), "(ZeRO stage 3); allowed"),
])
def test_bad_engine_and_adapter_arguments(tiny_model_dir, text_folder, tmp_path, capsys, extra, named):
    extra = tuple(str(REPO / e) if e.startswith("configs/") else e for e in extra)
    out = tmp_path / "bad"
    assert main(_args(tiny_model_dir, text_folder, out, "flt", 1, *extra)) == 2
    assert named in capsys.readouterr().err
    assert not (out / "final").exists() and not (out / "metrics.jsonl").exists()


@pytest.mark.slow
def test_two_processes_under_accelerate_launch_with_deepspeed_match_one(tiny_model_dir, text_folder, tmp_path):
    """``accelerate launch`` (2 CPU processes, gloo) with DeepSpeed ZeRO-3: every step's logged loss equals the
    single-process run's on the same global batch (fp32 tolerance); rank 0 wrote the final model."""
    two = tmp_path / "two"
    launcher = Path(sys.executable).with_name("accelerate")
    proc = subprocess.run([str(launcher), "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1",
                           "--mixed_precision", "no", "--dynamo_backend", "no", "-m", "repro",
                           *_args(tiny_model_dir, text_folder, two, "pose", 3),
                           "--deepspeed", str(REPO / "configs" / "deepspeed_zero3_cpu.json")],
                          cwd=REPO, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "PYTHONPATH": str(REPO)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "on 2 process(es)" in proc.stdout
    assert json.loads((two / "final" / "train_summary.json").read_text())["world_size"] == 2
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "one_pose", "pose", 3)) == 0
    got = [r["loss"] for r in read_jsonl(two / "metrics.jsonl")]
    want = [r["loss"] for r in read_jsonl(tmp_path / "one_pose" / "metrics.jsonl")]
    assert len(got) == 3 and got == pytest.approx(want, rel=1e-5)


def test_rerunning_the_command_resumes_a_killed_run(tiny_model_dir, text_folder, tmp_path, capsys):
    """The same command re-run on the folder of a run killed mid-way resumes it: from its last checkpoint (the
    final weights equal an uninterrupted run's), or, killed after ``final/`` but before the tokenizer, by saving
    the tokenizer alone; a finished folder is refused."""
    import shutil

    from safetensors.torch import load_file

    whole, cut = tmp_path / "whole", tmp_path / "cut"
    assert main(_args(tiny_model_dir, text_folder, whole, "pose", 4, "--checkpoint-every", "2")) == 0
    assert main(_args(tiny_model_dir, text_folder, cut, "pose", 4, "--checkpoint-every", "2")) == 0
    shutil.rmtree(cut / "final")  # as if killed in step 4 after its checkpoint at step 2
    shutil.rmtree(cut / "ckpt-4")
    assert main(_args(tiny_model_dir, text_folder, cut, "pose", 4, "--checkpoint-every", "2")) == 0
    a, b = load_file(whole / "final" / "model.safetensors"), load_file(cut / "final" / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)
    for f in ("tokenizer.json", "tokenizer_config.json"):  # as if killed between the final weights and the tokenizer
        (cut / "final" / f).unlink()
    capsys.readouterr()
    assert main(_args(tiny_model_dir, text_folder, cut, "pose", 4, "--checkpoint-every", "2")) == 0
    assert "tokenizer was missing" in capsys.readouterr().out
    assert (cut / "final" / "tokenizer.json").exists() and (cut / "final" / "tokenizer_config.json").exists()
    assert not list(cut.glob(".tokenizer.*"))
    assert main(_args(tiny_model_dir, text_folder, cut, "pose", 4, "--checkpoint-every", "2")) == 2
    assert "already holds a finished run" in capsys.readouterr().err


def test_code_shipped_with_a_model_runs_only_with_trust_remote_code(tiny_model_dir, text_folder, tmp_path, capsys):
    """A model folder whose config.json maps to its own modeling file: refused by default (the file is never
    imported), trained with ``--trust-remote-code``."""
    import shutil

    from tests.test_families import ship_model_code

    model = tmp_path / "shipped"
    shutil.copytree(tiny_model_dir, model)
    marker = tmp_path / "imported"
    ship_model_code(model, marker)
    assert main(_args(model, text_folder, tmp_path / "no", "flt", 1)) == 2
    err = capsys.readouterr().err
    assert "ships its own model code" in err and "allowed: --trust-remote-code" in err and not marker.exists()
    assert main(_args(model, text_folder, tmp_path / "yes", "flt", 1, "--trust-remote-code")) == 0
    assert marker.exists() and len(read_jsonl(tmp_path / "yes" / "metrics.jsonl")) == 1


def test_weights_not_float32_on_disk_get_a_one_line_notice(tmp_path):
    from repro.cli.train_checks import upcast_note

    for dtype, said in (("bfloat16", True), ("float16", True), ("float32", False), (None, False)):
        fields = {"model_type": "llama", **({"dtype": dtype} if dtype else {})}
        (tmp_path / "config.json").write_text(json.dumps(fields))
        note = upcast_note(tmp_path)
        assert (note is not None) == said
        if said:
            assert note == (f"--model's weights are {dtype} on disk; they train and are saved as float32 (weights and "
                            "optimizer states; --dtype sets only the autocast)")
