"""LongCE: the official windows, weights and reduction, checked against naive float64 reimplementations."""

import math
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.methods.arms import RP_ARMS
from repro.methods.longce import (LongCEConfig, longce_clm_term, longce_loss, longce_weights, per_token_ce,
                                  scored_mask, short_context_losses, window_plan)
from repro.methods.metrics import LMPass, autocast, finish_metrics
from repro.methods.selfdistill import selfdistill_loss
from repro.methods.two_view import standard_pass
from repro.models import forward, forward_hidden, plain_head_weight

V = 61


def _model(family: str = "llama", dtype=torch.float64, tie: bool = True):
    torch.manual_seed(0)
    common = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, max_position_embeddings=512, tie_word_embeddings=tie, use_cache=False)
    if family == "llama":
        model = LlamaForCausalLM(LlamaConfig(**common))
    elif family == "qwen2":
        model = Qwen2ForCausalLM(Qwen2Config(**common))
    else:
        model = Qwen3ForCausalLM(Qwen3Config(head_dim=8, **common))
    return model.to(dtype).train()


def _ids(B: int, T: int, seed: int = 1) -> torch.Tensor:
    return torch.randint(0, V, (B, T), generator=torch.Generator().manual_seed(seed))


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_grads_close(g_ours, g_ref, tol=1e-10):
    assert g_ours.keys() == g_ref.keys()
    for n in g_ref:
        err = (g_ours[n] - g_ref[n]).abs().max() / g_ref[n].abs().max().clamp_min(1e-300)
        assert err < tol, (n, float(err))


def _naive_short(model, ids, window, stride):
    """The official loop written out: one plain model call per row and window, scoring the window's last targets."""
    B, T = ids.shape
    loss = torch.zeros(B, T - 1, dtype=torch.float64)
    seen = torch.zeros(B, T - 1, dtype=torch.bool)
    with torch.no_grad():
        for b in range(B):
            start = 0
            while start < T - window:
                end = min(start + window + stride, T)
                piece = ids[b:b + 1, start:end]
                logits = model(input_ids=piece, attention_mask=torch.ones_like(piece), use_cache=False).logits[0]
                for k in range(start + window, end):  # token k, predicted from window position k - 1 - start
                    loss[b, k - 1] = F.cross_entropy(logits[k - 1 - start].double(), ids[b, k])
                    assert not seen[b, k - 1]
                    seen[b, k - 1] = True
                start += stride
    return loss, seen


# -- configuration -----------------------------------------------------------------------------------------------

def test_defaults_are_the_official_ones_and_scaled_keeps_the_ratio():
    cfg = LongCEConfig()
    assert (cfg.window, cfg.stride, cfg.max_weight, cfg.reduction) == (4096, 1024, 5.0, "mean")
    assert LongCEConfig.scaled(4096) == cfg
    tiny = LongCEConfig.scaled(256)
    assert (tiny.window, tiny.stride, tiny.max_weight) == (256, 64, 5.0)
    assert LongCEConfig.scaled(3).stride == 1
    assert LongCEConfig.scaled(256, max_weight=3.0).max_weight == 3.0


@pytest.mark.parametrize("kwargs, message", [
    (dict(window=1), r"window=1; allowed: an integer >= 2"),
    (dict(window=8, stride=0), r"stride=0; allowed: an integer with 1 <= stride <= window=8"),
    (dict(window=8, stride=9), r"stride=9; allowed: an integer with 1 <= stride <= window=8"),
    (dict(max_weight=0.0), r"max_weight=0.0; allowed: > 0"),
    (dict(reduction="sum"), r"reduction='sum'; allowed: mean, weighted_mean"),
])
def test_bad_config_is_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        LongCEConfig(**kwargs)
    with pytest.raises(ValueError, match=r"base_window=1; allowed"):
        LongCEConfig.scaled(1)


