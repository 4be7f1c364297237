"""Methods: the base curriculum's data and phase logic, and extension by any named transform."""

import math
from dataclasses import replace

import numpy as np
import pytest

from repro.data.corpus import iter_code
from repro.data.synthetic import CorpusRows
from repro.methods import BaseCurriculum, Extension, ExtensionSpec
from repro.models import build_tiny
from repro.positions import TRANSFORM_INFO
from repro.profiles import BaseTrainConfig, ModelConfig
from repro.train import Trainer, TrainConfig

POSITION_TRANSFORMS = sorted(n for n, t in TRANSFORM_INFO.items() if t.kind == "positions")


@pytest.fixture(scope="module")
def corpus_rows(small_tokenizer):
    docs = list(iter_code(max_bytes=60_000))
    ids = [small_tokenizer(d.text).input_ids for d in docs]
    toks = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids])
    return CorpusRows(toks, np.concatenate([[0], np.cumsum([len(i) for i in ids])]))


@pytest.mark.parametrize("name", POSITION_TRANSFORMS)
def test_extension_trains_with_any_named_transform(name, small_tokenizer, corpus_rows, tmp_path):
    target, n = 512, 160
    m = Extension(name, ExtensionSpec(name, n), target, batch_size=3, retrieval_fraction=0.5,
                  tokenizer=small_tokenizer, corpus=corpus_rows, seed=0)
    b = m.batch(0)
    assert b["input_ids"].shape == (3, n)
    pos = b["position_ids"]
    assert pos.min() >= 0 and pos.max() < target
    for p, d in zip(pos, b["doc_ids"]):  # the sample is doc 0; a short sample is followed by padding
        assert (np.diff(p[d == 0]) > 0).all()  # every extension transform preserves order
    assert np.array_equal(m.batch(0)["position_ids"], pos)  # a pure function of the step
    if name not in ("flt", "identity"):
        assert pos.max() >= n  # positions reach beyond the sample length
    model = build_tiny(ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2),
                       len(small_tokenizer), 1024, 0, 1, 2)
    Trainer(model, m, TrainConfig(max_steps=1, lr=1e-3, checkpoint_every=0), tmp_path, progress=False).train()
    assert (tmp_path / "final" / "model.safetensors").exists()


@pytest.mark.parametrize("name", ["pi", "skip", "cyclic"])
def test_extension_refuses_non_position_transforms(name, small_tokenizer, corpus_rows):
    with pytest.raises(ValueError, match=f"position transform '{name}' is of kind"):
        Extension(name, ExtensionSpec(name, 100), 512, 2, 0.5, small_tokenizer, corpus_rows, 0)


def test_sample_longer_than_target_is_refused(small_tokenizer, corpus_rows):
    with pytest.raises(ValueError, match="sample_len=600 exceeds the target window 512"):
        Extension("flt", ExtensionSpec("identity", 600), 512, 2, 0.5, small_tokenizer, corpus_rows, 0)


def test_longrecipe_rows_keep_sentences_contiguous(small_tokenizer, corpus_rows):
    m = Extension("longrecipe", ExtensionSpec("longrecipe", 200), 1024, 4, 0.0, small_tokenizer, corpus_rows, 3)
    b = m.batch(5)
    for row, pos, doc in zip(b["input_ids"], b["position_ids"], b["doc_ids"]):
        pos = pos[doc == 0]
        jumps = np.flatnonzero(np.diff(pos) != 1) + 1
        # every jump lands right after a token containing a sentence delimiter
        for j in jumps:
            assert any(d in small_tokenizer.decode([int(row[j - 1])]) for d in ".!?\n")


def test_base_curriculum_phases(small_tokenizer, corpus_rows):
    cfg = BaseTrainConfig(window=192, retrieval_lengths=(160, 192), copy_rows=4, copy_max_steps=3,
                          min_steps_per_length=2, max_steps_per_length=4, final_steps=2, tokens_per_step=480)
    m = BaseCurriculum(cfg, small_tokenizer, corpus_rows, len(small_tokenizer))
    b = m.batch(0)
    assert b["input_ids"].shape == (4, cfg.copy_row_len)
    for step in range(3):
        m.observe(step, {"loss": 5.0})
    assert m.state["phase"] == "retrieval" and m.length() == 160
    b = m.batch(3)
    assert b["input_ids"].shape[1] == 160 and (b["answer_group"] >= 0).any()
    # perfect training exact match advances after min_steps_per_length
    step = 3
    while m.state["level"] == 0:
        m.observe(step, {"loss": 0.1, "train_em": 1.0})
        step += 1
    assert m.length() == 192 and step - 3 >= cfg.min_steps_per_length
    while not m.finished(step):
        m.observe(step, {"loss": 0.1, "train_em": 0.0})  # no progress: times out, then final steps
        step += 1
    assert m.state["reached_em"] is False
    assert step <= m.max_steps()


def test_base_curriculum_anneals_only_the_final_steps(small_tokenizer, corpus_rows):
    cfg = BaseTrainConfig(window=192, retrieval_lengths=(192,), copy_rows=4, copy_max_steps=2,
                          min_steps_per_length=2, max_steps_per_length=3, final_steps=5,
                          final_min_lr_ratio=0.1, tokens_per_step=480)
    m = BaseCurriculum(cfg, small_tokenizer, corpus_rows, len(small_tokenizer))
    scales, step = [], 0
    while not m.finished(step):
        scales.append(m.lr_scale(step))
        m.observe(step, {"loss": 5.0, "train_em": 0.0})
        step += 1
    # copy (2 steps) and the timed-out length (3 steps) run at the full rate ...
    assert scales[:5] == [1.0] * 5
    # ... then five final steps: a cosine from 1 down to the floor, reached on the last one
    final = scales[5:]
    assert len(final) == cfg.final_steps
    assert final == pytest.approx([0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * k / 4)) for k in range(5)])
    assert final[0] == 1.0 and final[-1] == pytest.approx(0.1)
    # a constant final phase when the floor is 1
    flat = BaseCurriculum(replace(cfg, final_min_lr_ratio=1.0), small_tokenizer, corpus_rows, len(small_tokenizer))
    flat.state.update(phase="retrieval", final_left=3)
    assert flat.lr_scale(0) == 1.0


def test_rows_too_short_for_any_retrieval_task_become_corpus_rows(small_tokenizer, corpus_rows):
    m = Extension("pose", ExtensionSpec("pose", 24), 512, 4, 1.0, small_tokenizer, corpus_rows, 0)
    b = m.batch(0)
    assert b["input_ids"].shape == (4, 24) and (b["answer_group"] < 0).all()
    assert m.stats["no_retrieval_rows"] == 4 and m.stats["rows"] == 4


def test_random_t_rows_keep_the_evidence_and_the_answer(small_tokenizer, corpus_rows):
    m = Extension("longrecipe_random_t", ExtensionSpec("longrecipe", 160, selection="random"), 640, 3, 1.0,
                  small_tokenizer, corpus_rows, 0)
    b = m.batch(1)
    for row, doc, grp in zip(b["input_ids"], b["doc_ids"], b["answer_group"]):
        real = row[doc == 0]
        assert len(real) <= 160 and (grp >= 0).any()
        answer = small_tokenizer.decode(row[grp >= 0], skip_special_tokens=True).strip()
        # the needle sentence holding the answer survived the selection, before the question
        assert answer and answer.split(",")[0].strip() in small_tokenizer.decode(real[:-len(row[grp >= 0])])
    assert m.stats["rows"] == 3
