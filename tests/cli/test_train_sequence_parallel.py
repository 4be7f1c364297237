"""``python -m repro train --sequence-parallel 2`` on two gloo processes, every method, against one process: the
same metrics and final weights after 2 steps (float32: to rounding), also PoSE and LongRecipe at a target whose rows
are an odd number of tokens (padded at their end to shard, :func:`repro.parallel.rows.decoder_hidden`), and the
refusals of impossible splits (heads that do not divide: from config.json, before the model loads).

The DDP runs of the eight methods share one launch of the two processes (``tests/cli/train_many.py``: the same
``train`` command lines through :func:`repro.__main__.main`, one after the other), since start-up is most of a tiny
run's time; the ZeRO-3 and LoRA cases launch ``python -m repro train`` itself."""

import json

import numpy as np
import pytest
from safetensors.numpy import load_file

from repro.__main__ import main
from repro.io import read_jsonl
from repro.pipeline import REPO
from tests.launch import launch

METHODS = ("flt", "pose", "rpes", "longrecipe", "selfdistill", "longce", "cdt", "prolong")
ODD = {"pose@130": "pose", "longrecipe@130": "longrecipe"}
"""Cases at ``--target 130``: the smoke profile's rows are then ``round(0.5 x 130) = 65`` tokens, not a multiple
of 2."""
CASES = {**{m: m for m in METHODS}, **ODD}
"""Case name -> method (``name@T``: at ``--target T``, else 128)."""


def _target(case: str) -> str:
    return case.partition("@")[2] or "128"


def _args(model, data, out, method, anchors, *extra, target: str = "128"):
    return ["train", "--model", str(model), "--method", method, "--target", target, "--data", f"folder:{data}",
            "--steps", "2", "--batch-size", "2", "--lr", "3e-3", "--out", str(out), "--profile", "smoke",
            "--no-progress", *(["--anchors", str(anchors)] if method == "longrecipe" else []), *extra]


@pytest.fixture(scope="module")
def anchors(tmp_path_factory):
    path = tmp_path_factory.mktemp("anchors") / "anchors.json"
    path.write_text(json.dumps({"anchors": [13, 14, 15]}))
    return path


ZERO3_CPU = REPO / "configs" / "deepspeed_zero3_cpu.json"
ENGINES = {"ddp": [], "zero3": ["--deepspeed", str(ZERO3_CPU)], "lora+checkpointing": ["--lora", "4",
                                                                                      "--gradient-checkpointing"]}
"""Extra ``train`` flags of each way of training (both runs of a case get the LoRA and checkpointing flags)."""


@pytest.fixture(scope="module")
def ddp_runs(tiny_model_dir, text_folder, tmp_path_factory, anchors):
    """Every method's two-process DDP run (one launch for all): ``(folder of method -> run, log text)``."""
    root = tmp_path_factory.mktemp("sp_ddp")
    runs = {c: root / c for c in CASES}
    spec = root / "spec.json"
    spec.write_text(json.dumps({"codes": str(root), "runs": [
        _args(tiny_model_dir, text_folder, out, CASES[c], anchors, "--sequence-parallel", "2", target=_target(c))
        for c, out in runs.items()]}))
    with open(root / "log.txt", "w") as log:
        codes = launch([str(spec)], 2, log, module="tests.cli.train_many")
    log_text = (root / "log.txt").read_text()
    assert codes == [0, 0], log_text[-4000:]
    assert [json.loads((root / f"rank{r}.json").read_text()) for r in (0, 1)] == [[0] * len(CASES)] * 2
    return runs, log_text


@pytest.mark.slow
@pytest.mark.parametrize("case,engine", [(c, "ddp") for c in CASES] + [("cdt", "zero3"),
                                                                        ("selfdistill", "lora+checkpointing")])
