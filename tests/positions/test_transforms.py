"""Property tests for repro.positions.transforms (position-index transforms, registry, model path)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from repro import positions as P

POSITION_TRANSFORMS = [k for k, v in P.TRANSFORM_INFO.items() if v.kind == "positions"]
RANDOM_TRANSFORMS = ["pose", "rpes", "longrecipe_eq7", "longrecipe_alg1", "longrecipe_official",
                     "skip", "cyclic", "dilation", "chunk_permutation"]
DECOYS = ("a", " b", ").", "\n\n", "\n  ", "...", " .")
"""Token texts that contain a delimiter (or not) but are not an official sentence-end token."""


def texts_for(n, starts, decoys=DECOYS, seed=0):
    """Token texts whose official sentence ends (exact tokens) are exactly ``starts``: the last token of each
    sentence is an official end token, every other token a decoy."""
    rng = np.random.default_rng(seed)
    ends = {s - 1 for s in starts[1:]}
    return tuple(P.OFFICIAL_SENTENCE_ENDS[rng.integers(5)] if i in ends else decoys[rng.integers(len(decoys))]
                 for i in range(n))


@st.composite
def samples(draw, max_n: int = 120):
    """A sample with random sentence boundaries (and token texts ending them) and a target window that fits it."""
    n = draw(st.integers(1, max_n))
    k = draw(st.integers(0, max(0, min(n - 1, 12))))
    cuts = draw(st.lists(st.integers(1, max(1, n - 1)), min_size=k, max_size=k, unique=True)) if n > 1 else []
    starts = tuple(sorted({0, *cuts}))
    target = n + draw(st.integers(len(starts), 4 * n + 16))
    texts = texts_for(n, starts, seed=draw(st.integers(0, 2**16)))
    return P.PositionSample(n=n, sentence_starts=starts, token_texts=texts), target


def _sample(n=64, every=7):
    starts = tuple(range(0, n, every))
    return P.PositionSample(n=n, sentence_starts=starts, token_texts=texts_for(n, starts))


def _view_target(name, n):
    return 2 * n + 1


# ------------------------------------------------------------------ position transforms
@settings(max_examples=60, deadline=None)
@given(samples(), st.integers(0, 2**31 - 1), st.sampled_from(POSITION_TRANSFORMS))
def test_positions_are_increasing_ints_inside_target(st_sample, seed, name):
    sample, target = st_sample
    p = P.apply_transform(name, sample, target, np.random.default_rng(seed))
    assert p.dtype == np.int64 and p.shape == (sample.n,)
    assert p.min() >= 0 and p.max() < target
    assert np.all(np.diff(p) > 0)  # all registered position transforms are order-preserving


@settings(max_examples=60, deadline=None)
@given(samples(), st.integers(0, 2**31 - 1), st.sampled_from(["longrecipe_eq7", "longrecipe_alg1"]))
def test_longrecipe_keeps_sentences_contiguous_and_ordered(st_sample, seed, name):
    sample, target = st_sample
    p = P.apply_transform(name, sample, target, np.random.default_rng(seed))
    starts = np.array(sample.sentence_starts)
    ends = np.append(starts[1:], sample.n)
    assert p[0] == 0
    for a, b in zip(starts, ends):
        assert np.array_equal(p[a:b], np.arange(p[a], p[a] + b - a))
    assert np.all(p[starts[1:]] > p[starts[1:] - 1])
    if name == "longrecipe_alg1":  # distinct slots: every later sentence after a gap >= 1
        assert np.all(p[starts[1:]] - p[starts[1:] - 1] >= 2)


def test_longrecipe_eq7_m0_is_identity_and_literal_plus_one():
    s = _sample(40, 5)
    assert np.array_equal(P.longrecipe_eq7(s, 40, np.random.default_rng(0), max_gap=0), np.arange(40))
    p = P.longrecipe_eq7(s, 100, np.random.default_rng(0), max_gap=0, literal_plus_one=True)
    assert np.array_equal(np.diff(p)[np.array(s.sentence_starts[1:]) - 1], np.full(7, 2))


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 200), st.integers(0, 300), st.integers(1, 4), st.integers(0, 2**31 - 1))
def test_pose_chunks(n, extra, k, seed):
    k = min(k, n)
    p = P.pose(P.PositionSample(n=n), n + extra, np.random.default_rng(seed), num_chunks=k)
    assert p[0] == 0 and p[-1] <= n + extra - 1
    assert (np.diff(p) != 1).sum() <= k - 1  # at most k contiguous chunks


@settings(max_examples=60, deadline=None)
@given(samples(), st.integers(0, 2**31 - 1), st.sampled_from(["paper", "official"]))
def test_pose_first_chunk_laws_keep_positions_increasing_inside_target(st_sample, seed, law):
    sample, target = st_sample
    p = P.apply_transform("pose", sample, target, np.random.default_rng(seed), first_chunk=law)
    assert p.dtype == np.int64 and p.shape == (sample.n,)
    assert p[0] == 0 and p.max() < target and np.all(np.diff(p) > 0)
    assert (np.diff(p) != 1).sum() <= 1  # two contiguous chunks


def _first_chunk_lengths(n, law, draws=4000, seed=11):
    """First-chunk length of each draw, read off the positions (a huge window makes a zero skip unlikely)."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(draws):
        p = P.pose(P.PositionSample(n=n), n + 10**9, rng, first_chunk=law)
        jumps = np.flatnonzero(np.diff(p) != 1)
        out.append(int(jumps[0]) + 1 if jumps.size else n)
    return np.array(out)


