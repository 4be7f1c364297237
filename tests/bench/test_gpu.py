"""``python -m repro bench gpu``: the quick run writes every table with every row, the FLOP count by hand, the arms
device-clean under the guard, failures and the budget as rows, and (on a GPU) one 1B step at 8K."""

import csv
import math
from dataclasses import replace

import numpy as np
import pytest
import torch

from repro.__main__ import main
from repro.bench import gpu
from repro.bench.gpu_arms import Arm, method_arms, plain_batch
from repro.bench.gpu_parts import IG_METHODS, Budget, GENERATORS
from repro.bench.gpu_shapes import (FLOP_FORMULA, LLAMA_1B, LLAMA_8B, QUICK_SHAPES, Shape, build_model,
                                    datasheet_peak, matmul_params, train_flops)
from repro.methods.cdt import CDTSpec
from repro.methods.longce import LongCEConfig

CUDA = torch.cuda.is_available()
ARMS = ("Standard", "self-distillation, skip, prefix-shared", "self-distillation, skip, two full passes", "LongCE",
        "CDT", "PoSE positions", "LongRecipe positions", "ProLong rows, dense mask (sdpa)",
        "ProLong rows, sdpa_varlen", "ProLong rows, flash varlen", "ProLong rows, flex")


def _rows(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_quick_run_writes_every_table_with_every_row(tmp_path):
    # no wall-clock bound: on a shared machine one fails for the load, not the code (every row "ok": within budget)
    assert main(["bench", "gpu", "--quick", "--figures-dir", str(tmp_path)]) == 0
    tp = _rows(tmp_path / "GPU-Throughput.csv")
    assert [(r["model"], int(r["tokens/row"])) for r in tp] == [(s.name, T) for s in QUICK_SHAPES for T in s.lengths]
    for r in tp:
        assert r["status"] == "ok" and float(r["tokens/s"]) > 0 and r["FLOP formula"] == "6·N·T + 6·L·d·T²"
        assert 0 < float(r["MFU (measured matmul)"]) <= 1  # the CPU has no datasheet peak: that MFU is blank
        assert r["MFU (datasheet peak)"] == "" and r["datasheet TFLOP/s"] == "unknown"
    md = (tmp_path / "GPU-Throughput.md").read_text()
    assert FLOP_FORMULA in md and f"torch {torch.__version__}" in md and "CUDA" in md

    methods = _rows(tmp_path / "GPU-Methods.csv")
    blocks = [(s.name, T) for s in QUICK_SHAPES for T in s.method_lengths]
    assert [(r["model"], int(r["tokens/row"]), r["arm"]) for r in methods] == [(m, T, a) for m, T in blocks
                                                                               for a in ARMS]
    for r in methods:
        if r["arm"] in ("ProLong rows, flash varlen", "ProLong rows, flex") and not CUDA:
            assert r["status"].startswith("skipped:") and r["vs Standard"] == ""
            continue
        assert r["status"] == "ok", r
        ratio = float(r["vs Standard"])
        assert math.isfinite(ratio) and ratio > 0
    assert {float(r["vs Standard"]) for r in methods if r["arm"] == "Standard"} == {1.0}

    ig = _rows(tmp_path / "GPU-IG.csv")
    assert [(int(r["length"]), r["method"]) for r in ig] == [(n, m) for n in (64, 128, 256, 512) for m in IG_METHODS]
    assert all(r["status"] == "ok" and float(r["peak MiB"]) > 0 and float(r["seconds"]) > 0 for r in ig)
    gen = _rows(tmp_path / "GPU-Generation.csv")
    assert [r["generator"] for r in gen] == list(GENERATORS)
    assert all(r["status"] == "ok" and float(r["generated tokens/s"]) > 0 and r["same tokens"] == "yes" for r in gen)
    index = (tmp_path / "INDEX.md").read_text()
    assert "TB-GPU" in index and "GPU-Methods.csv" in index and "gpu-quick" in index


def test_flop_count_against_a_hand_count():
    s = Shape("hand", hidden=8, layers=2, heads=2, kv_heads=1, intermediate=16, vocab=10, tied=True, lengths=(4,),
              method_lengths=(), checkpoint_from=None)
    # per layer: q, o 2*8*8 = 128; k, v 2*8*4 = 64 (one kv head of dim 4); gate, up, down 3*8*16 = 384; 2 norms 16
    # = 592; 2 layers 1184; final norm 8; the (tied) head 10*8 = 80: 1272
    assert matmul_params(s) == 1272
    # 6 * 1272 * 4 = 30528, attention 6 * 2 layers * (2 heads * 4) * 4^2 = 1536
    assert train_flops(s, 4) == 32064 and train_flops(s, 4, rows=3) == 3 * 32064
    from repro.models import n_params

    assert n_params(build_model(s, torch.device("cpu"), torch.float32)) == 1272
    untied = replace(s, tied=False)  # the input table is a lookup: not in N, but in the model
    assert matmul_params(untied) == 1272 and n_params(build_model(untied, torch.device("cpu"), torch.float32)) == 1352
    assert matmul_params(LLAMA_1B) == 1_235_814_400  # Llama-3.2-1B's parameter count (tied)
    assert matmul_params(LLAMA_8B) + 128_256 * 4096 == 8_030_261_248  # Llama-3-8B's
    assert datasheet_peak("NVIDIA H100 80GB HBM3") == 989 and datasheet_peak("NVIDIA H200") == 989
    assert datasheet_peak("NVIDIA A100-SXM4-80GB") == 312 and datasheet_peak("NVIDIA H100 PCIe") == 756
    assert datasheet_peak("Tesla T4") is None


def _tiny(shape=QUICK_SHAPES[0]):
    return build_model(shape, torch.device("cpu"), torch.float32)


def test_every_arm_runs_device_clean_under_the_guard():
    from repro.devices import DeviceGuard

    model = _tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    arms = method_arms(128, 512, torch.device("cpu"), False, 1e-5, LongCEConfig(window=32, stride=8), CDTSpec(),
                       False, np.random.default_rng(0))
    cfg = replace(gpu.QUICK, warmup=0, rounds=1)
    with DeviceGuard(model) as guard:
        res = gpu.run_block(model, opt, arms, cfg, torch.device("cpu"), Budget(600))
    assert guard.checked > 0
    assert {n: r["status"] for n, r in res.items() if arms[n].skip is None} == \
        {n: "ok" for n, a in arms.items() if a.skip is None}
    ids = torch.as_tensor(np.arange(3, 131)[None], device="cpu")
    planted = Arm("Standard", "all", lambda g: {**plain_batch(ids), "position_ids": torch.arange(128)[None]},
                  arms["Standard"].loss)
    with DeviceGuard(model):  # position ids made without device=: what fails on a GPU, caught here as a row
        res = gpu.run_block(model, opt, {"Standard": planted}, cfg, torch.device("cpu"), Budget(600))
    assert res["Standard"]["status"].startswith("error: DeviceMismatch")


def test_a_failing_arm_is_a_row_and_the_budget_skips_and_lists():
    model = _tiny()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    ids = torch.randint(3, 512, (1, 64))
    from repro.train import clm_step

    def oom(model, batch, step):
        raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 80.00 GiB")

    arms = {"Standard": Arm("Standard", "all", lambda g: plain_batch(ids), lambda m, b, s: clm_step(m, b, False)[0]),
            "broken": Arm("broken", "none", lambda g: plain_batch(ids), oom)}
    res = gpu.run_block(model, opt, arms, replace(gpu.QUICK, warmup=1, rounds=2), torch.device("cpu"), Budget(600))
    assert len(res["Standard"]["seconds"]) == 2 and res["Standard"]["status"] == "ok"
    assert res["broken"]["status"].startswith("out of memory: CUDA out of memory") and not res["broken"]["seconds"]
    spent = Budget(0)
    res = gpu.run_block(model, opt, arms, gpu.QUICK, torch.device("cpu"), spent)
    assert res["Standard"]["status"].startswith("skipped (budget") and spent.skipped == ["steps: Standard",
                                                                                         "steps: broken"]
    tables, meta = gpu.run(replace(gpu.QUICK, shapes=QUICK_SHAPES[1:], budget_s=1e-9), torch.device("cpu"),
                           log=lambda *a: None, progress=False)
    assert [r["status"] for r in tables["throughput"]] == ["skipped (budget: spent)"] * 2
    assert meta["skipped"] == [f"{QUICK_SHAPES[1].name} {T}" for T in QUICK_SHAPES[1].lengths]


def test_help_names_the_shapes_and_bench_keeps_its_behaviour(capsys, monkeypatch):
    assert main(["bench", "gpu", "--help"]) == 0
    out = capsys.readouterr().out
    assert "Llama-3.2-1B" in out and "Llama-3-8B" in out and "--budget-s" in out and "figures/gpu" in out
    assert "--quick" in out and "128K" in out
    import repro.bench.cli

    seen = []
    monkeypatch.setattr(repro.bench.cli, "bench_main", lambda *a: seen.append(a) or 0)
    assert main(["bench", "--quick", "--figures-dir", "somewhere"]) == 0
    assert seen == [("tiny", "somewhere", True)]
    if not CUDA:
        assert main(["bench", "gpu"]) == 2
        assert "needs a CUDA GPU" in capsys.readouterr().err
    assert main(["bench", "gpu", "--quick", "--budget-s", "0"]) == 2


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_one_1b_step_at_8k_on_the_gpu():
    dev = torch.device("cuda")
    model = build_model(LLAMA_1B, dev, torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, fused=True)
    arms = method_arms(8192, LLAMA_1B.vocab, dev, True, 1e-5, LongCEConfig(), CDTSpec(beta=5.0), False,
                       np.random.default_rng(0))
    res = gpu.run_block(model, opt, {"Standard": arms["Standard"]}, replace(gpu.FULL, warmup=1, standard_steps=1),
                        dev, Budget(600))
    row = gpu._throughput_row(LLAMA_1B, 8192, res["Standard"], torch.bfloat16,
                              datasheet_peak(torch.cuda.get_device_name(dev)))
    assert row["status"] == "ok" and row["tokens/s"] > 0
    assert row["MFU (datasheet peak)"] == "" or 0 < row["MFU (datasheet peak)"] <= 1