@pytest.mark.parametrize("T", [256, 257, 300, 1000, 1024])
def test_window_plan_scores_every_target_from_window_minus_one_once(T):
    cfg = LongCEConfig.scaled(256)
    plan = window_plan(T, cfg)
    covered = [t for s, n in plan for t in range(s + cfg.window - 1, s + cfg.window - 1 + n)]
    assert covered == list(range(cfg.window - 1, T - 1))  # in order, no gaps, no repeats
    assert all(s % cfg.stride == 0 and 1 <= n <= cfg.stride for s, n in plan)
    assert scored_mask(2, T, cfg).sum(1).tolist() == [len(covered)] * 2
    if T == 1024:
        assert plan == [(s, 64) for s in range(0, 768, 64)]  # 12 windows of 320 tokens
    if T == 1000:
        assert plan[-1] == (704, 40)


# -- the weights ---------------------------------------------------------------------------------------------------

def test_weight_formula_clips_above_only_and_leaves_unscored_targets_at_one():
    short = torch.tensor([[2.0, 2.0, 9.0, 0.5, 4.0, 1.2]], dtype=torch.float64)
    full = torch.tensor([[1.0, 2.0, 0.1, 3.5, 4.0 - math.log(5.0), 1.0]], dtype=torch.float64)
    mask = torch.tensor([[True, True, True, True, True, False]])
    w = longce_weights(short, full, mask, 5.0)
    assert float(w[0, 0]) == pytest.approx(math.exp(1.0), rel=1e-15)  # below the clip: exp(loss_short - loss_full)
    assert w[0, 1] == 1.0  # same loss either way
    assert w[0, 2] == 5.0  # clipped exactly at max_weight
    assert float(w[0, 3]) == pytest.approx(math.exp(-3.0), rel=1e-15)  # long context hurts: below 1, no lower clip
    assert abs(float(w[0, 4]) - 5.0) < 1e-12
    assert w[0, 5] == 1.0  # no short score
    assert not w.requires_grad
    g = longce_weights(short, full.clone().requires_grad_(), mask, 5.0)
    assert not g.requires_grad


class LookBack(torch.nn.Module):
    """A hand-built scorer: predicts token p+1 as a copy of token p+1-dist (logit `scale`) when that token is in
    its input, uniformly otherwise. Its logits depend on the input slice only, like a model with a fixed reach."""

    def __init__(self, dist: int, scale: float = 20.0):
        super().__init__()
        self.dist, self.scale = dist, scale

    def forward(self, input_ids, position_ids=None, attention_mask=None, use_cache=False):
        B, L = input_ids.shape
        logits = torch.zeros(B, L, V, dtype=torch.float64)
        src = torch.arange(L) + 1 - self.dist
        ok = src >= 0
        logits[:, ok] = self.scale * F.one_hot(input_ids[:, src[ok]], V).double()
        return SimpleNamespace(logits=logits)


@pytest.mark.parametrize("dist", [12, 10])
def test_targets_whose_source_lies_beyond_the_short_window_are_clipped_at_five(dist):
    window, stride, T = 8, 4, 40
    cfg = LongCEConfig(window=window, stride=stride)
    scorer = LookBack(dist)
    ids = _ids(2, dist, seed=3)[:, torch.arange(T) % dist]  # period dist: token k repeats token k - dist
    full = weighted_clm_loss(forward(scorer, ids).logits, ids, torch.ones(2, T, dtype=torch.float64))[1]
    short, mask = short_context_losses(scorer, ids, cfg)
    w = longce_weights(short, full, mask, cfg.max_weight)
    expected = torch.ones(T - 1, dtype=torch.float64)
    for t in range(window - 1, T - 1):
        start = (t + 1 - window) // stride * stride  # the window that scores target t
        visible_full, visible_short = t + 1 - dist >= 0, t + 1 - dist >= start
        if visible_full and not visible_short:
            expected[t] = 5.0
    assert torch.equal(w, expected.expand(2, -1))  # exact: 5.0 at the clip, exp(0) = 1.0 elsewhere
    assert float(expected.sum()) > T - 1  # some targets are clipped
    if dist == 12:  # source always beyond the short context (window + stride = 12): every target from 11 on
        assert expected[:11].eq(1).all() and expected[11:].eq(5).all()
        assert torch.allclose(short[:, 11:], torch.full_like(short[:, 11:], math.log(V)))


