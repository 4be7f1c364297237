"""Context Denoising Training: detection computes no weight gradient and marks exactly the tokens below the mean,
denoising moves only noise-token embeddings by lr * beta * grad, beta = 0 is exactly the CE step, the loss is the
CE on the denoised embeddings, and the method runs in the trainer and in a plain loop on another family."""

import math

import pytest
import torch

from repro.methods.cdt import (CDTSpec, ContextDenoising, cdt_loss, denoise, embedding_gradients, frozen, noise_mask,
                               norm_masks, perturb)
from repro.methods.protocol import StepState
from repro.models import forward
from repro.train import Trainer, TrainConfig, clm_step
from tests.methods.test_selfdistill import V, _grads, _model  # random models whose outputs depend on positions


def _batch(B=2, T=24, seed=1, doc_ids=None, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    b = {"input_ids": torch.randint(3, V, (B, T), generator=g), "position_ids": torch.arange(T).repeat(B, 1),
         "weights": torch.rand(B, T, generator=g, dtype=dtype)}
    if doc_ids is not None:
        b["doc_ids"] = doc_ids
    return b


def test_detection_computes_no_weight_gradient_and_matches_full_backward():
    model = _model()
    batch = _batch()
    grad, loss = embedding_gradients(model, batch)
    assert all(p.grad is None for p in model.parameters())
    assert all(p.requires_grad for p in model.parameters())
    # the same gradient from an ordinary backward with inputs_embeds as a leaf (float64)
    e = model.get_input_embeddings()(batch["input_ids"]).detach().requires_grad_(True)
    ref, _ = clm_step_from_embeds(model, batch, e)
    ref.backward()
    assert torch.allclose(grad, e.grad, rtol=1e-12, atol=1e-15)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-14)


def clm_step_from_embeds(model, batch, e):
    from repro.loss import weighted_clm_loss

    out = forward(model, batch["input_ids"], batch["position_ids"], batch.get("doc_ids"), inputs_embeds=e)
    return weighted_clm_loss(out.logits, batch["input_ids"], batch["weights"])


def test_frozen_restores_flags_after_an_error():
    model = _model()
    model.model.norm.weight.requires_grad_(False)
    with pytest.raises(RuntimeError, match="boom"):
        with frozen(model):
            assert not any(p.requires_grad for p in model.parameters())
            raise RuntimeError("boom")
    assert not model.model.norm.weight.requires_grad
    assert sum(not p.requires_grad for p in model.parameters()) == 1


def test_noise_mask_marks_exactly_the_tokens_below_the_mean():
    norms = torch.tensor([[1.0, 2.0, 3.0, 10.0, 0.5, 9.0], [4.0, 4.0, 4.0, 4.0, 1.0, 7.0]])
    valid = torch.tensor([[True] * 6, [True, True, True, True, True, False]])
    # rows: mean 25.5/6 = 4.25; row 2 over its 5 valid tokens: 17/5 = 3.4
    got = noise_mask(norms, valid)
    assert got.tolist() == [[True, True, True, False, True, False], [False, False, False, False, True, False]]
    # per document: row 0 has documents [0,0,0 | 1,1,1]: means 2 and 6.5
    docs = torch.tensor([[0, 0, 0, 1, 1, 1], [0, 0, 0, 0, 0, 0]])
    got = noise_mask(norms, valid, docs, "document")
    assert got[0].tolist() == [True, False, False, False, True, False]
    # the authors' trainer: one mean over the packed row
    assert noise_mask(norms, valid, docs, "row")[0].tolist() == [True, True, True, False, True, False]
    # equal norms are not below their mean; padding is never noise
    assert not noise_mask(torch.ones(1, 4), torch.ones(1, 4, dtype=torch.bool)).any()
    with pytest.raises(ValueError, match="threshold='sequence'; allowed: document, row"):
        noise_mask(norms, valid, threshold="sequence")