def test_pose_first_chunk_law_support_and_mean():
    n = 101
    official, paper = _first_chunk_lengths(n, "official"), _first_chunk_lengths(n, "paper")
    # official code: U{1..floor((n+1)/2)} = U{1..51}, mean 26; never longer than 51
    assert official.min() == 1 and official.max() == (n + 1) // 2
    assert official.mean() == pytest.approx(26.0, abs=1.0)
    # paper (PoSE's appendix, the default): U{1..n-1} = U{1..100}, mean 50.5; reaches n - 1
    assert paper.min() == 1 and paper.max() == n - 1
    assert paper.mean() == pytest.approx(50.5, abs=2.0)
    assert np.array_equal(_first_chunk_lengths(n, "paper", 50), _first_chunk_lengths(n, "paper", 50))
    default = np.random.default_rng(3)
    assert np.array_equal(P.pose(P.PositionSample(n=n), 10**4, default),
                          P.pose(P.PositionSample(n=n), 10**4, np.random.default_rng(3), first_chunk="paper"))


def test_pose_official_puts_more_tokens_at_or_beyond_n():
    n, target, draws = 300, 1000, 2000
    share = {}
    for law in ("paper", "official"):
        rng = np.random.default_rng(5)
        share[law] = np.mean([np.mean(P.pose(P.PositionSample(n=n), target, rng, first_chunk=law) >= n)
                              for _ in range(draws)])
    # E[share] = E[(n - L1) / n] - E[(n - L1)^2] / (2 n (target - n + 1)) for L1 the first chunk (target - n >= n):
    # about 1/2 - n / (6 (target - n)) for the paper's law, 3/4 - 7 n / (24 (target - n)) for the official one
    assert share["paper"] == pytest.approx(0.5 - n / (6 * (target - n)), abs=0.02)
    assert share["official"] == pytest.approx(0.75 - 7 * n / (24 * (target - n)), abs=0.02)


# ------------------------------------------------------------------ official LongRecipe reading
def _single_token_sentences(n):
    starts = tuple(range(n))
    return P.PositionSample(n=n, sentence_starts=starts, token_texts=texts_for(n, starts))


def test_longrecipe_official_identity_prefix_law():
    n = 101
    rng = np.random.default_rng(2)
    sample = _single_token_sentences(n)
    runs = []
    for _ in range(3000):
        p = P.longrecipe_official(sample, n + 10**8, rng)
        off = np.flatnonzero(p != np.arange(n))
        run = int(off[0]) if off.size else n
        assert run >= 1 and np.array_equal(p[:run], np.arange(run))
        runs.append(run)
    runs = np.array(runs)
    # every token is its own sentence and zero gaps are rare in a huge window, so the identity run is the
    # prefix: U{1..floor((n+1)/2)} = U{1..51}
    assert runs.min() == 1 and runs.max() == (n + 1) // 2
    assert runs.mean() == pytest.approx(26.0, abs=1.0)


def test_longrecipe_official_gaps_may_be_zero_and_fill_the_window():
    sample = _sample(64, 4)  # 16 sentences
    starts = np.array(sample.sentence_starts)
    rng = np.random.default_rng(0)
    zero_gaps, lasts = 0, set()
    for _ in range(500):
        p = P.longrecipe_official(sample, 70, rng)
        after_prefix = starts[1:][np.flatnonzero(p[starts[1:] - 1] != starts[1:] - 1)]  # sentences past the prefix
        zero_gaps += int(np.sum(p[after_prefix] - p[after_prefix - 1] == 1))
        lasts.add(int(p[-1]))
    assert zero_gaps > 0  # neighbouring sentences may be contiguous (Alg. 1 never allows this)
    assert max(lasts) == 69 and min(lasts) < 69  # the last position reaches target - 1, not always
    # no free cell: every gap is 0, identity positions
    assert np.array_equal(P.longrecipe_official(sample, 64, rng), np.arange(64))


