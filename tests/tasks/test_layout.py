"""Properties every registered task shares: determinism, exact length, depth, pools, clear errors."""

from __future__ import annotations

import pytest

from repro.tasks import available_tasks, get_task
from repro.tasks.base import LengthTooShort, minimum_length
from repro.tasks.layout import assemble, split_sentences

ALL = available_tasks()
# one haystack unit of slack: a needle line (~25 tokens, uuid pairs ~60) or a sentence/word otherwise
SLACK = {"niah_multikey_2": 40, "niah_multikey_3": 90, "json_kv": 90, "qa_1": 30, "qa_2": 30}
DEPTH_FREE = {"cwe", "fwe"}


def test_all_expected_tasks_registered():
    for name in ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
                 "niah_multikey_3", "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
                 "json_kv", "multihop_2", "multihop_3", "multihop_4", "niah_position"):
        assert name in ALL


@pytest.mark.parametrize("name", ALL)
def test_deterministic_exact_length_and_depth(name, tokenizer):
    task = get_task(name)
    a = task.generate(tokenizer, 2048, 0.3, 7)
    b = get_task(name).generate(tokenizer, 2048, 0.3, 7)
    assert a == b
    assert a.prompt != task.generate(tokenizer, 2048, 0.3, 8).prompt
    n = len(tokenizer(a.prompt).input_ids)
    assert n == a.metadata["n_tokens"]
    assert 2048 - SLACK.get(name, 20) <= n <= 2048
    for (s, e) in a.metadata["evidence_char_spans"]:
        assert 0 <= s < e <= len(a.prompt)
    if name not in DEPTH_FREE:
        for d in (0.0, 0.3, 0.8, 1.0):
            ex = task.generate(tokenizer, 2048, d, 3)
            assert abs(ex.metadata["evidence_depths"][0] - d) <= 0.07, (d, ex.metadata["evidence_depths"])
    assert a.task == name and a.metadata["seed"] == 7 and a.metadata["length"] == 2048


@pytest.mark.parametrize("name", ALL)
def test_short_length_error_and_minimum(name, tokenizer):
    task = get_task(name)
    with pytest.raises(LengthTooShort, match="too short"):
        task.generate(tokenizer, 10, 0.5, 0)
    m = minimum_length(task, tokenizer, seeds=range(3))
    ex = task.generate(tokenizer, m + 5, 0.5, 1)
    assert ex.metadata["n_tokens"] <= m + 5
    with pytest.raises(ValueError, match="depth"):
        task.generate(tokenizer, 2048, 1.5, 0)


@pytest.mark.parametrize("name", ALL)
def test_near_the_minimum_fits_or_raises_length_too_short(name, tokenizer):
    """Around the shortest length: a prompt within the length, or LengthTooShort naming a longer minimum."""
    task = get_task(name)
    m = minimum_length(task, tokenizer, seeds=range(3))
    for seed in range(3):
        for length in range(m - 4, m + 6):
            try:
                ex = task.generate(tokenizer, length, 0.5, seed)
            except LengthTooShort as err:
                assert err.minimum > length and f"length={length}" in str(err)
                continue
            assert ex.metadata["n_tokens"] <= length


@pytest.mark.parametrize("name", ALL)
def test_answer_prefix_ends_the_prompt(name, tokenizer):
    ex = get_task(name).generate(tokenizer, 600, 0.5, 1)
    prefix = ex.metadata["answer_prefix"]
    assert prefix.strip() and ex.prompt.endswith(prefix)
    assert len(prefix) < len(ex.prompt) - ex.metadata["context_char_span"][1]  # after the context


@pytest.mark.parametrize("name", ALL)
def test_key_pools(name, tokenizer):
    ev = get_task(name, key_pool="eval").generate(tokenizer, 512, 0.5, 2)
    tr = get_task(name, key_pool="train").generate(tokenizer, 512, 0.5, 2)
    assert ev.prompt != tr.prompt or name in ("json_kv", "niah_multikey_3")  # uuids only
    with pytest.raises(ValueError, match="pool"):
        get_task(name, key_pool="test")


def test_assemble_spans_and_order():
    prompt, spans = assemble("P:", ["a.", "b.", "c."], [(1.0, "X"), (0.0, "Y"), (1.0, "Z")], "?")
    assert prompt == "P:Y a. b. c. X Z?"
    assert [prompt[s:e] for s, e in spans] == ["X", "Y", "Z"]


def test_split_sentences_caps_long_runs():
    sents = split_sentences("One two. Three four! Long " + "w " * 70)
    assert sents[:2] == ["One two.", "Three four!"]
    assert all(len(s.split()) <= 30 for s in sents)