# -- the short-context losses ------------------------------------------------------------------------------------

@pytest.mark.parametrize("T, window, stride", [(8, 8, 2), (6, 8, 3), (9, 8, 8), (40, 8, 4), (43, 8, 3),
                                               (37, 16, 16), (50, 5, 1)])
@pytest.mark.parametrize("chunked", [True, False])
def test_short_losses_equal_a_window_by_window_loop(T, window, stride, chunked):
    model = _model()
    ids = _ids(3, T)
    cfg = LongCEConfig(window=window, stride=stride)
    ours, mask = short_context_losses(model, ids, cfg, chunk=7, chunked=chunked, max_pass_tokens=50)
    ref, seen = _naive_short(model, ids, window, stride)
    assert ours.dtype == torch.float64 and ours.shape == (3, T - 1)
    assert torch.equal(mask, seen)
    assert (ours - ref).abs().max() < 1e-10
    assert not (ours[~mask] != 0).any()


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_short_losses_on_qwen(family):
    model = _model(family)
    ids = _ids(2, 29)
    ours, mask = short_context_losses(model, ids, LongCEConfig(window=8, stride=3))
    ref, seen = _naive_short(model, ids, 8, 3)
    assert torch.equal(mask, seen) and (ours - ref).abs().max() < 1e-10


def test_positions_given_as_arange_change_nothing_and_first_window_weights_are_one():
    model = _model()
    ids = _ids(2, 40)
    cfg = LongCEConfig(window=12, stride=5)
    a, mask = short_context_losses(model, ids, cfg)
    b, _ = short_context_losses(model, ids, cfg, position_ids=torch.arange(40).expand(2, 40))
    assert (a - b).abs().max() < 1e-12
    with torch.no_grad():
        full = per_token_ce(forward_hidden(model, ids), plain_head_weight(model), ids)
    w = longce_weights(a, full, mask)
    assert torch.equal(w[:, :cfg.window - 1], torch.ones(2, cfg.window - 1, dtype=w.dtype))  # never scored
    # the first window is a prefix of the row: its targets see the full context, so exp(0) = 1 up to rounding
    first = w[:, cfg.window - 1:cfg.window - 1 + cfg.stride]
    assert (first - 1).abs().max() < 1e-10
    assert (w[:, cfg.window - 1 + cfg.stride:] - 1).abs().max() > 1e-3  # later windows do differ


@pytest.mark.parametrize("restart", [True, False])
def test_packed_rows_keep_document_masks_inside_windows(restart):
    model = _model()
    T, cut, window, stride = 48, 20, 16, 4
    ids = _ids(1, T, seed=5)
    doc = torch.tensor([[0] * cut + [1] * (T - cut)])
    pos = torch.cat([torch.arange(cut), torch.arange(T - cut)])[None] if restart else None
    short, mask = short_context_losses(model, ids, LongCEConfig(window=window, stride=stride), doc, pos)
    with torch.no_grad():
        for t in range(window - 1, T - 1):
            k = t + 1
            start = (t + 1 - window) // stride * stride
            first = max(start, 0 if t < cut else cut)  # position t's context: its own document inside the window
            piece = ids[:, first:k + 1]
            # positions: from 0 at the window's start (without restarts) or at the document's start (with them)
            at = torch.arange(k + 1 - first)[None] + (0 if restart or first == start else first - start)
            logits = model(input_ids=piece, position_ids=at, attention_mask=torch.ones_like(piece),
                           use_cache=False).logits[0, -2]
            assert abs(float(short[0, t]) - float(F.cross_entropy(logits, ids[0, k]))) < 1e-10, t
        full = per_token_ce(forward_hidden(model, ids, pos, doc), plain_head_weight(model), ids)
    w = longce_weights(short, full, mask)
    # document 1 starts inside the windows starting at or before it: there the short context is the whole document.
    # Without restarts its positions in a window differ from the full row's by the window's start; transformers
    # computes RoPE angles in float32, so the shift costs ~1e-10 there even in float64
    tol = 1e-12 if restart else 1e-8
    for t in range(cut, T - 1):
        if (t + 1 - window) // stride * stride <= cut:
            assert abs(float(w[0, t]) - 1) < tol, t