def test_denoise_moves_only_noise_embeddings_by_lr_beta_grad():
    g = torch.Generator().manual_seed(0)
    e, grad = torch.randn(2, 5, 4, generator=g, dtype=torch.float64), torch.randn(2, 5, 4, generator=g,
                                                                                      dtype=torch.float64)
    noise = torch.tensor([[True, False, True, False, False], [False, False, False, False, True]])
    out = denoise(e, grad, noise, lr=1e-3, beta=5.0)
    assert torch.equal(out[~noise], e[~noise])
    assert torch.allclose(out[noise] - e[noise], -5e-3 * grad[noise], rtol=1e-12, atol=0)


def test_beta_zero_is_exactly_the_ce_step():
    model = _model(dtype=torch.float32)
    batch = _batch(dtype=torch.float32)
    ref, _ = clm_step(model, batch, bf16=False)
    g_ref = _grads(model, ref)
    ours, m = cdt_loss(model, batch, CDTSpec(beta=0.0), lr=1e-3)
    assert ours.item() == ref.item()
    g = _grads(model, ours)
    assert g.keys() == g_ref.keys() and all(torch.equal(g[n], g_ref[n]) for n in g_ref)
    assert "noise_fraction" not in m


def test_loss_is_ce_on_denoised_embeddings_and_gradient_reaches_the_table():
    model = _model()
    batch = _batch(doc_ids=torch.tensor([[0] * 10 + [1] * 14, [0] * 24]))
    spec, lr = CDTSpec(beta=50.0), 1e-2
    loss, m = cdt_loss(model, batch, spec, lr)
    # by hand: detection, Eq. 2 per document, Eq. 3, CE on E'
    e = model.get_input_embeddings()(batch["input_ids"]).detach().requires_grad_(True)
    ce, _ = clm_step_from_embeds(model, {**batch}, e)
    ce.backward()
    norms = e.grad.norm(dim=-1)
    noise = torch.zeros_like(norms, dtype=torch.bool)
    for r in range(2):
        for d in batch["doc_ids"][r].unique():
            sel = batch["doc_ids"][r] == d
            noise[r, sel] = norms[r, sel] < norms[r, sel].mean()
    assert 0 < m["noise_fraction"] < 1 and m["noise_fraction"] == pytest.approx(noise.float().mean().item())
    e2 = e.detach() - noise[..., None] * e.grad * lr * spec.beta
    ref, _ = clm_step_from_embeds(model, batch, e2)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    assert loss.item() != pytest.approx(ce.item(), rel=1e-9)  # the denoising changed something
    model.zero_grad(set_to_none=True)
    loss.backward()
    assert model.get_input_embeddings().weight.grad.abs().sum() > 0


def test_errors_name_the_value():
    with pytest.raises(ValueError, match=r"beta=-1.0; allowed: a finite value >= 0"):
        CDTSpec(beta=-1.0)
    with pytest.raises(ValueError, match="threshold='all'"):
        CDTSpec(threshold="all")
    with pytest.raises(ValueError, match="lr=nan"):
        cdt_loss(_model(), _batch(), CDTSpec(), lr=math.nan)
    with pytest.raises(ValueError, match="perturb_type='opposite'; allowed: below, other, both"):
        CDTSpec(perturb_type="opposite")
    with pytest.raises(ValueError, match="step='eps'; allowed: lr_beta, epsilon"):
        CDTSpec(step="eps")
    with pytest.raises(ValueError, match="epsilon=None; allowed: a finite value > 0 with step='epsilon'"):
        CDTSpec(step="epsilon")
    with pytest.raises(ValueError, match="epsilon=0.0; allowed: a finite value > 0"):
        CDTSpec(step="epsilon", epsilon=0.0)
    with pytest.raises(ValueError, match="epsilon=0.1 with step='lr_beta'; allowed: epsilon=None, or step='epsilon'"):
        CDTSpec(epsilon=0.1)
    with pytest.raises(ValueError, match="authors_accumulation=1; allowed: True, False"):
        CDTSpec(authors_accumulation=1)


