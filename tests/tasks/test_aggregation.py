"""RULER cwe/fwe: frequencies make the answer well defined; scoring."""

from __future__ import annotations

import re
from collections import Counter

import pytest

from repro.tasks import get_task
from repro.tasks.aggregation import CWE_PREFIX, CWE_SHOT_MIN_LENGTH, CommonWords
from repro.tasks.base import LengthTooShort
from repro.tasks.pools import common_words, made_up_words


def _lists(prompt: str) -> list[list[str]]:
    """The words of every numbered list in a cwe prompt (its solved example's first), numbering checked."""
    out = []
    for line in prompt.split("\n"):
        if line.startswith("1. "):
            words = re.findall(r"\d+\. (\S+)", line)
            assert [int(n) for n in re.findall(r"(\d+)\. ", line)] == list(range(1, len(words) + 1))
            out.append(words)
    return out


@pytest.mark.parametrize("length", [256, 600, 2048])
def test_cwe_counts(tokenizer, length):
    ex = get_task("cwe").generate(tokenizer, length, 0.5, 1)
    counts = Counter(_lists(ex.prompt)[-1])
    fc, fu = ex.metadata["freq"]
    assert all(counts[w] == fc for w in ex.references)
    assert max(c for w, c in counts.items() if w not in ex.references) <= fu < fc
    assert len(ex.metadata["evidence_char_spans"]) == fc * 10
    assert CommonWords().frequencies(8192) == (30, 3) and CommonWords().frequencies(1000) == (6, 1)


def test_cwe_solved_example_as_ruler(tokenizer):
    """From CWE_SHOT_MIN_LENGTH on, one solved example (RULER's counts) precedes the list; none below."""
    q = "\nQuestion: What are the 10 most common words in the above list?"
    ans = " Answer: The top 10 words that appear most often in the list are:"
    for length, (sfc, sfu, n_words) in ((CWE_SHOT_MIN_LENGTH, (3, 1, 20)), (4096, (10, 3, 40))):
        ex = get_task("cwe").generate(tokenizer, length, 0.5, 2)
        assert ex.metadata["fewshot"] and ex.prompt.count(CWE_PREFIX) == 2 and ex.prompt.count(q + ans) == 2
        assert length - 30 <= ex.metadata["n_tokens"] <= length
        shot, main = _lists(ex.prompt)
        shot_counts = Counter(shot)
        shot_common = [w for w, c in shot_counts.items() if c == sfc]
        assert len(shot_counts) == n_words and len(shot_common) == 10
        assert all(c == sfu for w, c in shot_counts.items() if w not in shot_common)
        solved = ex.prompt.split(q + ans + " ", 1)[1].split("\n", 1)[0]
        assert sorted(re.findall(r"\d+\. (\S+)", solved)) == sorted(shot_common)
        assert not set(shot) & set(main)  # the example's words are its own
        assert ex.prompt.endswith(q + ans) and ex.metadata["answer_prefix"] == ans
        s, _ = ex.metadata["context_char_span"]
        assert ex.prompt[:s].endswith("\n" + CWE_PREFIX) and min(a for a, _ in ex.metadata["evidence_char_spans"]) > s
    short = get_task("cwe").generate(tokenizer, CWE_SHOT_MIN_LENGTH - 1, 0.5, 2)
    assert not short.metadata["fewshot"] and short.prompt.startswith(CWE_PREFIX) and len(_lists(short.prompt)) == 1
    always = get_task("cwe", shot_min_length=0).generate(tokenizer, 960, 0.5, 2)
    assert always.metadata["fewshot"] and len(_lists(always.prompt)) == 2
    with pytest.raises(LengthTooShort, match=r"cwe: length=600 is too short; allowed: an integer >= \d+ tokens "
                                             r"\(with the solved example, prepended from 0 tokens\)"):
        get_task("cwe", shot_min_length=0).generate(tokenizer, 600, 0.5, 2)
    with pytest.raises(ValueError, match=r"shot_min_length=-1; allowed: an integer >= 0"):
        get_task("cwe", shot_min_length=-1)


def test_cwe_long_lengths_fill_the_length(tokenizer):
    """65,536 tokens need more words than the list holds: made-up words fill the rest, never a short prompt."""
    ex = get_task("cwe").generate(tokenizer, 65_536, 0.5, 0)
    assert 65_536 - 30 <= ex.metadata["n_tokens"] <= 65_536
    assert ex.metadata["made_up_words"] and ex.metadata["freq"] == (30, 3)
    counts = Counter(_lists(ex.prompt)[-1])
    assert ex.metadata["num_words"] > len(common_words("eval")) and len(counts) == ex.metadata["num_words"]
    assert all(counts[w] == 30 for w in ex.references)
    assert max(c for w, c in counts.items() if w not in ex.references) <= 3
    train = get_task("cwe", key_pool="train").generate(tokenizer, 65_536, 0.5, 0)
    assert not set(Counter(_lists(train.prompt)[-1])) & set(counts)  # train/eval words stay disjoint


def test_made_up_words_are_disjoint_and_stable():
    ev, tr = made_up_words("eval", 3000), made_up_words("train", 3000)
    assert len(set(ev)) == 3000 and not set(ev) & set(tr)
    assert not (set(ev) | set(tr)) & (set(common_words("eval")) | set(common_words("train")))
    assert made_up_words("eval", 10) == ev[:10] and all(w.isalpha() and w.islower() for w in ev)
    with pytest.raises(ValueError, match="n=-1; allowed"):
        made_up_words("eval", -1)


def test_fwe_counts(tokenizer):
    ex = get_task("fwe").generate(tokenizer, 1500, 0.5, 2)
    counts = Counter(ex.prompt.split("\n")[0].split(" ")[16:])
    top = [w for w, _ in counts.most_common() if w != "..."][:3]
    assert set(top) == set(ex.references)
    third = min(counts[w] for w in ex.references)
    assert all(c < third for w, c in counts.items() if w not in ex.references and w != "...")


def test_scoring():
    refs = tuple(f"w{i}" for i in range(10))
    assert get_task("cwe").score(" ".join(refs), refs) == 1.0
    assert get_task("cwe").score("w1 w2 w3", refs) == pytest.approx(0.3)
    assert get_task("fwe").score("abc, def", ("abc", "def", "ghi")) == pytest.approx(2 / 3)
    assert get_task("fwe").score("", ("abc",)) == 0.0
    with pytest.raises(ValueError, match="freq_cw"):
        get_task("cwe", freq_cw=3, freq_ucw=3)
