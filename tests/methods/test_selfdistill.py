"""RoPE-perturbed self-distillation: the KL on hand-computed distributions, the prefix-shared pass against two
full passes (loss and every parameter gradient, float64 and fp32), s = 0, lambda = 0, and the perturbations that
must change nothing outside their pass."""

import math

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config, Qwen3ForCausalLM

from repro.loss import chunked_kl_loss, kl_from_logits
from repro.methods.perturb import attention_noise, no_rope
from repro.methods.selfdistill import SelfDistillSpec, draw_view, selfdistill_batch, selfdistill_loss
from repro.models import forward
from repro.train import clm_step

V = 97
COMMON = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
              num_key_value_heads=2, max_position_embeddings=512, use_cache=False, attn_implementation="sdpa",
              initializer_range=0.3, rope_theta=100.0)
"""Large init and a small RoPE base: a random model whose outputs depend clearly on positions (KLs of order 1)."""


def _model(family="llama", dtype=torch.float64, **kw):
    torch.manual_seed(0)
    cls = {"llama": (LlamaConfig, LlamaForCausalLM), "qwen2": (Qwen2Config, Qwen2ForCausalLM),
           "qwen3": (Qwen3Config, Qwen3ForCausalLM)}[family]
    extra = {"head_dim": 8} if family == "qwen3" else {}
    return cls[1](cls[0](**{**COMMON, **extra, **kw})).to(dtype)


def _batch(split, y, T=24, seed=1, doc_ids=None):
    g = torch.Generator().manual_seed(seed)
    B = len(split)
    ids = torch.randint(0, V, (B, T), generator=g)
    w = torch.rand(B, T, generator=g, dtype=torch.float64)
    pos = torch.arange(T).repeat(B, 1)
    split, y = torch.tensor(split), torch.tensor(y)
    pert = torch.where(pos < split[:, None], pos, pos + y[:, None])
    b = {"input_ids": ids, "position_ids": pos, "weights": w, "perturbed_position_ids": pert, "split": split,
         "kl_mask": pos >= split[:, None]}
    if doc_ids is not None:
        b["doc_ids"] = doc_ids
    return b


def _grads(model, loss):
    model.zero_grad(set_to_none=True)
    loss.backward()
    return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


def _assert_close(a, b, tol):
    assert a.keys() == b.keys()
    for n in a:
        err = (a[n] - b[n]).abs().max().item()
        scale = max(b[n].abs().max().item(), 1e-30)
        assert err <= tol * max(1.0, scale), (n, err, scale)


# -- the KL itself -------------------------------------------------------------------------------------------
def test_kl_hand_computed():
    p, q = torch.tensor([0.7, 0.2, 0.1], dtype=torch.float64), torch.tensor([0.5, 0.25, 0.25], dtype=torch.float64)
    # by hand: KL(p || q) = .7 ln 1.4 + .2 ln .8 + .1 ln .4; KL(q || p) = .5 ln(5/7) + .25 ln 1.25 + .25 ln 2.5
    rev = 0.7 * math.log(1.4) + 0.2 * math.log(0.8) + 0.1 * math.log(0.4)
    fwd = 0.5 * math.log(5 / 7) + 0.25 * math.log(1.25) + 0.25 * math.log(2.5)
    assert rev == pytest.approx(0.09927, abs=1e-5) and fwd == pytest.approx(0.11662, abs=1e-5)
    zs, zt = p.log() + 3.0, q.log() - 1.0  # logits are defined up to a constant
    assert kl_from_logits(zs, zt, "reverse").item() == pytest.approx(rev, abs=1e-15)
    assert kl_from_logits(zs, zt, "forward").item() == pytest.approx(fwd, abs=1e-15)
    with pytest.raises(ValueError, match="direction='sideways'; allowed: reverse, forward"):
        kl_from_logits(zs, zt, "sideways")


