"""CDT's analyses of one model on labelled multi-hop samples (§3.1-3.2, §4.1, §6.1-6.2): the numbers behind
CD-Fig3, 4, 5, 7 and 8, computed with the memory-linear scores of :mod:`repro.analysis.ig`.

- :func:`score_sample` (CD-Fig3/5/7): IG (Eq. 1), FR (all heads and the top heads), attention mass and the
  embedding-gradient norms per token type, the per-token IG and gradient (Fig. 5's scatter) and what three
  detectors find among their top-k context tokens (Fig. 7: attention, embedding gradient, and LongPPL's
  short-vs-long loss gap when given).
- :func:`manual_denoising` (CD-Fig4, §3.2): tokens whose IG is below the mean IG of the context are noise; their
  embeddings move down the loss gradient, ``E' = E - I * dL/dE * step``; the attention per type before and after.
- :func:`denoising_sweep` (CD-Fig8, §6.2): CDT's own detection (Eq. 2, on the training row's CE) and denoising
  (Eq. 3 at beta = 1) for each learning rate; the attention on critical tokens before, after the denoising step,
  and after one emphasizing step (Eq. 4) of the optimizer.

Every score is the model's on the sample *with its reference answer appended* (teacher forcing): Eq. 1's loss is
the cross-entropy of the answer's own tokens (:attr:`~repro.analysis.typed_samples.TypedSample.answer_positions`:
the end-of-sequence terminator after them is not part of the target).
"""

from __future__ import annotations

import copy
import warnings
from typing import Sequence

import numpy as np
import torch

from repro.analysis.ig import CRITICAL, TYPES, token_scores
from repro.analysis.typed_samples import TypedSample
from repro.methods.cdt import ce_from_embeds, denoise, embedding_gradients, noise_mask

DETECTORS = ("attention", "gradient", "longppl")
"""CD-Fig7's detectors: top-k attention from the answer rows, top-k embedding-gradient L2 norm, top-k LongPPL
short-vs-long log-probability gap (LSD)."""


def _ids(s: TypedSample, model=None) -> torch.Tensor:
    """The sample's token ids (1, T), on ``model``'s device when given."""
    device = None if model is None else model.get_input_embeddings().weight.device
    return torch.as_tensor(s.input_ids, device=device)[None]


def detected_shares(score: np.ndarray, types: Sequence[str], k: int) -> dict[str, float]:
    """Share of each context type among the ``k`` context tokens with the highest ``score`` (ties: lower index)."""
    lab = np.asarray(types, dtype=object)
    ctx = np.flatnonzero(np.isin(lab, TYPES))
    if ctx.size == 0:
        raise ValueError("no context tokens (supporting, interference, irrelevant, low_frequency) in the labels")
    top = ctx[np.argsort(-np.asarray(score, dtype=np.float64)[ctx], kind="stable")[:k]]
    return {t: float(np.mean(lab[top] == t)) for t in TYPES}


def score_sample(model, s: TypedSample, top_k: int = 30, top_heads: int = 30,
                 lsd: np.ndarray | None = None) -> dict:
    """The CD-Fig3/5/7 numbers of one sample (JSON-able): per type ``ig``, ``fr``, ``fr_top`` (App. B's top
    heads), ``attention``, ``grad_l2``, ``grad_l1`` (raw means and ``*_share`` normalized over the four types), the
    per-token ``ig_token`` (mean over heads and layers) and ``grad_token`` (L2), and ``detect_<name>`` shares of
    the top ``top_k`` context tokens per detector (``lsd``: per-token LongPPL gap, aligned with the tokens)."""
    sc = token_scores(model, _ids(s), s.answer_positions, top_k=top_k)
    lab = s.types
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # top heads clipped to the model's head count: recorded below
        fr_top = sc.fr_by_type(lab, top_heads=top_heads)
        fr_top_share = sc.fr_by_type(lab, top_heads=top_heads, normalized=True)
    heads = sc.ig.shape[0] * sc.ig.shape[1]
    rec = {"loss": sc.loss, "top_heads_used": min(top_heads, heads), "heads_total": heads}
    for name, raw, share in (("ig", sc.ig_by_type(lab), sc.ig_by_type(lab, normalized=True)),
                             ("fr", sc.fr_by_type(lab), sc.fr_by_type(lab, normalized=True)),
                             ("fr_top", fr_top, fr_top_share),
                             ("attention", sc.attention_by_type(lab), sc.attention_by_type(lab, normalized=True)),
                             ("grad_l2", sc.grad_by_type(lab, "l2"), sc.grad_by_type(lab, "l2", normalized=True)),
                             ("grad_l1", sc.grad_by_type(lab, "l1"), sc.grad_by_type(lab, "l1", normalized=True))):
        rec[name] = {t: float(v) for t, v in raw.items()}
        rec[f"{name}_share"] = {t: float(v) for t, v in share.items()}
    rec["ig_layer"] = {t: [float(x) for x in np.atleast_1d(v)] for t, v in sc.ig_by_type(lab, per_layer=True).items()}
    ig_token = sc.ig.mean(axis=(0, 1))
    rec["ig_token"], rec["grad_token"] = ig_token.tolist(), sc.grad_l2.tolist()
    rec["detect_attention"] = detected_shares(sc.attention.sum(axis=(0, 1)), lab, top_k)
    rec["detect_gradient"] = detected_shares(sc.grad_l2, lab, top_k)
    if lsd is not None:
        rec["detect_longppl"] = detected_shares(lsd, lab, top_k)
    return rec


def _attention_types(model, s: TypedSample, embeds: torch.Tensor | None = None) -> dict[str, float]:
    sc = token_scores(model, _ids(s), s.answer_positions, inputs_embeds=embeds)
    return {t: float(v) for t, v in sc.attention_by_type(s.types).items()}


