"""Batches prepared before training replay exactly what the method builds on the fly."""

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro.methods import Extension, ExtensionSpec
from repro.methods.prepared import PreparedBatches, prepare_batches
from repro.models import build_tiny
from repro.profiles import ModelConfig
from repro.train import Trainer, TrainConfig


def _method(tok, rows, seed=3):
    return Extension("longrecipe_random_t", ExtensionSpec("longrecipe", 96, selection="random"), 384, 3, 0.5,
                     tok, rows, seed)


@pytest.mark.parametrize("workers", [1, 2])
def test_prepared_batches_and_states_equal_on_the_fly(workers, small_tokenizer, corpus_rows, tmp_path):
    steps = 5
    path = prepare_batches(_method(small_tokenizer, corpus_rows), steps, tmp_path / "data", workers=workers)
    ref = _method(small_tokenizer, corpus_rows)
    prepared = PreparedBatches(path)
    assert prepared.name == ref.name
    for s in range(steps):
        a, b = ref.batch(s), prepared.batch(s)
        assert a.keys() == b.keys()
        for k in a:
            assert a[k].dtype == b[k].dtype and np.array_equal(a[k], b[k]), (s, k)
        assert prepared.state_dict() == ref.state_dict()
    assert prepared.state_dict()["rows"] == 3 * steps
    with pytest.raises(ValueError, match=r"step=5 is outside the prepared batches; allowed: 0 <= step < 5"):
        prepared.batch(steps)


def test_training_on_prepared_batches_gives_the_same_weights(small_tokenizer, corpus_rows, tmp_path):
    cfg = TrainConfig(max_steps=3, lr=1e-3, checkpoint_every=0, threads=1)
    mcfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
    weights = []
    for i, method in enumerate([_method(small_tokenizer, corpus_rows),
                                PreparedBatches(prepare_batches(_method(small_tokenizer, corpus_rows), 3,
                                                                tmp_path / "data"))]):
        model = build_tiny(mcfg, len(small_tokenizer), 1024, 0, 1, 2)
        final = Trainer(model, method, cfg, tmp_path / f"run{i}", progress=False).train()
        weights.append(load_file(final / "model.safetensors"))
    assert weights[0].keys() == weights[1].keys()
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_bad_arguments(small_tokenizer, corpus_rows, tmp_path):
    with pytest.raises(ValueError, match="steps=0, workers=1; allowed: both >= 1"):
        prepare_batches(_method(small_tokenizer, corpus_rows), 0, tmp_path / "d")
    assert not (tmp_path / "d").exists()