# -- the loss ------------------------------------------------------------------------------------------------------

def _data(B=3, T=30, seed=2):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, V, (B, T), generator=g)
    d = torch.rand(B, T, generator=g, dtype=torch.float64)
    d[d < 0.3] = 0.0
    lw = 0.2 + 4.8 * torch.rand(B, T - 1, generator=g, dtype=torch.float64)
    lw[:, ::5] = 5.0
    lw[:, 1::7] = 1.0
    return ids, torch.arange(T).expand(B, T), d, lw


@pytest.mark.parametrize("tie", [True, False])
@pytest.mark.parametrize("chunk", [1, 16, 4096])
def test_longce_loss_and_gradients_equal_the_naive_formula(tie, chunk):
    model = _model(tie=tie)
    ids, pos, d, lw = _data()
    _, ce = weighted_clm_loss(forward(model, ids, pos).logits, ids, d)
    ref = (ce * d[:, 1:] * lw).sum() / d[:, 1:].sum()
    g_ref = _grads(model, ref)
    ours = longce_loss(forward_hidden(model, ids, pos), plain_head_weight(model), ids, d, lw, chunk=chunk)
    g_ours = _grads(model, ours)
    assert abs(float(ours.detach()) - float(ref.detach())) <= 1e-12 * abs(float(ref.detach()))
    _assert_grads_close(g_ours, g_ref)


def test_all_ones_longce_weights_give_the_plain_chunked_loss_exactly():
    model = _model()
    ids, pos, d, _ = _data()
    ones = torch.ones(ids.shape[0], ids.shape[1] - 1, dtype=torch.float64)
    ours = longce_loss(forward_hidden(model, ids, pos), plain_head_weight(model), ids, d, ones, chunk=16)
    g_ours = _grads(model, ours)
    plain = chunked_clm_loss(forward_hidden(model, ids, pos), plain_head_weight(model), ids, d, chunk=16)
    g_plain = _grads(model, plain)
    assert float(ours.detach()) == float(plain.detach())  # the same code path, bit for bit
    assert all(torch.equal(g_ours[n], g_plain[n]) for n in g_plain)
    ref, _ = weighted_clm_loss(forward(model, ids, pos).logits, ids, d)
    assert abs(float(ours.detach()) - float(ref.detach())) <= 1e-12 * float(ref.detach())


def test_reduction_is_the_official_undivided_mean():
    model = _model()
    ids, pos, _, lw = _data()
    ones = torch.ones(ids.shape, dtype=torch.float64)
    _, ce = weighted_clm_loss(forward(model, ids, pos).logits, ids, ones)
    ce = ce.detach()
    official = torch.mean(ce * lw)  # the official reduction over all targets
    normalised = (ce * lw).sum() / lw.sum()
    assert abs(float(lw.mean()) - 1) > 0.5  # the weights' sum differs from the token count
    hidden = forward_hidden(model, ids, pos)
    head = plain_head_weight(model)
    ours = longce_loss(hidden, head, ids, ones, lw)
    assert abs(float(ours.detach()) - float(official)) < 1e-12 * float(official)
    assert abs(float(ours.detach()) - float(normalised)) > 0.1 * float(official)
    alt = longce_loss(hidden, head, ids, ones, lw, reduction="weighted_mean")
    assert abs(float(alt.detach()) - float(normalised)) < 1e-12 * float(normalised)