def critical_attention(att: dict[str, float]) -> float:
    """Mean attention mass per critical token (supporting and interference pooled by their means)."""
    return float(np.nanmean([att[t] for t in CRITICAL]))


def manual_denoising(model, s: TypedSample, step: float) -> dict:
    """CD-Fig4 (§3.2) on one sample: ``noise`` = context tokens whose IG (mean over heads and layers) is below the
    mean IG of the context; ``E' = E - noise * dL/dE * step`` with the answer loss's embedding gradient; the
    attention mass per type (mean per token, over heads and layers) before and after, and the noise count."""
    sc = token_scores(model, _ids(s), s.answer_positions, return_embedding_grad=True)
    lab = np.asarray(s.types, dtype=object)
    ctx = np.isin(lab, TYPES)
    ig = sc.ig.mean(axis=(0, 1))
    noise = ctx & (ig < ig[ctx].mean())
    with torch.no_grad():
        e = model.get_input_embeddings()(_ids(s, model))
    g = sc.embedding_grad.reshape(e.shape).to(e.device, e.dtype)
    e2 = e - torch.as_tensor(noise, device=e.device)[None, :, None].to(e.dtype) * g * step
    before = {t: float(v) for t, v in sc.attention_by_type(s.types).items()}
    after = _attention_types(model, s, e2)
    return {"before": before, "after": after, "noise_tokens": int(noise.sum()), "context_tokens": int(ctx.sum()),
            "noise_by_type": {t: int((noise & (lab == t)).sum()) for t in TYPES}}


def _se(values) -> float:
    """SE of the mean over samples (``sd / sqrt(n)``, ddof 1); 0 for a single sample."""
    x = np.asarray(values, dtype=float)
    return float(x.std(ddof=1) / np.sqrt(x.size)) if x.size > 1 else 0.0


def denoising_sweep(model, samples: Sequence[TypedSample], lrs: Sequence[float], update_lr: float,
                    threshold: str = "document") -> list[dict]:
    """CD-Fig8 (§6.2): for each ``lr`` (beta = 1), CDT's detection (Eq. 2 on the training row's weighted CE) and
    denoising (Eq. 3 with step ``lr``), then the mean attention per critical token of the answer rows, averaged
    over the samples: ``before``, ``after_denoising`` (same weights, input ``E'``) and ``after_emphasizing`` (one
    AdamW step at ``update_lr`` on the CE of all samples' ``E'`` (Eq. 4), then measured on ``E'`` again). The
    denoising step is the sweep's ``lr``; the parameter update keeps a sane ``update_lr`` (a tiny model does not
    survive an optimizer step at lr 10). One row per ``lr``, the three means each with its SE over samples
    (``<key>_se``); also the irrelevant tokens' attention, ``gain``: the relative change of each sample's
    critical-token attention after the denoising step (mean, SE, and per sample in ``gain_samples``), and
    ``emphasis_gain`` likewise after the emphasizing step against after denoising."""
    def batch(s):
        ids = _ids(s, model)
        return {"input_ids": ids, "weights": torch.as_tensor(s.weights, device=ids.device)[None],
                "position_ids": torch.arange(ids.shape[1], device=ids.device)[None]}

    base = []
    for s in samples:
        b = batch(s)
        with torch.no_grad():
            e = model.get_input_embeddings()(b["input_ids"])
        g, _ = embedding_gradients(model, b, embeds=e)
        mask = noise_mask(g.float().norm(dim=-1), torch.ones_like(b["input_ids"], dtype=torch.bool), None, threshold)
        base.append((b, e, g, mask, _attention_types(model, s)))
    rows = []
    for lr in lrs:
        den = [denoise(e, g, m, lr, 1.0) for _, e, g, m, _ in base]
        after = [_attention_types(model, s, d) for s, d in zip(samples, den)]
        m2 = copy.deepcopy(model)
        m2.train()
        opt = torch.optim.AdamW(m2.parameters(), lr=update_lr, betas=(0.9, 0.95), weight_decay=0.0)
        loss = sum(ce_from_embeds(m2, d.detach(), b)[0] for (b, *_), d in zip(base, den)) / len(base)
        opt.zero_grad()
        loss.backward()
        opt.step()
        m2.eval()
        emph = [_attention_types(m2, s, d) for s, d in zip(samples, den)]
        crit = {"before": [critical_attention(a[-1]) for a in base],
                "after_denoising": [critical_attention(a) for a in after],
                "after_emphasizing": [critical_attention(a) for a in emph]}
        gain = np.array([critical_attention(a) / critical_attention(b[-1]) - 1 for a, b in zip(after, base)])
        emphasis = np.array([critical_attention(e) / critical_attention(a) - 1 for e, a in zip(emph, after)])
        rows.append({"lr": float(lr), "gain": float(gain.mean()),
                     "gain_se": float(gain.std(ddof=1) / np.sqrt(gain.size)) if gain.size > 1 else 0.0,
                     "gain_samples": gain.tolist(), "emphasis_gain": float(emphasis.mean()),
                     "emphasis_gain_se": float(emphasis.std(ddof=1) / np.sqrt(emphasis.size))
                     if emphasis.size > 1 else 0.0, "emphasis_gain_samples": emphasis.tolist(),
                     **{k: float(np.mean(v)) for k, v in crit.items()},
                     **{f"{k}_se": _se(v) for k, v in crit.items()},
                     "irrelevant_before": float(np.mean([a[-1]["irrelevant"] for a in base])),
                     "irrelevant_after_denoising": float(np.mean([a["irrelevant"] for a in after])),
                     "noise_fraction": float(np.mean([m.float().mean().item() for *_, m, _ in base]))})
    return rows