def test_train_sequence_parallel_2_matches_one_process(tiny_model_dir, text_folder, tmp_path, anchors, case,
                                                       engine, request):
    one, two = tmp_path / "one", tmp_path / "two"
    method, target = CASES[case], _target(case)
    both = ENGINES[engine] if engine.startswith("lora") else []
    assert main(_args(tiny_model_dir, text_folder, one, method, anchors, *both, target=target)) == 0
    if engine == "ddp":
        two = request.getfixturevalue("ddp_runs")[0][case]
    else:
        extra = ["--sequence-parallel", "2", *ENGINES[engine]]
        with open(tmp_path / "log.txt", "w") as log:
            codes = launch(_args(tiny_model_dir, text_folder, two, method, anchors, *extra), 2, log)
        assert codes == [0, 0], (tmp_path / "log.txt").read_text()[-4000:]
    a, b = read_jsonl(one / "metrics.jsonl"), read_jsonl(two / "metrics.jsonl")
    assert [r["step"] for r in b] == [0, 1]
    row = b[0]["tokens"] // 2  # 2 rows a step
    assert row % 2 == (case in ODD)  # the odd cases' rows do not cut in two: they ran padded
    for ra, rb in zip(a, b):
        assert rb["loss"] == pytest.approx(ra["loss"], rel=1e-5)
        assert rb["grad_norm"] == pytest.approx(ra["grad_norm"], rel=1e-3)
    wa, wb = load_file(one / "final" / "model.safetensors"), load_file(two / "final" / "model.safetensors")
    assert set(wa) == set(wb) and "lm_head.weight" not in wb  # the tied head saved once, as by one process
    w0 = load_file(tiny_model_dir / "model.safetensors")
    da = np.concatenate([(wa[k] - w0[k]).ravel() for k in wa]).astype(np.float64)
    db = np.concatenate([(wb[k] - w0[k]).ravel() for k in wa]).astype(np.float64)
    # Not element by element: Adam's first steps move each weight by about lr * g / |g|, so an entry whose gradient
    # is near zero turns a last-bit difference of the two reductions into a visible one (3.5e-5 on one CPU, 0 on
    # another). The updates as a whole agree to rounding on any CPU; the step-0 gradients are compared above.
    assert np.abs(da).max() > 1e-3  # trained
    assert np.linalg.norm(da - db) < 1e-3 * np.linalg.norm(da)
    run = json.loads((two / "run.json").read_text())
    assert run["world_size"] == 2 and run["train_config"]["sequence_parallel"] == 2


def test_sequence_parallel_needs_a_multiple_of_its_processes(tiny_model_dir, text_folder, tmp_path, anchors,
                                                             capsys):
    out = tmp_path / "bad"
    assert main(_args(tiny_model_dir, text_folder, out, "flt", anchors, "--sequence-parallel", "2")) == 2
    err = capsys.readouterr().err
    assert "--sequence-parallel 2 needs a multiple of 2 processes, got 1" in err and "torchrun" in err
    assert not out.exists()


@pytest.fixture(scope="module")
def three_heads(tmp_path_factory, small_tokenizer):
    """A 1-layer random Llama of 3 attention heads and 1 key/value head (hidden 48), saved with the tokenizer."""
    from repro.models import build_tiny
    from repro.profiles import ModelConfig

    path = tmp_path_factory.mktemp("heads") / "three"
    tok = small_tokenizer
    cfg = ModelConfig(hidden_size=48, intermediate_size=64, num_layers=1, num_heads=3, num_kv_heads=1)
    build_tiny(cfg, len(tok), 2048, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path


def test_heads_that_do_not_split_are_refused_before_loading_by_rank_0_alone(three_heads, text_folder, tmp_path,
                                                                            anchors):
    """Two launched processes, --sequence-parallel 2 on 3 heads: one error line (rank 0's) naming the head counts
    and the degrees that work, no traceback, both ranks exit 2, and no --out; read from config.json alone (the
    weights are removed: loading them would fail otherwise)."""
    model = tmp_path / "config_only"
    model.mkdir()
    for f in three_heads.iterdir():
        if f.name != "model.safetensors":
            (model / f.name).write_bytes(f.read_bytes())
    out = tmp_path / "out"
    with open(tmp_path / "log.txt", "w") as log:
        codes = launch(_args(model, text_folder, out, "pose", anchors, "--sequence-parallel", "2"), 2, log)
    text = (tmp_path / "log.txt").read_text()
    errors = [ln for ln in text.splitlines() if ln.startswith("error:")]
    assert codes == [2, 2], text[-3000:]
    assert len(errors) == 1 and "Traceback" not in text, text[-3000:]
    assert "--sequence-parallel 2 does not divide the model's 3 attention heads (1 key/value heads)" in errors[0]
    assert "allowed: --sequence-parallel 3 (a divisor of 3)" in errors[0]
    assert not out.exists()


def test_head_refusal_is_printed_by_rank_0_only(tiny_model_dir, text_folder, tmp_path, anchors, capsys, monkeypatch):
    """In-process, as each rank of a 4-process launch meets it: 2 heads, --sequence-parallel 4 (4 processes would
    suit the process count); rank 0 prints the line, rank 1 exits with the same code silently."""
    monkeypatch.setenv("WORLD_SIZE", "4")
    out = tmp_path / "bad"
    got = {}
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        assert main(_args(tiny_model_dir, text_folder, out, "flt", anchors, "--sequence-parallel", "4")) == 2
        got[rank] = capsys.readouterr().err
    assert got["1"] == "" and got["0"].count("error:") == 1
    assert "4 does not divide the model's 2 attention heads (2 key/value heads)" in got["0"]
    assert "allowed: --sequence-parallel 2 (a divisor of 2)" in got["0"]
    assert not out.exists()