@settings(max_examples=60, deadline=None)
@given(samples(), st.integers(0, 2**31 - 1))
def test_longrecipe_official_jumps_only_after_official_end_tokens(st_sample, seed):
    sample, target = st_sample
    p = P.apply_transform("longrecipe_official", sample, target, np.random.default_rng(seed))
    assert p[0] == 0 and p.max() < target and np.all(np.diff(p) > 0) and np.all(p >= np.arange(sample.n))
    off = np.flatnonzero(p != np.arange(sample.n))
    prefix_end = int(off[0]) if off.size else sample.n
    # every segment ends at an exact sentence-end token, except the identity prefix, which may end mid-sentence
    for j in np.flatnonzero(np.diff(p) != 1) + 1:
        assert j == prefix_end or sample.token_texts[j - 1] in P.OFFICIAL_SENTENCE_ENDS, sample.token_texts[j - 1]
    # split="paper" places the segments at sample.sentence_starts instead
    q = P.apply_transform("longrecipe_official", sample, target, np.random.default_rng(seed), split="paper")
    off = np.flatnonzero(q != np.arange(sample.n))
    assert set((np.flatnonzero(np.diff(q) != 1) + 1).tolist()) <= {*sample.sentence_starts, off[0] if off.size else 0}


def test_longrecipe_official_splits_at_exact_tokens_only():
    texts = ("Hi", ".", " x", ").", "\n\n", "y", "\n", "z", " .", "w", ".\n", "v", "?", "u", "!", "t")
    sample = P.PositionSample(n=len(texts), sentence_starts=(0,), token_texts=texts)
    assert P.sentence_starts_by_rule(sample, "official") == (0, 2, 7, 11, 13, 15)
    assert P.sentence_starts_by_rule(sample, "paper") == (0,)
    rng = np.random.default_rng(0)
    for _ in range(200):
        p = P.longrecipe_official(sample, 200, rng)
        off = np.flatnonzero(p != np.arange(sample.n))  # where the identity prefix ends (maybe mid-sentence)
        prefix_end = int(off[0]) if off.size else 0
        assert set((np.flatnonzero(np.diff(p) != 1) + 1).tolist()) <= {2, 7, 11, 13, 15, prefix_end}


def test_registry_documents_every_parameter():
    for name, info in P.TRANSFORM_INFO.items():
        assert set(info.params) == set(P.transform_params(name)), name
    assert "official" in P.TRANSFORM_INFO["pose"].params["first_chunk"]
    assert P.transform_params("pose")["first_chunk"] == "paper"
    assert P.transform_params("longrecipe_official") == {"split": "official"}


def test_pi_fractional_and_rope_parameters():
    s = P.PositionSample(n=8)
    assert np.allclose(P.pi(s, 32, np.random.default_rng(0)), np.arange(8) / 4)
    assert P.pi_rope_parameters(32, 8)["factor"] == 4.0


# ------------------------------------------------------------------ seeding
def _out(name, seed_or_rng, n=64):
    rng = np.random.default_rng(seed_or_rng) if isinstance(seed_or_rng, int) else seed_or_rng
    target = _view_target(name, n) if P.TRANSFORM_INFO[name].kind == "view" else 8 * n
    r = P.apply_transform(name, _sample(n), target, rng)
    return r.perturbed if isinstance(r, P.ViewPair) else r


@pytest.mark.parametrize("name", sorted(P.TRANSFORMS))
def test_same_seed_same_output(name):
    a, b = _out(name, 123), _out(name, 123)
    assert (a is None and b is None) or np.array_equal(a, b)


@pytest.mark.parametrize("name", RANDOM_TRANSFORMS)
def test_successive_examples_differ(name):
    rng = np.random.default_rng(7)
    outs = [_out(name, rng) for _ in range(4)]
    assert len({o.tobytes() for o in outs}) > 1


