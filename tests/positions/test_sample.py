"""Tests for repro.positions.sample (sentence starts and samples from a tokenizer)."""

from __future__ import annotations

import pytest

from repro import positions as P
from repro.data.tokenizer import train_tokenizer

TEXT = (
    "The quick brown fox jumps over the lazy dog. Did it land? It did!\n"
    "Position ids decide how far apart two tokens look to the model. "
    "LongRecipe keeps sentences whole and skips indices between them.\n"
    "def f(x):\n    return x + 1\n"
) * 20


@pytest.fixture(scope="session")
def tokenizer():
    return train_tokenizer([TEXT], vocab_size=320)


# ------------------------------------------------------------------ sentences from a tokenizer
def test_sentence_starts_from_tokenizer(tokenizer):
    text = TEXT[:400]
    s = P.sample_from_text(text, tokenizer)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    pieces = [text[a:b] for a, b in enc["offset_mapping"]]
    assert s.n == len(pieces) and s.token_ids == tuple(enc["input_ids"])
    starts = list(s.sentence_starts)
    for a, b in zip(starts, starts[1:]):
        sent = pieces[a:b]
        assert any(d in sent[-1] for d in P.SENTENCE_DELIMITERS)
        assert not any(d in piece for piece in sent[:-1] for d in P.SENTENCE_DELIMITERS)
    assert len(starts) > 10


def test_sample_from_documents(tokenizer):
    class Doc:
        def __init__(self, text, source):
            self.text, self.source = text, source
    docs = [Doc(TEXT[:300], "prose"), Doc("x = 1\n" * 50, "code"), Doc("ignored. " * 99, "synthetic")]
    s = P.sample_from_documents(docs, tokenizer, n=150)
    assert s.n == 150 and len(s.token_ids) == 150 and s.sentence_starts[0] == 0
    with pytest.raises(ValueError, match="allowed n <="):
        P.sample_from_documents(docs, tokenizer, n=10**6)



def test_samples_carry_token_texts_and_the_official_split(tokenizer):
    text = TEXT[:400]
    s = P.sample_from_text(text, tokenizer)
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    assert s.token_texts == tuple(text[a:b] for a, b in enc["offset_mapping"])
    assert P.sentence_starts_by_rule(s, "paper") == s.sentence_starts
    official = P.sentence_starts_by_rule(s, "official")
    for a, b in zip(official, official[1:]):  # a sentence ends exactly at an official end token
        assert s.token_texts[b - 1] in P.OFFICIAL_SENTENCE_ENDS
        assert not any(t in P.OFFICIAL_SENTENCE_ENDS for t in s.token_texts[a:b - 1])
    assert set(official) <= set(s.sentence_starts)  # an exact end token also contains a delimiter

    class Doc:
        def __init__(self, text, source):
            self.text, self.source = text, source
    d = P.sample_from_documents([Doc(TEXT[:300], "prose"), Doc("x = 1\n" * 50, "code")], tokenizer, n=120)
    assert len(d.token_texts) == 120 and "".join(d.token_texts).startswith(TEXT[:50])


def test_exact_split_rule():
    pieces = ["a", ".", " b", ").", "\n\n", "c", "\n", "d", ".\n", "e"]
    assert P.sentence_starts_from_pieces(pieces).tolist() == [0, 2, 4, 5, 7, 9]
    assert P.sentence_starts_from_pieces(pieces, P.OFFICIAL_SENTENCE_ENDS, exact=True).tolist() == [0, 2, 7, 9]
