"""LongPPL: key tokens against a one-forward-per-target reference, the metric against a naive recomputation,
the official aggregation, the offset alignment across tokenizers, and the errors."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM

from repro.analysis.longppl import (LongPPLConfig, TokenScores, aggregate, as_model, compute_longppl, key_tokens,
                                    longppl, lsd_scores, select_key_tokens, top_lsd)
from repro.analysis.longppl_align import compute_longppl_text, key_spans, tokens_in_spans, transfer_key_mask

V = 64


def _llama(vocab: int = V, seed: int = 0, std: float = 0.5, **extra) -> LlamaForCausalLM:
    """A float64 random Llama; a large init std makes its predictions peaked, so the context matters a lot."""
    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      initializer_range=std, use_cache=False, **extra)
    return LlamaForCausalLM(cfg).double().eval()


def _ids(B: int, T: int, seed: int = 1, vocab: int = V) -> torch.Tensor:
    return torch.randint(0, vocab, (B, T), generator=torch.Generator().manual_seed(seed))


def _logp(model, context: torch.Tensor, target: int) -> float:
    """log p(target | context): one plain model call on exactly ``context``."""
    with torch.no_grad():
        return float(model(input_ids=context[None]).logits[0, -1].double().log_softmax(-1)[target])


def _reference_scores(model, row: torch.Tensor, window: int, stride: int) -> dict[int, tuple[float | None, float]]:
    """token j -> (LSD or None, LCL), one forward per target and context. The short context of token j is
    tokens s .. j-1, s the largest multiple of ``stride`` with s <= j - window (the window that scores j)."""
    out = {}
    for j in range(1, len(row)):
        long = _logp(model, row[:j], int(row[j]))
        lsd = None
        if j >= window:
            s = (j - window) // stride * stride
            lsd = long - _logp(model, row[s:j], int(row[j]))
        out[j] = (lsd, long)
    return out


def _midgap(values: list[float], q: float) -> float:
    """A threshold between two neighbouring sorted values near quantile ``q`` (far from both, for rounding)."""
    v = sorted(values)
    k = min(max(1, int(q * len(v))), len(v) - 1)
    return (v[k - 1] + v[k]) / 2


# -- configuration -------------------------------------------------------------------------------------------------

def test_defaults_are_the_official_ones_and_the_windows_are_longces():
    cfg = LongPPLConfig()
    assert (cfg.alpha, cfg.beta, cfg.window, cfg.stride) == (2.0, -2.0, 4096, 1024)
    assert (cfg.windows.window, cfg.windows.stride) == (4096, 1024)
    assert LongPPLConfig.scaled(4096) == cfg
    tiny = LongPPLConfig.scaled(256, alpha=1.0)
    assert (tiny.window, tiny.stride, tiny.alpha, tiny.beta) == (256, 64, 1.0, -2.0)


@pytest.mark.parametrize("kwargs, message", [
    (dict(alpha=-0.5), r"alpha=-0.5; allowed: a finite number >= 0"),
    (dict(alpha=float("nan")), r"alpha=nan; allowed"),
    (dict(alpha=True), r"alpha=True; allowed"),
    (dict(beta=0.0), r"beta=0.0; allowed: a finite number < 0"),
    (dict(beta=-math.inf), r"beta=-inf; allowed"),
    (dict(window=1), r"window=1; allowed: an integer >= 2"),
    (dict(window=8, stride=0), r"stride=0; allowed: an integer with 1 <= stride <= window=8"),
    (dict(window=8, stride=9), r"stride=9; allowed: an integer with 1 <= stride <= window=8"),
    (dict(window=8.0), r"window=8.0; allowed"),
    (dict(chunk=0), r"chunk=0; allowed: an integer >= 1"),
    (dict(max_pass_tokens=0), r"max_pass_tokens=0; allowed: an integer >= 1"),
])
def test_bad_config_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LongPPLConfig(**kwargs)


def test_bad_scaled_base_is_refused():
    with pytest.raises(ValueError, match=r"base_window=1; allowed: an integer >= 2"):
        LongPPLConfig.scaled(1)


# -- thresholds and ranking on hand-made losses ------------------------------------------------------------------

def test_thresholds_are_strict_and_need_both_conditions():
    # targets t = 0..6 are tokens 1..7; full = -LCL, short - full = LSD
    full = torch.tensor([[0.5, 0.5, 0.5, 2.0, 2.5, 0.1, 0.5]], dtype=torch.float64)
    short = full + torch.tensor([[5.0, 2.0, 2.5, 3.0, 4.0, 1.9, 9.0]], dtype=torch.float64)
    scored = torch.tensor([[False, True, True, True, True, True, True]])
    scores = TokenScores.from_losses(short, full, scored)
    assert scores.lsd.shape == (1, 8) and scores.lcl.shape == (1, 8) and scores.scored.shape == (1, 8)
    assert math.isnan(scores.lsd[0, 0]) and math.isnan(scores.lsd[0, 1]) and math.isnan(scores.lcl[0, 0])
    assert scores.lcl[0, 1:].tolist() == (-full[0]).tolist()
    key = select_key_tokens(scores, 2.0, -2.0)
    # token 1: LSD 5 but not scored; 2: LSD == alpha (strict); 3: key; 4: LCL == beta (strict);
    # 5: LCL -2.5 < beta; 6: LSD 1.9 < alpha; 7: key
    assert key[0].tolist() == [False, False, False, True, False, False, False, True]
    assert select_key_tokens(scores, 1.5, -3.0)[0].tolist() == [False, False, True, True, True, True, True, True]


def test_top_lsd_ranks_scored_tokens_only():
    full = torch.zeros(2, 5, dtype=torch.float64)
    short = torch.tensor([[9.0, 1.0, 3.0, 2.0, -1.0], [0.0, 0.0, -2.0, 5.0, 4.0]], dtype=torch.float64)
    scored = torch.tensor([[False, True, True, True, True]] * 2)
    scores = TokenScores.from_losses(short, full, scored)
    assert top_lsd(scores, 2).tolist() == [[3, 4], [4, 5]]  # token 1 (LSD 9) is not scored
    with pytest.raises(ValueError, match=r"k=5; allowed: an integer with 1 <= k <= 4"):
        top_lsd(scores, 5)
    with pytest.raises(ValueError, match=r"allowed: all the same \(B, T-1\)"):
        TokenScores.from_losses(short[:, :4], full, scored)


# -- key tokens against the brute-force reference ----------------------------------------------------------------

@pytest.mark.parametrize("window, stride, max_pass", [(8, 3, 16384), (8, 8, 16384), (6, 1, 40)])
def test_key_tokens_match_one_forward_per_target(window, stride, max_pass):
    model = _llama()
    ids = _ids(2, 33)
    ref = [_reference_scores(model, ids[b], window, stride) for b in range(2)]
    lsds = [lsd for r in ref for lsd, _ in r.values() if lsd is not None]
    lcls = [lcl for r in ref for lsd, lcl in r.values() if lsd is not None]
    alpha = _midgap([v for v in lsds if v > 0.1], 0.3)  # clear of the first window's LSD = 0 (up to rounding)
    beta = _midgap(lcls, 0.4)
    cfg = LongPPLConfig(alpha=alpha, beta=beta, window=window, stride=stride, chunk=7, max_pass_tokens=max_pass)

    scores = lsd_scores(model, ids, cfg)
    key = key_tokens(model, ids, cfg)
    assert key.shape == ids.shape and key.dtype == torch.bool
    want = torch.zeros_like(key)
    for b in range(2):
        for j, (lsd, lcl) in ref[b].items():
            assert abs(float(scores.lcl[b, j]) - lcl) < 1e-10
            if lsd is None:
                assert not scores.scored[b, j] and math.isnan(scores.lsd[b, j])
            else:
                assert scores.scored[b, j] and abs(float(scores.lsd[b, j]) - lsd) < 1e-10
                want[b, j] = lsd > alpha and lcl > beta
    assert torch.equal(key, want)
    assert not key[:, :window].any()  # tokens before the first scored target are never key
    # the test is not vacuous: key and non-key tokens, and each condition alone rejects some scored token
    s = scores.scored
    assert key.any() and (s & ~key).any()
    assert (s & (scores.lsd > alpha) & ~(scores.lcl > beta)).any()
    assert (s & (scores.lcl > beta) & ~(scores.lsd > alpha)).any()


def test_rows_shorter_than_the_window_have_no_key_token():
    cfg = LongPPLConfig(alpha=0.0, beta=-50.0, window=8, stride=2)
    scores = lsd_scores(_llama(), _ids(1, 8), cfg)
    assert not scores.scored.any() and not select_key_tokens(scores, cfg.alpha, cfg.beta).any()


def test_models_in_train_mode_are_scored_in_eval_mode_and_restored():
    model = _llama(attention_dropout=0.5)
    ids = _ids(1, 24)
    cfg = LongPPLConfig(window=8, stride=4)
    want = lsd_scores(model, ids, cfg)
    model.train()
    got = lsd_scores(model, ids, cfg)
    assert model.training and all(m.training for m in model.modules())
    assert torch.equal(got.scored, want.scored)
    torch.testing.assert_close(got.lsd, want.lsd, rtol=0, atol=1e-12, equal_nan=True)


# -- the metric ------------------------------------------------------------------------------------------------------

def _naive_ce(model, row: torch.Tensor) -> torch.Tensor:
    with torch.no_grad():
        return F.cross_entropy(model(input_ids=row[None]).logits[0, :-1].double(), row[1:], reduction="none")


def test_longppl_is_exp_mean_ce_on_key_tokens_and_pools_documents():
    model = _llama(seed=3, std=0.1)
    ids = _ids(3, 20, seed=4)
    key = torch.rand(3, 20, generator=torch.Generator().manual_seed(5)) < 0.3
    key[:, 0] = False
    key[2] = False  # a document without key tokens: longppl None, left out of the pooled LongPPL
    got = longppl(model, ids, key, chunk=6)
    ces = [_naive_ce(model, ids[b]) for b in range(3)]
    for b in range(3):
        row = got["rows"][b]
        assert row["n_key"] == int(key[b].sum()) and row["n_tokens"] == 20
        assert row["ppl"] == pytest.approx(math.exp(float(ces[b].mean())), rel=1e-12)
        if b < 2:
            assert row["longppl"] == pytest.approx(math.exp(float(ces[b][key[b, 1:]].mean())), rel=1e-12)
    assert got["rows"][2]["longppl"] is None
    pooled = torch.cat([ces[b][key[b, 1:]] for b in range(2)])
    assert got["longppl"] == pytest.approx(math.exp(float(pooled.mean())), rel=1e-12)
    assert got["n_key"] == len(pooled) and got["n_tokens"] == 60
    # PPL weights each document's mean CE (over T-1 targets) by its T tokens, as the official script does
    assert got["ppl"] == pytest.approx(math.exp(sum(20 * float(c.mean()) for c in ces) / 60), rel=1e-12)


def test_aggregate_pools_over_key_tokens_not_over_documents():
    rows = [{"longppl": math.e, "ppl": math.e ** 2, "n_key": 1, "n_tokens": 10},
            {"longppl": math.e ** 3, "ppl": math.e ** 4, "n_key": 3, "n_tokens": 30},
            {"longppl": None, "ppl": math.e ** 6, "n_key": 0, "n_tokens": 20}]
    got = aggregate(rows)
    assert got["longppl"] == pytest.approx(math.exp((1 * 1 + 3 * 3) / 4))  # not the mean of e and e^3
    assert got["ppl"] == pytest.approx(math.exp((10 * 2 + 30 * 4 + 20 * 6) / 60))
    assert (got["n_key"], got["n_tokens"]) == (4, 60)
    assert aggregate(rows[2:])["longppl"] is None
    with pytest.raises(ValueError, match="rows is empty"):
        aggregate([])


def test_compute_longppl_on_documents_of_different_lengths():
    model, evaluator = _llama(seed=3, std=0.1), _llama(seed=0)
    cfg = LongPPLConfig(alpha=0.5, beta=-8.0, window=6, stride=2)
    docs = [_ids(1, 30, seed=6)[0], _ids(1, 21, seed=7)[0]]
    got = compute_longppl(model, evaluator, docs, cfg)
    rows = []
    for d, k in zip(docs, got["key_mask"]):
        assert torch.equal(k, key_tokens(evaluator, d[None], cfg)[0])
        rows += longppl(model, d[None], k[None])["rows"]
    assert got["rows"] == rows and got["n_key"] > 0
    assert got["longppl"] == pytest.approx(aggregate(rows)["longppl"], rel=1e-12)
    batch = compute_longppl(model, evaluator, docs[0][None], cfg)
    assert batch["rows"] == rows[:1] and torch.equal(batch["key_mask"][0], got["key_mask"][0])


def test_models_saved_with_save_pretrained_load_by_path(tmp_path):
    model, evaluator = _llama(seed=3, std=0.1), _llama(seed=0)
    model.save_pretrained(tmp_path / "model")
    evaluator.save_pretrained(tmp_path / "evaluator")
    cfg = LongPPLConfig(alpha=0.5, beta=-8.0, window=6, stride=2)
    ids = _ids(2, 24, seed=8)
    want = compute_longppl(model, evaluator, ids, cfg)
    got = compute_longppl(str(tmp_path / "model"), tmp_path / "evaluator", ids, cfg)
    assert torch.equal(got["key_mask"], want["key_mask"]) and want["n_key"] > 0
    assert got["longppl"] == pytest.approx(want["longppl"], rel=1e-12)
    assert got["ppl"] == pytest.approx(want["ppl"], rel=1e-12)


# -- errors ----------------------------------------------------------------------------------------------------------

def test_different_vocabularies_are_refused():
    with pytest.raises(ValueError, match=r"vocabulary sizes differ: model 64, evaluator 80; allowed: equal.*"
                                         r"compute_longppl_text"):
        compute_longppl(_llama(), _llama(vocab=80), _ids(1, 12), LongPPLConfig(window=4, stride=2))


def test_bad_inputs_are_refused():
    model = _llama()
    ids = _ids(2, 10)
    key = torch.zeros(2, 10, dtype=torch.bool)
    with pytest.raises(ValueError, match=r"input_ids: \(10,\); allowed: a \(batch, tokens\) tensor"):
        key_tokens(model, ids[0], LongPPLConfig(window=4, stride=2))
    with pytest.raises(ValueError, match=r"token ids span 0\.\.64; allowed: 0\.\.63"):
        longppl(model, torch.tensor([[0, 64]]), torch.zeros(1, 2, dtype=torch.bool))
    with pytest.raises(ValueError, match=r"key_mask: torch.bool \(2, 9\); allowed: a bool tensor shaped like"):
        longppl(model, ids, key[:, 1:])
    with pytest.raises(ValueError, match=r"key_mask: torch.int64"):
        longppl(model, ids, key.long())
    key[1, 0] = True
    with pytest.raises(ValueError, match=r"key_mask\[:, 0\] is True; allowed: False"):
        longppl(model, ids, key)
    with pytest.raises(TypeError, match=r"model is a int; allowed: a torch.nn.Module, or a path"):
        as_model(3)


# -- across tokenizers: the character-offset alignment -----------------------------------------------------------

def test_key_spans_merge_touching_key_tokens_only():
    offsets = [(0, 0), (0, 3), (3, 5), (5, 6), (7, 9), (9, 12), (12, 14)]
    key = [False, False, True, True, True, True, False]
    assert key_spans(offsets, key) == [(3, 6), (7, 12)]  # (5,6) and (7,9) do not touch: a gap at character 6
    assert key_spans(torch.tensor(offsets), torch.tensor(key)) == [(3, 6), (7, 12)]
    assert key_spans(offsets, [False] * 7) == []
    with pytest.raises(ValueError, match=r"key has 6 entries for 7 offsets"):
        key_spans(offsets, key[:6])


def test_tokens_in_spans_needs_whole_containment():
    spans = [(3, 6), (7, 12)]
    offsets = [(0, 2), (2, 4), (4, 6), (6, 8), (8, 9), (9, 12), (12, 13)]
    # (2,4) straddles the first span's start, (6,8) the second's: not key; (4,6), (8,9), (9,12) are inside
    assert tokens_in_spans(offsets, spans).tolist() == [False, False, True, False, True, True, False]
    assert tokens_in_spans([(0, 3), (3, 4)], [(0, 4)]).tolist() == [False, True]  # token 0 is never key
    assert transfer_key_mask([(0, 0), (0, 4), (4, 6), (6, 12)], [False, False, True, True],
                             offsets).tolist() == [False, False, True, True, True, True, False]


@pytest.fixture(scope="module")
def tokenizer():
    from pydoc_data.topics import topics

    from repro.data.tokenizer import train_tokenizer

    return train_tokenizer([t for _, t in sorted(topics.items())][:60], 400)


def test_text_path_with_one_tokenizer_equals_the_token_path_shifted_by_the_bos(tokenizer):
    from pydoc_data.topics import topics

    text = topics["assert"][:300]
    vocab = len(tokenizer)
    model, evaluator = _llama(vocab, seed=3, std=0.1), _llama(vocab, seed=0)
    cfg = LongPPLConfig(alpha=0.5, beta=-12.0, window=12, stride=5)
    got = compute_longppl_text(text, model, tokenizer, evaluator, tokenizer, cfg)
    # the evaluator reads [BOS] + text, the model the text alone: same tokens, shifted by one
    ev_ids = torch.tensor(tokenizer(text)["input_ids"])[None]
    ids = torch.tensor(tokenizer(text, add_special_tokens=False)["input_ids"])[None]
    assert ev_ids[0, 0] == tokenizer.bos_token_id and torch.equal(ev_ids[:, 1:], ids)
    want_key = key_tokens(evaluator, ev_ids, cfg)[:, 1:]
    assert want_key.any() and (~want_key[:, cfg.window:]).any()
    assert torch.equal(got["key_mask"], want_key[0])
    want = longppl(model, ids, want_key)
    assert got["longppl"] == pytest.approx(want["longppl"], rel=1e-12) and got["n_key"] == want["n_key"]
    assert got["ppl"] == pytest.approx(want["ppl"], rel=1e-12)