class _Rows:
    name = "rows"

    def __init__(self, batch):
        self.b = {k: v.numpy() for k, v in batch.items()}

    def batch(self, step):
        return self.b

    def observe(self, step, metrics):
        pass

    def finished(self, step):
        return False

    def state_dict(self):
        return {}

    def load_state_dict(self, state):
        pass


def test_trainer_passes_the_scheduled_lr_and_loss_falls(tmp_path):
    model = _model(dtype=torch.float32)
    batch = _batch(dtype=torch.float32)
    m = ContextDenoising("cdt", CDTSpec(beta=5.0), _Rows(batch), pad_id=None)
    seen = []
    loss = m.loss
    m.loss = lambda model, batch, state: (seen.append((state.step, state.lr)), loss(model, batch, state))[1]
    cfg = TrainConfig(max_steps=12, lr=3e-3, warmup_steps=2, checkpoint_every=0)
    Trainer(model, m, cfg, tmp_path, progress=False).train()
    from repro.io import read_jsonl

    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["step"] for r in rows] == [s for s, _ in seen] == list(range(12))
    assert [r["lr"] for r in rows] == pytest.approx([lr for _, lr in seen])
    assert all(0 < r["noise_fraction"] < 1 for r in rows)
    assert rows[-1]["loss"] < 0.7 * rows[0]["loss"]
    # the objective is a pure function of the step's state: at lr 0 it is the CE step, whatever came before
    fresh = ContextDenoising("cdt", CDTSpec(), _Rows(batch), pad_id=None)
    assert fresh.loss(model, batch, StepState(0, 0.0))[0].item() == clm_step(model, batch, False)[0].item()


def test_plain_loop_on_qwen2_with_padding():
    """A user's loop on their own model: pads are never noise and get no loss; the loss falls."""
    model = _model("qwen2", torch.float32)
    batch = _batch(B=3, T=20, dtype=torch.float32)
    pad = 1
    batch["input_ids"][1, -4:] = pad
    batch["weights"][1, -4:] = 0
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    losses = []
    for _ in range(20):
        loss, metrics = cdt_loss(model, batch, CDTSpec(beta=5.0), lr=3e-3, pad_id=pad)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < 0.6 * losses[0]


# -- the authors' trainer's options ---------------------------------------------------------------------------------
NORMS = torch.tensor([[1.0, 2.0, 3.0, 10.0, 0.5, 9.0], [4.0, 4.0, 4.0, 4.0, 1.0, 7.0]])
VALID = torch.tensor([[True] * 6, [True, True, True, True, True, False]])


