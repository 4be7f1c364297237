"""LongRecipe end to end in the smoke profile: arms, analysis, replay, merging, short-window loss, LR grid."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro import stages
from repro.io import read_json
from repro.stages.keys import arm_fields
from repro.methods import EXTENSION_METHODS, ExtensionSpec, extension_spec, ratio_arm
from repro.models import load_model
from repro.profiles import get_profile
from repro.train import clm_step

P = get_profile("smoke")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    rd = tmp_path_factory.mktemp("lr")
    torch.set_num_threads(1)
    for arm in ("flt", "longrecipe"):
        stages.train_extension(P, arm, rd, progress=False)
    return rd


def _weights(path):
    return load_file(str(path / "model.safetensors"))


def test_arm_names_and_ratios():
    assert {"flt", "pose", "rpes", "longrecipe", "longrecipe_wo_t", "longrecipe_random_t"} <= set(EXTENSION_METHODS)
    spec = extension_spec("longrecipe_r10")
    assert spec.selection == "anchors" and spec.resolve_len(1024, 0.3) == 102
    assert extension_spec("pose").resolve_len(1024, 0.3) == 307 and extension_spec("flt").resolve_len(1024, 0.3) == 1024
    assert ratio_arm(0.3, 0.3) == "longrecipe" and ratio_arm(0.4, 0.3) == "longrecipe_r40"
    with pytest.raises(ValueError, match="unknown extension method 'longrecipe_r0'"):
        extension_spec("longrecipe_r0")
    assert ExtensionSpec("x", sample_len=50).resolve_len(1024, 0.3) == 50
    tiny = get_profile("tiny")
    assert stages.extension_arms(tiny, "longrecipe")[-7:] == (
        "longrecipe_r10", "longrecipe_r20", "longrecipe_r40", "flt@seed1", "flt@seed2", "longrecipe@seed1",
        "longrecipe@seed2")


def test_flt_cache_key_is_unchanged_by_the_new_spec_fields():
    # FLT's key hashes only the original spec fields, so extension caches made before the LongRecipe
    # arms existed stay valid (the data stream of FLT did not change)
    key = arm_fields(get_profile("tiny"), "flt")
    assert key == {"transform": "identity", "sample_len": None, "params": {}}
    lr = arm_fields(get_profile("tiny"), "longrecipe")
    assert lr["resolved_len"] == 307 and lr["selection"] == "anchors" and lr["anchors"] == stages.analysis_key(
        get_profile("tiny"))


def test_analysis_is_cached_and_gives_anchors(run):
    info = stages.impactful_tokens(P, run, progress=False)
    res = stages.load_analysis(P, run, progress=False)
    n = P.extend.target_window
    assert res.samples.shape == (P.longrecipe.analysis_texts, n) and res.changes.shape == (len(res.samples), n - 1)
    assert np.array_equal(info["anchors"], res.anchors) and len(res.anchors) > 0
    assert len(res.tags) == len(res.samples) and all(len(t) == n - 1 for t in res.tags)
    # each position keeps max(1, round(0.2 * N)) tokens
    assert (res.selected.sum(0) == max(1, round(P.longrecipe.top_fraction * len(res.samples)))).all()


def test_longrecipe_rows_hold_whole_sentences_within_budget(run):
    from repro.methods import Extension

    corpus = stages.build_corpus(P, run)
    tok = stages.get_tokenizer(P, run)
    anchors = stages.impactful_tokens(P, run, progress=False)["anchors"]
    n = extension_spec("longrecipe").resolve_len(P.extend.target_window, P.longrecipe.sample_ratio)
    m = Extension("longrecipe", extension_spec("longrecipe"), P.extend.target_window, 4, 0.5, tok, corpus.rows(), 0,
                  train_tasks=P.extend.train_tasks, sample_len=n, anchors=anchors)
    for step in range(3):
        b = m.batch(step)
        assert b["input_ids"].shape == (4, n)
        for row, pos, doc, grp in zip(b["input_ids"], b["position_ids"], b["doc_ids"], b["answer_group"]):
            real = doc == 0
            assert (np.diff(pos[real]) > 0).all() and pos[real].max() < P.extend.target_window
            if (grp >= 0).any():  # a retrieval row keeps its answer, right after the question
                text = tok.decode(row[real])
                assert "magic number" in text or "special" in text
    assert m.stats["rows"] == 12 and 0 < m.stats["tokens"] <= 12 * n


def test_replay_resumes_from_the_extension_and_merge_follows_eq8(run):
    ext = stages.checkpoint_path(P, "longrecipe", run)
    replayed = stages.train_replay(P, "longrecipe", run, progress=False)
    info = read_json(replayed.parent / "replay.json")
    assert info["from"] == ext.relative_to(run).as_posix()  # inside the run folder: the same in any copy of it
    assert info["steps"] == stages.replay_steps(P, stages.extension_tokens(ext))
    assert info["lr"] == pytest.approx(P.extend.lr * P.longrecipe.replay_lr_ratio)
    # the first replay step is taken from the extension weights: its logged loss equals the loss of the
    # extension checkpoint on the replay's first batch
    first = stages.metrics(replayed)[0]
    m = stages.replay_method(P, stages.get_tokenizer(P, run), stages.build_corpus(P, run))
    batch = {k: torch.as_tensor(v) for k, v in m.batch(0).items()}
    loss, _ = clm_step(load_model(ext).train(), batch, False)
    assert float(loss.detach()) == pytest.approx(first["loss"], rel=1e-5)
    merged = stages.merge_replayed(P, "longrecipe", run, progress=False)
    wb, wr, wm = _weights(stages.checkpoint_path(P, "base", run)), _weights(replayed), _weights(merged)
    l1, l2 = P.longrecipe.merge_lambdas
    for k in wm:
        assert torch.allclose(wm[k], l1 * wb[k] + l2 * wr[k], atol=1e-6), k
    assert stages.checkpoint_path(P, "longrecipe+merge", run) == merged
    assert {"longrecipe+replay", "longrecipe+merge"} <= set(stages.available_checkpoints(P, run))


def test_short_lm_loss_and_lr_grid(run):
    rec = stages.short_lm_loss(P, "flt", run)
    assert rec["windows"] == P.longrecipe.short_lm_windows and rec["tokens"] == rec["windows"] * (P.base.window - 1)
    assert rec["source"].startswith(("held out", "corpus windows"))
    assert 0 < rec["loss"] < np.log(len(stages.get_tokenizer(P, run))) + 2
    # equal windows: the loss is the mean of the per-window losses (which pair checkpoints in LR-Tab2's test)
    assert len(rec["window_losses"]) == rec["windows"] and np.isclose(np.mean(rec["window_losses"]), rec["loss"])
    suite = stages.run_lr_suite(P, "longrecipe", run, progress=False)
    assert set(suite) == {"ruler", "short", "yarn"}
    assert suite["yarn"]["rope"]["rope_type"] == "yarn"
    assert set(stages.run_lr_suite(P, "base", run, progress=False)) == {"short"}


def test_cost_benchmark_measures_every_arm_in_one_run(run):
    from repro.cost import measure_step_costs
    from repro.reports.longrecipe_analysis import cost_rows

    costs = measure_step_costs(P, ("flt", "pose"), run, steps=2, warmup=1, progress=False)
    assert set(costs) == {"flt", "pose"}
    assert all(len(c["seconds"]) == len(c["data_seconds"]) == 2 for c in costs.values())
    n = P.extend.target_window
    assert costs["flt"]["sample_len"] == n and costs["pose"]["sample_len"] == round(P.longrecipe.sample_ratio * n)
    assert costs["pose"]["tokens_per_step"] <= P.extend.batch_size * costs["pose"]["sample_len"]
    rows = {r["method"]: r for r in cost_rows(costs)}
    assert rows["FLT"]["FLOPs vs FLT"] == 1.0 and 0 < rows["PoSE"]["FLOPs vs FLT"] < 1


def test_general_benchmarks_hook(tmp_path):
    """The paper profile lists the benchmarks; smoke and tiny run none (tests/test_general.py runs the harness)."""
    assert get_profile("paper").longrecipe.general_benchmarks == ("mmlu", "gsm8k", "humaneval")
    assert stages.general_abilities(P, "flt", tmp_path) == {}  # smoke/tiny: stand-ins, no benchmark run
