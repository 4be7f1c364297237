"""RULER NIAH family: formats, evidence exactly once, scoring, the legacy niah_single_1 prompt."""

from __future__ import annotations

import re

import pytest

from repro.tasks import get_task
from repro.tasks.niah import NEEDLE, NIAH, NIAH_CONFIGS, NOISE, PREFIX, QUESTION

UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}"


def test_single_1_is_rulers(tokenizer):
    """RULER's niah_single_1: adjective-noun key, singular template, noise blocks and the needle on lines."""
    ex = get_task("niah_single_1").generate(tokenizer, 300, 0.5, 1)
    key, value = ex.metadata["key"], ex.references[0]
    assert re.fullmatch(r"[a-z]+-[a-z]+", key) and re.fullmatch(r"\d{7}", value)
    prefix = ("A special magic number is hidden within the following text. Make sure to memorize it. "
              "I will quiz you about the number afterwards.\n")
    answer = f" The special magic number for {key} mentioned in the provided text is"
    question = f"\nWhat is the special magic number for {key} mentioned in the provided text?" + answer
    assert ex.prompt.startswith(prefix) and ex.prompt.endswith(question) and ex.metadata["answer_prefix"] == answer
    lines = ex.prompt[len(prefix):-len(question)].split("\n")
    needle = f"One of the special magic numbers for {key} is: {value}."
    assert lines.count(needle) == 1
    noise = [line for line in lines if line != needle]
    assert noise[:-1] == [" ".join(NOISE)] * (len(noise) - 1) and " ".join(NOISE).startswith(noise[-1])
    assert len(noise) >= 5
    s, e = ex.metadata["evidence_char_spans"][0]
    assert ex.prompt[s:e] == needle and ex.prompt[s - 1] == "\n" and ex.prompt[e] == "\n"
    train = get_task("niah_single_1", key_pool="train").generate(tokenizer, 300, 0.5, 1)
    assert train.metadata["key"] != key


def test_legacy_prompt_still_available(tokenizer):
    ex = NIAH(haystack="noise", key_type="noun", legacy_prompt=True).generate(tokenizer, 300, 0.5, 1)
    key = ex.metadata["key"]
    assert re.fullmatch(r"[a-z]+", key)
    assert ex.prompt.startswith(PREFIX) and ex.prompt.endswith(QUESTION.format(key=key))
    assert NEEDLE.format(key=key, value=ex.references[0]) in ex.prompt


@pytest.mark.parametrize("name", sorted(NIAH_CONFIGS))
def test_evidence_once_and_at_span(name, tokenizer):
    task = get_task(name)
    for seed in range(3):
        ex = task.generate(tokenizer, 1024, 0.4, seed)
        for ref in ex.references:
            assert ex.prompt.count(ref) == 1, (name, ref)
        for (s, e), ref in zip(ex.metadata["evidence_char_spans"], ex.references):
            assert ref in ex.prompt[s:e] and ex.prompt[s:e].startswith("One of the special magic")
        for key in ex.metadata.get("keys", [ex.metadata["key"]]):
            assert ex.prompt.count(key) >= 2  # needle(s) and question


def test_ruler_configs_shapes(tokenizer):
    ex = get_task("niah_single_3").generate(tokenizer, 600, 0.5, 0)
    assert re.fullmatch(UUID, ex.references[0])
    assert "A special magic uuid is hidden" in ex.prompt and "The special magic uuid for" in ex.prompt
    assert re.search(r"One of the special magic uuids for [a-z]+-[a-z]+ is: " + UUID, ex.prompt)
    mk1 = get_task("niah_multikey_1").generate(tokenizer, 600, 0.5, 0)
    assert mk1.prompt.count("One of the special magic numbers for") == 4 and len(mk1.references) == 1
    mk2 = get_task("niah_multikey_2").generate(tokenizer, 600, 0.5, 0)
    lines = mk2.prompt.split("\n")
    assert sum(line.startswith("One of the special magic numbers") for line in lines) > 5
    mk3 = get_task("niah_multikey_3").generate(tokenizer, 900, 0.5, 0)
    assert re.fullmatch(UUID, mk3.metadata["key"])
    mv = get_task("niah_multivalue").generate(tokenizer, 600, 0.5, 0)
    assert len(mv.references) == 4 and "What are all the special magic numbers for" in mv.prompt
    mq = get_task("niah_multiquery").generate(tokenizer, 600, 0.5, 0)
    keys = mq.metadata["keys"]
    assert len(mq.references) == 4 and f"{keys[0]}, {keys[1]}, {keys[2]}, and {keys[3]}" in mq.prompt
    assert "\nWhat are all the special magic numbers for" in mq.prompt
    assert mq.prompt.endswith("mentioned in the provided text are")


def test_scoring_string_match_all(tokenizer):
    task = get_task("niah_multivalue")
    refs = ("1111111", "2222222", "3333333", "4444444")
    assert task.score("1111111, 2222222, 3333333 and 4444444.", refs) == 1.0
    assert task.score("2222222 and 4444444", refs) == 0.5
    assert task.score("no idea", refs) == 0.0
    assert get_task("niah_single_1").score(" 7654321.", ("7654321",)) == 1.0


def test_custom_haystack_and_errors(tokenizer):
    texts = ["Alpha beta gamma. Delta epsilon zeta. Eta theta iota."]
    ex = get_task("niah_single_2", haystack_texts=texts).generate(tokenizer, 400, 0.5, 0)
    assert "Delta epsilon zeta." in ex.prompt
    with pytest.raises(ValueError, match="haystack"):
        NIAH(haystack="sea")
    with pytest.raises(ValueError, match="num_keys"):
        NIAH(num_keys=0)