def longce_step(model, batch, cfg, bf16=False, chunked=True, chunk=2048):
    """The LongCE arm's objective as it trains (``rp_longce``: the self-distillation loss with the standard view's CLM
    term LongCE-weighted and no consistency term); ``chunked=False``: the same term on the model's logits (the path of
    models without a plain head)."""
    if chunked:
        return selfdistill_loss(model, batch, RP_ARMS["rp_longce"].spec, bf16, cfg, chunk)
    with autocast(batch["input_ids"], bf16):
        hidden = standard_pass(model, batch["input_ids"], batch["position_ids"], batch.get("doc_ids"))[0]
    loss, metrics = longce_clm_term(model, hidden, batch, None, bf16, cfg, chunk)
    return finish_metrics(loss, metrics, LMPass(), batch)


def _official_like_loss(model, ids, cfg):
    """Per row as the official code (batch size 1, every token weighted 1), then the mean over all targets."""
    terms = []
    for b in range(ids.shape[0]):
        row = ids[b:b + 1]
        logits = model(input_ids=row, attention_mask=torch.ones_like(row), use_cache=False).logits[0]
        ce = F.cross_entropy(logits[:-1], row[0, 1:], reduction="none")
        short, seen = _naive_short(model, row, cfg.window, cfg.stride)
        w = torch.where(seen[0], torch.exp(short[0] - ce.detach()), torch.ones_like(ce)).clamp(max=cfg.max_weight)
        terms.append(ce * w)
    return torch.mean(torch.cat(terms))


@pytest.mark.parametrize("family, chunked", [("llama", True), ("llama", False), ("qwen3", True)])
def test_the_longce_arm_equals_the_official_computation(family, chunked):
    model = _model(family, tie=family == "llama")
    ids = _ids(2, 41, seed=7)
    cfg = LongCEConfig(window=10, stride=4)
    ref = _official_like_loss(model, ids, cfg)
    g_ref = _grads(model, ref)
    batch = {"input_ids": ids, "position_ids": torch.arange(41).expand(2, 41),
             "weights": torch.ones(ids.shape, dtype=torch.float64)}
    loss, metrics = longce_step(model, batch, cfg, bf16=False, chunked=chunked, chunk=9)
    g_ours = _grads(model, loss)
    assert abs(float(loss.detach()) - float(ref.detach())) < 1e-12 * float(ref.detach())
    _assert_grads_close(g_ours, g_ref)
    assert metrics["loss"] == float(loss.detach())
    assert 0 < metrics["longce_mean_weight"] <= cfg.max_weight
    assert 0 <= metrics["longce_clipped_fraction"] <= 1


def test_the_longce_arm_without_scored_targets_is_the_clm_step():
    from repro.train import clm_step

    model = _model()
    ids, pos, d, _ = _data(T=20)
    batch = {"input_ids": ids, "position_ids": pos, "weights": d}
    loss, metrics = longce_step(model, batch, LongCEConfig(window=20, stride=5), bf16=False)
    plain, _ = clm_step(model, batch, bf16=False)
    assert float(loss.detach()) == float(plain.detach())
    assert metrics["longce_mean_weight"] == 1.0 and metrics["longce_clipped_fraction"] == 0.0


def test_bf16_step_runs_and_stays_close_to_fp32():
    model = _model(dtype=torch.float32)
    ids = _ids(2, 48)
    batch = {"input_ids": ids, "position_ids": torch.arange(48).expand(2, 48), "weights": torch.ones(ids.shape),
             "answer_group": torch.full(ids.shape, -1).index_fill_(1, torch.tensor([40, 41]), 0)}
    cfg = LongCEConfig(window=16, stride=4)
    loss32, m32 = longce_step(model, batch, cfg, bf16=False)
    loss16, m16 = longce_step(model, batch, cfg, bf16=True)
    assert loss16.dtype == torch.float32 and torch.isfinite(loss16)
    assert abs(float(loss16.detach()) - float(loss32.detach())) < 3e-2 * float(loss32.detach())
    assert all(torch.isfinite(g).all() for g in _grads(model, loss16).values())
    assert set(m16) == {"loss", "clm", "longce_mean_weight", "longce_clipped_fraction", "train_em"}
