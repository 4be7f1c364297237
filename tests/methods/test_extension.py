"""Extension methods: rows of any named position transform, sentence selection, refusals."""

import numpy as np
import pytest

from repro.methods import Extension, ExtensionSpec
from repro.models import build_tiny
from repro.positions import TRANSFORM_INFO
from repro.profiles import ModelConfig
from repro.train import Trainer, TrainConfig

POSITION_TRANSFORMS = sorted(n for n, t in TRANSFORM_INFO.items() if t.kind == "positions")


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
