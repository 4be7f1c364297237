"""The throughput benchmark's arms: our trainer's own optimizer, HF Trainer driven step by step so that its steps
interleave with ours, and ``bench --model``'s comparison at equal precision."""

import time

import pytest
import torch

from repro.__main__ import main
from repro.bench.throughput import (TRAIN_ARMS, BenchConfig, _Arm, _HFArm, _batch, hf_arm_name, throughput_summary,
                                     time_train_arms)


def test_our_arms_use_the_trainers_default_adamw_and_v1_the_for_loop(tiny_llama):
    m = tiny_llama()
    assert _Arm(m, TRAIN_ARMS["fp32, chunked loss"]).opt.defaults["fused"] is True
    v1 = _Arm(m, TRAIN_ARMS["v1 (fp32, full logits)"]).opt.defaults
    assert (v1["fused"], v1["foreach"]) == (None, None)


def test_hf_trainer_runs_one_step_per_call_and_waits_in_between(tiny_llama, tmp_path):
    m = tiny_llama()
    arm = _HFArm(m, _batch(64, 16, 2), False, 3, str(tmp_path))
    state = arm._trainer.state
    start = {k: v.detach().clone() for k, v in arm._trainer.model.state_dict().items()}
    assert state.global_step == 0
    for done in (1, 2):
        assert arm.step() > 0
        time.sleep(0.3)  # the thread is parked at the next step's start: nothing more happens meanwhile
        assert state.global_step == done
    assert arm.step() > 0 and state.global_step == 3 and not arm._thread.is_alive()
    q = "model.layers.0.self_attn.q_proj.weight"
    assert not torch.equal(arm._trainer.model.state_dict()[q], start[q])  # HF's optimizer stepped
    with pytest.raises(RuntimeError, match="more steps than it was built for"):
        arm.step()

    stopped = _HFArm(m, _batch(64, 16, 2), True, 5, str(tmp_path / "b"))
    stopped.step()
    stopped.close()  # mid-run: its thread ends at the next step's start
    assert not stopped._thread.is_alive() and stopped._trainer.state.global_step == 1


def test_time_train_arms_interleaves_ours_and_hf_rounds(tiny_llama, tmp_path):
    cfg = BenchConfig(steps=4, rounds=2, warmup=1)
    times, warm = time_train_arms(tiny_llama(), 64, 16, 2, cfg, {"ours": TRAIN_ARMS["fp32, chunked loss"]},
                                  (False,), str(tmp_path))
    assert list(times) == ["ours", hf_arm_name(False)] and list(warm) == list(times)
    assert all(len(v) == 4 and min(v) > 0 for v in times.values())  # 2 rounds x 2 timed steps each


def test_bench_model_prints_ours_against_hf_trainer_at_each_precision(tiny_model_dir, capsys):
    assert main(["bench", "--model", str(tiny_model_dir), "--tokens", "32", "--rows", "2", "--quick"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"bench {tiny_model_dir}: our trainer's step vs HF Trainer's, 2 rows x 32 tokens")
    lines = [ln for ln in out if "HF Trainer's speed" in ln]
    assert [ln.split(":")[0] for ln in lines] == ["fp32", "bf16 autocast"]
    for ln in lines:
        ours, hf, speed = (float(ln.split(w)[1].split()[0].rstrip("x")) for w in ("ours ", "HF Trainer ", "at "))
        assert ours > 0 and hf > 0 and speed == pytest.approx(hf / ours, abs=0.006)  # one step: their ratio


@pytest.mark.parametrize("argv, message", [
    (["--tokens", "1"], "error: --tokens 1; allowed: an integer >= 2"),
    (["--rows", "0"], "error: --rows 0; allowed: an integer >= 1"),
    (["--tokens", "100000"], "error: --tokens 100000; allowed: at most the model's max_position_embeddings"),
])
def test_bench_model_refuses_bad_values_in_one_line(tiny_model_dir, capsys, argv, message):
    assert main(["bench", "--model", str(tiny_model_dir), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(message)


def test_bench_model_refuses_a_missing_folder(tmp_path, capsys):
    assert main(["bench", "--model", str(tmp_path / "nope")]) == 2
    assert capsys.readouterr().err.startswith(f"error: --model '{tmp_path / 'nope'}' does not exist")


def test_throughput_summary_gives_the_best_setting_per_shape_against_v1_and_hf():
    rows = [{"section": "ceiling", "setting": "fp32 matmul 2048^2", "GFLOP/s": 190.0},
            {"section": "train 256 x 16", "setting": "v1 (fp32, full logits)", "tokens/s": 12850, "vs v1": 1,
             "vs HF Trainer (same precision)": 0.86},
            {"section": "train 256 x 16", "setting": "bf16, chunked loss", "tokens/s": 19038, "vs v1": 1.48,
             "vs HF Trainer (same precision)": 0.99},
            {"section": "train 256 x 16", "setting": "HF Trainer (bf16)", "tokens/s": 19250, "vs v1": 1.5,
             "vs HF Trainer (same precision)": 1},
            {"section": "train 256 x 16", "setting": "bf16, chunked: 2 processes x 1 thread (sum)",
             "tokens/s": 23885, "vs v1": 1.86},  # no HF column: not a setting of one process
            {"section": "generate 32 x 256 + 16", "setting": "ours (repro.generate)", "vs HF generate": 1.03},
            {"section": "generate 32 x 256 + 16", "setting": "HF generate", "vs HF generate": 1}]
    assert throughput_summary(rows) == ("train 256 x 16: bf16, chunked loss 19038 tok/s, 1.48x v1, 0.99x HF Trainer; "
                                        "generate 32 x 256 + 16: 1.03x HF generate")
