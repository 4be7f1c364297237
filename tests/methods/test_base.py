"""The base curriculum's data and phase logic, and the replay stream built from it."""

import math
from dataclasses import replace

import pytest

from repro.methods import BaseCurriculum
from repro.profiles import BaseTrainConfig


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