def _grad_with_norms(norms: torch.Tensor, H: int = 4, seed: int = 0) -> torch.Tensor:
    """A (B, T, H) float64 gradient whose token norms are ``norms``."""
    d = torch.randn(*norms.shape, H, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return d / d.norm(dim=-1, keepdim=True) * norms[..., None].to(torch.float64)


def test_norm_masks_split_the_valid_tokens_at_the_mean():
    below, above = norm_masks(NORMS, VALID)
    # row 0: mean 4.25; row 1 over its 5 valid tokens: 3.4 (the padded 7.0 counts in neither)
    assert below.tolist() == [[True, True, True, False, True, False], [False, False, False, False, True, False]]
    assert above.tolist() == [[False, False, False, True, False, True], [True, True, True, True, False, False]]
    # a token exactly at the mean is in neither
    b, a = norm_masks(torch.tensor([[1.0, 2.0, 3.0]]), torch.ones(1, 3, dtype=torch.bool))
    assert b.tolist() == [[True, False, False]] and a.tolist() == [[False, False, True]]


@pytest.mark.parametrize("kind", ["below", "other", "both"])
def test_perturb_type_moves_the_tokens_it_names_each_its_way(kind):
    grad = _grad_with_norms(NORMS)
    e = torch.randn(grad.shape, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    below, above = norm_masks(NORMS, VALID)
    below = below if kind != "other" else torch.zeros_like(below)
    above = above if kind != "below" else torch.zeros_like(above)
    lr, beta = 1e-3, 5.0
    out, size = perturb(e, grad, below, above, CDTSpec(beta=beta, perturb_type=kind), lr)
    want = {"below": [[-1, -1, -1, 0, -1, 0], [0, 0, 0, 0, -1, 0]],
            "other": [[0, 0, 0, 1, 0, 1], [1, 1, 1, 1, 0, 0]],
            "both": [[-1, -1, -1, 1, -1, 1], [1, 1, 1, 1, -1, 0]]}[kind]
    sign = torch.tensor(want, dtype=torch.float64)
    assert torch.allclose(out - e, sign[..., None] * grad * lr * beta, rtol=1e-12, atol=0)
    assert torch.equal(out[sign == 0], e[sign == 0])  # unmoved tokens (and the pad) stay bit for bit
    assert torch.allclose(size, sign.abs() * lr * beta, rtol=1e-15, atol=0)


def test_below_with_lr_beta_is_eq3_bit_for_bit():
    grad = _grad_with_norms(NORMS).float()
    e = torch.randn(grad.shape, generator=torch.Generator().manual_seed(1))
    below, above = norm_masks(NORMS, VALID)
    out, _ = perturb(e, grad, below, torch.zeros_like(above), CDTSpec(beta=5.0), 3e-3)
    assert torch.equal(out, denoise(e, grad, below, 3e-3, 5.0))


def test_epsilon_step_is_epsilon_over_one_plus_each_tokens_norm():
    grad = _grad_with_norms(NORMS)
    e = torch.zeros_like(grad)
    below, above = norm_masks(NORMS, VALID)
    spec = CDTSpec(step="epsilon", epsilon=0.3, perturb_type="both")
    out, size = perturb(e, grad, below, above, spec, lr=123.0)  # the learning rate plays no part
    sign = above.double() - below.double()
    want_size = 0.3 / (1 + NORMS.double()) * sign.abs()
    assert torch.allclose(size, want_size, rtol=1e-14, atol=0)
    assert torch.allclose(out, sign[..., None] * want_size[..., None] * grad, rtol=1e-14, atol=1e-300)
    # the step's length is epsilon * ||g|| / (1 + ||g||): below epsilon, near it for large gradients
    moved = out.norm(dim=-1)[sign != 0]
    assert torch.allclose(moved, (0.3 * NORMS.double() / (1 + NORMS.double()))[sign != 0], rtol=1e-14)


def test_cdt_loss_with_the_epsilon_step_is_ce_on_the_hand_moved_embeddings():
    model = _model()
    batch = _batch()
    spec = CDTSpec(step="epsilon", epsilon=0.5, perturb_type="both", threshold="row")
    loss, m = cdt_loss(model, batch, spec, lr=0.0)  # the epsilon step moves embeddings at any learning rate
    e = model.get_input_embeddings()(batch["input_ids"]).detach().requires_grad_(True)
    ce, _ = clm_step_from_embeds(model, batch, e)
    ce.backward()
    g = e.grad
    norms = g.norm(dim=-1)
    sign = (norms > norms.mean(-1, keepdim=True)).double() - (norms < norms.mean(-1, keepdim=True)).double()
    e2 = e.detach() + (sign * 0.5 / (1 + norms))[..., None] * g
    ref, _ = clm_step_from_embeds(model, batch, e2)
    assert loss.item() == pytest.approx(ref.item(), rel=1e-12)
    assert loss.item() != pytest.approx(ce.item(), rel=1e-6)
    assert m["noise_fraction"] + m["signal_fraction"] == pytest.approx(1.0)


def test_authors_accumulation_divides_the_detection_gradient_by_the_micro_batches():
    model = _model()
    batch = _batch()
    spec = CDTSpec(beta=50.0)
    ours, _ = cdt_loss(model, batch, spec.with_(authors_accumulation=True), 1e-2, micro_batches=4)
    theirs_at_quarter, _ = cdt_loss(model, batch, spec, 1e-2 / 4)
    plain, _ = cdt_loss(model, batch, spec, 1e-2, micro_batches=4)  # ours: the micro-batch's own gradient
    assert ours.item() == pytest.approx(theirs_at_quarter.item(), rel=1e-14)
    assert plain.item() == cdt_loss(model, batch, spec, 1e-2)[0].item()
    assert plain.item() != pytest.approx(ours.item(), rel=1e-9)


def test_authors_accumulation_weights_the_micro_batches_equally_in_the_trainer(tmp_path):
    model = _model()
    batch = _batch(B=3)
    batch["weights"][2, 5:] = 0  # micro-batches of unequal valid weight: token weighting and 1/n differ
    spec = CDTSpec(beta=50.0, authors_accumulation=True)
    m = ContextDenoising("cdt", spec, _Rows(batch), pad_id=None)
    assert m.micro_batch_weighting == "mean"
    trainer = Trainer(model, m, TrainConfig(max_steps=1, lr=1e-2, micro_batch_size=1, checkpoint_every=0), tmp_path,
                      progress=False)
    trainer._gradients(batch, 1e-2)
    got = {n: p.grad.clone() for n, p in model.named_parameters()}

    def accumulated(scales, spec):
        model.zero_grad(set_to_none=True)
        for r, scale in enumerate(scales):
            part = {k: v[r:r + 1] for k, v in batch.items()}
            (cdt_loss(model, part, spec, 1e-2, micro_batches=3)[0] * scale).backward()
        return {n: p.grad.clone() for n, p in model.named_parameters()}

    want = accumulated([1 / 3] * 3, spec)
    assert all(torch.allclose(got[n], want[n], rtol=1e-12, atol=1e-18) for n in want)
    w = [float(batch["weights"][r, 1:].sum()) for r in range(3)]
    by_tokens = accumulated([x / sum(w) for x in w], spec)
    assert max(float((by_tokens[n] - want[n]).abs().max()) for n in want) > 1e-4


def test_the_authors_shipped_lr_beta_is_numerically_the_ce_step():
    """Their recipe: beta = 1e-6 at lr 2e-6, lr * beta = 2e-12 (docs/papers/cdt.md)."""
    model = _model()
    batch = _batch()
    ce = clm_step(model, batch, bf16=False)[0]
    g_ce = _grads(model, ce)

    def rel(spec, lr):
        loss, _ = cdt_loss(model, batch, spec, lr)
        g = _grads(model, loss)
        worst = max(float((g[n] - g_ce[n]).norm() / g_ce[n].norm()) for n in g_ce)
        return abs(loss.item() - ce.item()) / ce.item(), worst

    for kind in ("below", "both"):
        loss_rel, grad_rel = rel(CDTSpec(beta=1e-6, perturb_type=kind, threshold="row"), 2e-6)
        assert loss_rel < 1e-12 and grad_rel < 1e-11, (kind, loss_rel, grad_rel)
    loss_rel, grad_rel = rel(CDTSpec(beta=5.0, threshold="row"), 1e-2)  # lr * beta = 0.05
    assert loss_rel > 1e-6 and grad_rel > 1e-6


def test_rows_of_one_token_are_refused_not_scored_zero():
    """A length-1 row has no next token: CDT refuses it (as the self-distillation batch does) instead of a 0 loss."""
    model = _model()
    batch = {"input_ids": torch.ones(2, 1, dtype=torch.long), "weights": torch.ones(2, 1, dtype=torch.float64)}
    with pytest.raises(ValueError, match=r"input_ids of shape \(2, 1\); allowed: .* tokens >= 2"):
        cdt_loss(model, batch, CDTSpec(), lr=1e-3)
