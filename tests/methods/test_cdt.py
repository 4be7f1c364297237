"""Context Denoising Training: detection computes no weight gradient and marks exactly the tokens below the mean,
denoising moves only noise-token embeddings by lr * beta * grad, beta = 0 is exactly the CE step, the loss is the
CE on the denoised embeddings, and the method runs in the trainer and in a plain loop on another family."""

import math

import pytest
import torch

from repro.methods.cdt import CDTSpec, ContextDenoising, cdt_loss, denoise, embedding_gradients, frozen, noise_mask
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
    hook = m.before_step
    m.before_step = lambda step, lr: (seen.append(lr), hook(step, lr))
    cfg = TrainConfig(max_steps=12, lr=3e-3, warmup_steps=2, checkpoint_every=0)
    Trainer(model, m, cfg, tmp_path, progress=False).train()
    from repro.io import read_jsonl

    rows = read_jsonl(tmp_path / "metrics.jsonl")
    assert [r["lr"] for r in rows] == pytest.approx(seen)
    assert all(0 < r["noise_fraction"] < 1 for r in rows)
    assert rows[-1]["loss"] < 0.7 * rows[0]["loss"]
    with pytest.raises(RuntimeError, match="no learning rate yet"):
        ContextDenoising("cdt", CDTSpec(), _Rows(batch), pad_id=None).loss(model, batch)


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