@pytest.mark.parametrize("direction", ["reverse", "forward"])
@pytest.mark.parametrize("chunk", [1, 5, 1000])
def test_chunked_kl_equals_naive_float64(direction, chunk):
    g = torch.Generator().manual_seed(0)
    hs = torch.randn(13, 8, dtype=torch.float64, generator=g, requires_grad=True)
    ht = torch.randn(13, 8, dtype=torch.float64, generator=g, requires_grad=True)
    W = torch.randn(V, 8, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.rand(13, dtype=torch.float64, generator=g)
    w[3] = 0.0
    ref = (kl_from_logits(hs @ W.T, ht @ W.T, direction) * w).sum()
    gs, gw = torch.autograd.grad(ref, (hs, W))
    ours = chunked_kl_loss(hs, ht, W, w, direction, chunk)
    os_, ow = torch.autograd.grad(ours, (hs, W))
    assert abs(ours.item() - ref.item()) < 1e-12
    assert (os_ - gs).abs().max() < 1e-12 and (ow - gw).abs().max() < 1e-12
    assert torch.autograd.grad(chunked_kl_loss(hs, ht, W, w, direction, chunk), ht, allow_unused=True)[0] is None


# -- the prefix-shared pass ------------------------------------------------------------------------------------
CASES = [([0, 0], [5, 9]), ([7, 7], [3, 3]), ([0, 5, 17], [4, 24, 1]), ([23, 1, 12], [2, 11, 30])]


def _kl_only(model, batch, spec, shared):
    """The consistency term alone, through the objective's own pieces (its gradient is the KL's)."""
    from repro.methods.selfdistill import kl_term
    from repro.methods.two_view import perturbed_hidden_naive, perturbed_hidden_shared, standard_pass
    from repro.models import plain_head_weight

    ids, pert = batch["input_ids"], batch["perturbed_position_ids"]
    hidden, cache = standard_pass(model, ids, batch["position_ids"], batch.get("doc_ids"), cache=shared)
    p = perturbed_hidden_shared(model, ids, pert, batch["split"], hidden, cache, batch.get("doc_ids")) if shared \
        else perturbed_hidden_naive(model, ids, pert, batch.get("doc_ids"))
    return kl_term(model, p, hidden.detach(), batch["kl_mask"], plain_head_weight(model), spec.direction, False)


@pytest.mark.parametrize("split,y", CASES)
@pytest.mark.parametrize("family", ["llama", "qwen3"])
def test_shared_prefix_equals_two_passes_float64(split, y, family):
    """Loss to 1e-10 and the KL term's gradient to 1e-10. The whole objective's gradient agrees to float32
    rounding only: transformers' RMSNorm computes in float32 even in a float64 model, and the shared path
    sends the CLM and KL gradients through the same norm calls (their sum is rounded once there)."""
    model = _model(family)
    batch = _batch(split, y)
    spec = SelfDistillSpec()
    ref, m_ref = selfdistill_loss(model, batch, spec.with_(shared_prefix=False))
    g_ref = _grads(model, ref)
    ours, m_ours = selfdistill_loss(model, batch, spec)
    g_ours = _grads(model, ours)
    assert abs(ours.item() - ref.item()) < 1e-10
    assert abs(m_ours["consistency"] - m_ref["consistency"]) < 1e-10
    _assert_close(_grads(model, _kl_only(model, batch, spec, True)),
                  _grads(model, _kl_only(model, batch, spec, False)), 1e-10)
    _assert_close(g_ours, g_ref, 1e-6)
    if any(split):
        assert m_ref["consistency"] > 1e-2  # the views differ: the test is not vacuous


def test_shared_prefix_equals_two_passes_with_documents_and_fp32():
    doc = torch.tensor([[0] * 10 + [1] * 14, [0] * 24, [0] * 5 + [1] * 5 + [2] * 14])
    for dtype, tol in ((torch.float64, 1e-10), (torch.float32, 2e-5)):
        model = _model(dtype=dtype)
        batch = _batch([4, 12, 7], [6, 2, 20], doc_ids=doc)
        spec = SelfDistillSpec(direction="forward")
        ref, _ = selfdistill_loss(model, batch, spec.with_(shared_prefix=False))
        g_ref = _grads(model, ref)
        ours, _ = selfdistill_loss(model, batch, spec)
        assert abs(ours.item() - ref.item()) < tol
        _assert_close(_grads(model, ours), g_ref, max(tol, 1e-6))
        _assert_close(_grads(model, _kl_only(model, batch, spec, True)),
                      _grads(model, _kl_only(model, batch, spec, False)), tol)


def test_split_zero_shift_is_invisible_to_rope():
    """s = 0 shifts every index by y: relative offsets are unchanged, so the KL vanishes to float precision
    (transformers computes RoPE angles in float32: an angle of ~200 rad carries ~1e-5 rad of rounding)."""
    model = _model()
    _, m = selfdistill_loss(model, _batch([0, 3, 9], [5, 5, 5]), SelfDistillSpec())
    assert m["consistency"] > 0.1
    for y in (1, 7, 200):
        _, m = selfdistill_loss(model, _batch([0, 0, 0], [y, y, y]), SelfDistillSpec())
        assert m["consistency"] < 1e-7


def test_lambda_zero_is_standard_exactly():
    model = _model()
    batch = _batch([3, 10], [4, 20])
    ref, _ = clm_step(model, batch, bf16=False)
    g_ref = _grads(model, ref)
    ours, _ = selfdistill_loss(model, batch, SelfDistillSpec(lam=0.0))
    assert ours.item() == ref.item()
    g = _grads(model, ours)
    assert all(torch.equal(g[n], g_ref[n]) for n in g_ref)


def test_objective_is_clm_plus_lambda_kl():
    model = _model()
    batch = _batch([3, 10], [4, 20])
    _, m1 = selfdistill_loss(model, batch, SelfDistillSpec(lam=1.0))
    l2, m2 = selfdistill_loss(model, batch, SelfDistillSpec(lam=2.0))
    assert l2.item() == pytest.approx(m1["clm"] + 2.0 * m1["consistency"], abs=1e-12)
    # naive per-row mean over suffix positions, then over rows
    h_std = forward(model, batch["input_ids"], batch["position_ids"]).logits
    h_pert = forward(model, batch["input_ids"], batch["perturbed_position_ids"]).logits
    kl = kl_from_logits(h_pert, h_std)
    rows = [kl[b, s:].mean() for b, s in enumerate(batch["split"].tolist())]
    assert m1["consistency"] == pytest.approx(torch.stack(rows).mean().item(), abs=1e-12)


# -- perturbations outside the index ------------------------------------------------------------------------------
def test_nope_and_attention_noise_change_nothing_outside_their_pass():
    model = _model()
    ids, pos = torch.randint(0, V, (2, 16)), torch.arange(16).repeat(2, 1)
    before = forward(model, ids, pos).logits
    with no_rope(model):
        a = forward(model, ids, pos).logits
        assert torch.equal(a, forward(model, ids, pos * 3 + 11).logits)  # no position information at all
    assert (a - before).abs().max() > 1e-4
    assert torch.equal(forward(model, ids, pos).logits, before)
    torch.manual_seed(5)
    with attention_noise(model, 0.0):
        assert (forward(model, ids, pos).logits - before).abs().max() < 1e-12  # the noisy kernel is exact at 0
    with attention_noise(model, 1.0):
        assert (forward(model, ids, pos).logits - before).abs().max() > 1e-3
    assert model.config._attn_implementation == "sdpa" and torch.equal(forward(model, ids, pos).logits, before)
    with pytest.raises(RuntimeError, match="boom"):
        with attention_noise(model, 1.0):
            raise RuntimeError("boom")
    assert model.config._attn_implementation == "sdpa"


@pytest.mark.parametrize("spec", [SelfDistillSpec(view="nope"), SelfDistillSpec(view="none",
                                                                               perturbation="attention_noise")])
def test_perturbed_pass_only(spec):
    """The standard pass inside the objective is untouched: its CLM equals a plain step's."""
    model = _model()
    batch = _batch([0, 0], [1, 1])
    torch.manual_seed(0)
    _, m = selfdistill_loss(model, batch, spec)
    ref, _ = clm_step(model, batch, bf16=False)
    assert m["clm"] == ref.item() and m["consistency"] > 1e-6


def test_dropout_control_needs_dropout():
    batch = _batch([0, 0], [1, 1])
    spec = SelfDistillSpec(view="none", perturbation="dropout")
    with pytest.raises(ValueError, match="attention_dropout > 0"):
        selfdistill_loss(_model().train(), batch, spec)
    model = _model(attention_dropout=0.3).train()
    _, m = selfdistill_loss(model, batch, spec)
    assert m["consistency"] > 1e-6
    model.eval()  # eval mode: no dropout, two passes agree
    with pytest.raises(ValueError, match="training=False"):
        selfdistill_loss(model, batch, spec)


def test_pose_baseline_is_clm_on_perturbed_view():
    model = _model()
    batch = _batch([5, 9], [10, 3])
    loss, _ = selfdistill_loss(model, batch, SelfDistillSpec(consistency="none", standard_clm=False))
    pert = dict(batch, position_ids=batch["perturbed_position_ids"])
    assert loss.item() == pytest.approx(clm_step(model, pert, bf16=False)[0].item(), abs=1e-12)


@pytest.mark.parametrize("family", ["qwen2", "qwen3"])
def test_other_families_run_and_match(family):
    model = _model(family)
    batch = _batch([4, 11], [9, 2])
    spec = SelfDistillSpec(consistency="clm", lam=0.5)
    ref, _ = selfdistill_loss(model, batch, spec.with_(shared_prefix=False))
    ours, _ = selfdistill_loss(model, batch, spec)
    assert abs(ours.item() - ref.item()) < 1e-10


# -- views --------------------------------------------------------------------------------------------------------
def test_draw_view_skip_ranges():
    rng = np.random.default_rng(0)
    n = 50
    spec = SelfDistillSpec()
    ss, ys = [], []
    for _ in range(2000):
        pert, s = draw_view(spec, n, rng)
        y = int(pert[-1] - (n - 1))
        assert (pert[:s] == np.arange(s)).all() and (pert[s:] == np.arange(s, n) + y).all()
        ss.append(s)
        ys.append(y)
    assert min(ss) == 0 and max(ss) == n - 1 and min(ys) == 1 and max(ys) == n  # s ~ U{0..L-1}, y ~ U{1..L}
    assert spec.max_index(n) == 2 * n - 1 == n - 1 + max(ys)  # the largest index a view reached
    pert, s = draw_view(SelfDistillSpec(fixed_split=True), n, rng)
    assert s == 25 and pert[-1] == n - 1 + 25
    assert SelfDistillSpec(max_skip=2.0).max_index(n) == n - 1 + 2 * n


def test_spec_errors_name_the_value():
    with pytest.raises(ValueError, match="view='spin'; allowed: skip, cyclic"):
        SelfDistillSpec(view="spin")
    with pytest.raises(ValueError, match="use view='none'"):
        SelfDistillSpec(perturbation="dropout")
    with pytest.raises(ValueError, match="max_skip=0; allowed: > 0"):
        SelfDistillSpec(max_skip=0)
    with pytest.raises(ValueError, match="consistency='none'"):
        SelfDistillSpec(standard_clm=False)


# -- a training loop of one's own --------------------------------------------------------------------------------
def test_selfdistill_batch_in_a_plain_training_loop():
    """What a user does with their own HF model (here a random Qwen2): build batches with ``selfdistill_batch``,
    train with ``selfdistill_loss``; pads get no loss and no KL; the loss falls on a memorisable batch."""
    model = _model("qwen2", torch.float32)
    pad = 0
    ids = torch.randint(1, V, (4, 32), generator=torch.Generator().manual_seed(3))
    ids[1, -5:] = pad
    rng = np.random.default_rng(0)
    b = selfdistill_batch(ids, SelfDistillSpec(), rng, pad_id=pad)
    assert b["weights"][1, -5:].sum() == 0 and not b["kl_mask"][1, -5:].any()
    for r in range(4):
        s = int(b["split"][r])
        assert torch.equal(b["perturbed_position_ids"][r, :s], torch.arange(s))
        assert bool((b["perturbed_position_ids"][r, s:] > torch.arange(s, 32)).all())
        assert b["kl_mask"][r, :s].sum() == 0
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(25):
        loss, metrics = selfdistill_loss(model, selfdistill_batch(ids, SelfDistillSpec(), rng, pad_id=pad),
                                         SelfDistillSpec())
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
        assert math.isfinite(metrics["consistency"])
    assert losses[-1] < 0.5 * losses[0]
    with pytest.raises(ValueError, match=r"input_ids of shape \(32,\)"):
        selfdistill_batch(ids[0], SelfDistillSpec(), rng)