# ------------------------------------------------------------------ validation
def test_errors_name_value_and_range():
    s = P.PositionSample(n=10)
    with pytest.raises(ValueError, match=r"n=10 exceeds target=5; allowed n <= target"):
        P.flt(s, 5, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"unknown position transform 'nope2'.*allowed"):
        P.get_transform("nope2")
    with pytest.raises(ValueError,
                       match=r"unknown parameter\(s\) \['chunks'\]; allowed: \['first_chunk', 'num_chunks'\]"):
        P.apply_transform("pose", s, 20, np.random.default_rng(0), chunks=3)
    with pytest.raises(ValueError, match=r"first_chunk='authors'; allowed: 'paper', 'official'"):
        P.pose(s, 20, np.random.default_rng(0), first_chunk="authors")
    with pytest.raises(ValueError, match=r"num_chunks=3 with first_chunk='official'; allowed: num_chunks=None or 2"):
        P.pose(s, 20, np.random.default_rng(0), num_chunks=3, first_chunk="official")
    with pytest.raises(ValueError, match=r"split='exact'; allowed: 'paper', 'official'"):
        P.longrecipe_official(_sample(10, 3), 20, np.random.default_rng(0), split="exact")
    with pytest.raises(ValueError, match=r"split='official' needs sample.token_texts.*or use split='paper'"):
        P.longrecipe_official(P.PositionSample(n=10, sentence_starts=(0, 5)), 20, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"token_texts has 3 entries but n=10; allowed: one string per token"):
        P.PositionSample(n=10, token_texts=("a", "b", "c"))
    with pytest.raises(ValueError, match=r"num_chunks=11; allowed: an integer with 1 <= num_chunks <= 10"):
        P.pose(s, 20, np.random.default_rng(0), num_chunks=11)
    with pytest.raises(ValueError, match=r"allowed: target >= n \+ max_skip = 20"):
        P.skip_view(s, 15, np.random.default_rng(0))
    with pytest.raises(ValueError, match="sentence_starts"):
        P.longrecipe_alg1(s, 20, np.random.default_rng(0))
    with pytest.raises(ValueError, match=r"N - 1 = 4 distinct slots .* target - n = 2"):
        P.longrecipe_alg1(P.PositionSample(n=10, sentence_starts=(0, 2, 4, 6, 8)), 12, np.random.default_rng(0))
    with pytest.raises(ValueError, match="strictly increasing"):
        P.PositionSample(n=10, sentence_starts=(0, 3, 3))


# ------------------------------------------------------------------ the model stays causal
@pytest.fixture(scope="module")
def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)
    return LlamaForCausalLM(cfg).eval()


def _logits(model, ids, pos, **kw):
    with torch.no_grad():
        return model(input_ids=ids, position_ids=pos, use_cache=False, **kw).logits[0]


def test_non_contiguous_positions_need_explicit_mask(tiny_llama):
    n = 48
    pos_np = P.pose(P.PositionSample(n=n), 1024, np.random.default_rng(3), num_chunks=3)
    assert (np.diff(pos_np) != 1).sum() == 2  # two jumps
    ids = torch.randint(1, 64, (1, n), generator=torch.Generator().manual_seed(0))
    ids2 = ids.clone()
    ids2[0, 0] = (ids[0, 0] + 1) % 63 + 1
    pos = torch.from_numpy(pos_np)[None]
    ones = torch.ones(1, n, dtype=torch.long)

    full = _logits(tiny_llama, ids, pos, attention_mask=ones)
    full2 = _logits(tiny_llama, ids2, pos, attention_mask=ones)
    # fully causal: every later token sees token 0
    assert torch.all((full - full2).abs().amax(-1) > 0)
    # identical to an explicit 4-D causal mask (additive, 0 = attend)
    causal = torch.full((n, n), torch.finfo(torch.float32).min).triu(1)[None, None]
    assert torch.allclose(full, _logits(tiny_llama, ids, pos, attention_mask=causal), atol=1e-5)

    # the trap: without a mask a jump in position_ids starts a new "packed document"
    trap = _logits(tiny_llama, ids, pos)
    trap2 = _logits(tiny_llama, ids2, pos)
    first_jump = int(np.flatnonzero(np.diff(pos_np) != 1)[0]) + 1
    changed = (trap - trap2).abs().amax(-1) > 0
    assert torch.all(changed[:first_jump]) and not torch.any(changed[first_jump:])
    # contiguous ids are unaffected by the trap
    ident = torch.arange(n)[None]
    assert torch.allclose(_logits(tiny_llama, ids, ident), _logits(tiny_llama, ids, ident, attention_mask=ones))


def test_pi_linear_scaling_equals_fractional_ids():
    from transformers import LlamaConfig, LlamaForCausalLM

    kw = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
              num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096)
    torch.manual_seed(0)
    base = LlamaForCausalLM(LlamaConfig(**kw)).eval()
    scaled = LlamaForCausalLM(LlamaConfig(**kw, rope_parameters=P.pi_rope_parameters(256, 32))).eval()
    scaled.load_state_dict(base.state_dict(), strict=False)
    n = 32
    ids = torch.randint(0, 64, (1, n), generator=torch.Generator().manual_seed(1))
    frac = torch.from_numpy(P.pi(P.PositionSample(n=n), 256, np.random.default_rng(0), original=32))[None]
    ones = torch.ones(1, n, dtype=torch.long)
    a = _logits(scaled, ids, torch.arange(n)[None], attention_mask=ones)
    b = _logits(base, ids, frac, attention_mask=ones)
    assert torch.allclose(a, b, atol=1e-5)
