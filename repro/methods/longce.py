"""LongCE (Fang et al., 2025): the CLM loss with each target reweighted by how much the long context helps it.

``w_t = min(exp(loss_short_t - loss_full_t), max_weight)`` (no lower clip; detached), from the model being trained:
``loss_full`` of the row's full pass, ``loss_short`` of strided short windows (:func:`window_plan`,
:func:`short_context_losses`), and the loss ``sum_t d_t w_t ce_t / sum_t d_t`` (``d``: the data's token weights;
:attr:`LongCEConfig.reduction`). Computed as the official LongPPL code does (``finetune/finetune.py``); what that
code does, where we generalise it, how it differs from the papers' text and what it costs: docs/papers/selfdistill.md.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from repro.loss import chunked_clm_loss, weighted_clm_loss
from repro.methods.metrics import autocast, head_dtype
from repro.models import forward, forward_hidden, plain_head_weight
from repro.parallel.rows import alone, group_sum, share

REDUCTIONS: tuple[str, ...] = ("mean", "weighted_mean")
"""``mean``: the official undivided mean ``sum d w ce / sum d``; ``weighted_mean``: ``sum d w ce / sum d w``."""


@dataclass(frozen=True)
class LongCEConfig:
    """LongCE's settings; the defaults are the official code's (64K-class training of 7-8B models)."""

    window: int = 4096
    """Short-context length: a scored target sees between ``window`` and ``window + stride - 1`` tokens in its
    short pass, and the first ``window - 1`` targets of a row are never scored (weight 1). Official: 4096."""
    stride: int = 1024
    """Distance between window starts, and the number of targets each window scores. Official: 1024."""
    max_weight: float = 5.0
    """Upper clip of ``exp(loss_short - loss_full)`` (no lower clip). Official: 5."""
    reduction: str = "mean"
    """``mean`` (official): ``sum_t d_t w_t ce_t / sum_t d_t`` over the batch's targets (``d``: the data's token
    weights), not divided by the LongCE weights' sum; ``weighted_mean``: divided by ``sum_t d_t w_t`` instead."""

    def __post_init__(self):
        if isinstance(self.window, bool) or not isinstance(self.window, int) or self.window < 2:
            raise ValueError(f"window={self.window!r}; allowed: an integer >= 2 tokens")
        if isinstance(self.stride, bool) or not isinstance(self.stride, int) or not 1 <= self.stride <= self.window:
            raise ValueError(f"stride={self.stride!r}; allowed: an integer with 1 <= stride <= window={self.window}")
        if not self.max_weight > 0:
            raise ValueError(f"max_weight={self.max_weight!r}; allowed: > 0")
        if self.reduction not in REDUCTIONS:
            raise ValueError(f"reduction={self.reduction!r}; allowed: {', '.join(REDUCTIONS)}")

    @classmethod
    def scaled(cls, base_window: int, **overrides) -> "LongCEConfig":
        """The official ratio at another scale: ``window`` = the base model's training window, ``stride`` = a
        quarter of it (official: 4096 and 1024 for a 4K base). The tiny profile (base window 256, target 1024)
        gives window 256, stride 64; ``overrides`` set any other field."""
        if isinstance(base_window, bool) or not isinstance(base_window, int) or base_window < 2:
            raise ValueError(f"base_window={base_window!r}; allowed: an integer >= 2 tokens")
        return cls(**{"window": base_window, "stride": max(1, base_window // 4), **overrides})


def window_plan(seq_len: int, cfg: LongCEConfig) -> list[tuple[int, int]]:
    """``(start, scored)`` of each short window of a row of ``seq_len`` tokens, in the official order: the
    window holds tokens ``start .. start + window + scored - 1`` and scores its last ``scored`` targets
    (``scored`` = ``stride``, fewer for the last window). Empty when ``seq_len <= window``."""
    return [(s, min(cfg.stride, seq_len - s - cfg.window)) for s in range(0, seq_len - cfg.window, cfg.stride)]


def scored_mask(batch: int, seq_len: int, cfg: LongCEConfig, device=None) -> torch.Tensor:
    """(B, T-1) bool: which targets get a short-context score (targets ``window - 1 ..`` in the (B, T-1)
    convention of :func:`short_context_losses`)."""
    mask = torch.zeros(batch, max(seq_len - 1, 0), dtype=torch.bool, device=device)
    mask[:, cfg.window - 1:] = seq_len > cfg.window
    return mask


def _head_ce(h: torch.Tensor, weight: torch.Tensor, y: torch.Tensor, chunk: int,
             compute_dtype: torch.dtype) -> torch.Tensor:
    """Per-row cross-entropy of ``h @ weight^T`` (N, V) against ``y`` (N,), ``chunk`` rows at a time, the
    same arithmetic as :func:`repro.loss.chunked_clm_loss` (fp32 log-softmax; fp64 for fp64 inputs)."""
    acc = torch.float64 if h.dtype == torch.float64 else torch.float32
    out = torch.empty(len(y), dtype=acc, device=h.device)
    wc = weight.to(compute_dtype)
    for s in range(0, len(y), chunk):
        logp = torch.log_softmax((h[s:s + chunk].to(compute_dtype) @ wc.T).to(acc), -1)
        out[s:s + chunk] = -logp.gather(1, y[s:s + chunk, None]).squeeze(1)
    return out


@torch.no_grad()
def per_token_ce(hidden: torch.Tensor, head_weight: torch.Tensor, input_ids: torch.Tensor, chunk: int = 2048,
                 compute_dtype: torch.dtype | None = None) -> torch.Tensor:
    """(B, T-1) per-target cross-entropy from the final hidden states (B, T, H) and a plain head (V, H), no
    gradient, never more than ``chunk`` rows of logits at once: entry ``t`` is the loss of ``input_ids[:, t+1]``
    predicted from position ``t`` (the per-token output of :func:`repro.loss.weighted_clm_loss`)."""
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; allowed: >= 1 target tokens")
    B, T, H = hidden.shape
    ce = _head_ce(hidden[:, :-1].reshape(-1, H), head_weight, input_ids[:, 1:].reshape(-1), chunk,
                  compute_dtype or hidden.dtype)
    return ce.view(B, T - 1)


def _window_positions(position_ids: torch.Tensor | None, doc_ids: torch.Tensor | None, start: int,
                      length: int, batch: int, device) -> torch.Tensor:
    """Positions of one window: ``0 .. length-1`` for plain rows (the official numbering); for rows with their
    own positions, shifted so the window's first (cut) document starts at 0, later documents unchanged."""
    if position_ids is None:
        return torch.arange(length, device=device).expand(batch, length)
    p = position_ids[:, start:start + length]
    if doc_ids is None:
        return p - p[:, :1]
    d = doc_ids[:, start:start + length]
    first = (d == d[:, :1]).long().cumprod(-1).bool()
    return torch.where(first, p - p[:, :1], p)


def _accepts_logits_to_keep(model: torch.nn.Module) -> bool:
    try:
        return "logits_to_keep" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False


@torch.no_grad()
def short_context_losses(model: torch.nn.Module, input_ids: torch.Tensor, cfg: LongCEConfig,
                         doc_ids: torch.Tensor | None = None, position_ids: torch.Tensor | None = None,
                         chunk: int = 2048, bf16: bool = False, chunked: bool = True,
                         max_pass_tokens: int = 16384) -> tuple[torch.Tensor, torch.Tensor]:
    """Each target's loss under a short context, computed by ``model`` itself from the official sliding windows
    (module docstring; :func:`window_plan`), without gradient and in the model's current mode.

    Returns ``(loss_short, mask)``, both (B, T-1): entry ``t`` is target ``input_ids[:, t+1]`` predicted from
    position ``t``; ``mask`` is True where a short score exists (``t >= window - 1`` when ``T > window``), and
    ``loss_short`` is 0 elsewhere. Rows are scored independently.

    ``doc_ids``/``position_ids``: as given to the full pass (None for plain rows); a window keeps the rows'
    document masks and numbers its positions from 0 (:func:`_window_positions`). ``bf16``: autocast the windows'
    forward and the head's matmuls as :func:`repro.train.clm_step` does. ``chunked`` (default): the loss comes
    from the final hidden states and the plain head (:func:`repro.models.plain_head_weight`), ``chunk`` targets
    of logits at a time, only at the scored positions; models without a plain head (or ``chunked=False``) use
    the model's logits of each window (only the scored positions when the model takes ``logits_to_keep``).
    ``max_pass_tokens``: windows are stacked into one forward up to this many tokens (at least one window of
    the whole batch per forward); it changes the cost, not the result beyond rounding.
    """
    if input_ids.dim() != 2:
        raise ValueError(f"input_ids has shape {tuple(input_ids.shape)}; allowed: (batch, tokens)")
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; allowed: >= 1 target tokens")
    if max_pass_tokens < 1:
        raise ValueError(f"max_pass_tokens={max_pass_tokens}; allowed: >= 1")
    B, T = input_ids.shape
    device = input_ids.device
    head = plain_head_weight(model) if chunked else None
    keep_arg = head is None and _accepts_logits_to_keep(model)
    compute_dtype = head_dtype(bf16)
    loss = None
    mask = scored_mask(B, T, cfg, device)
    plan = share(window_plan(T, cfg))  # sequence parallelism: each rank scores its share of the windows alone
    with alone():  # the windows run whole on this rank (sequence parallelism: its share of them)
        groups: dict[int, list[int]] = {}
        for start, n in plan:
            groups.setdefault(n, []).append(start)
        for n, starts in groups.items():
            L = cfg.window + n
            per_pass = max(1, max_pass_tokens // (B * L))
            for i in range(0, len(starts), per_pass):
                part = starts[i:i + per_pass]
                ids = torch.cat([input_ids[:, s:s + L] for s in part])
                pos = torch.cat([_window_positions(position_ids, doc_ids, s, L, B, device) for s in part])
                docs = None if doc_ids is None else torch.cat([doc_ids[:, s:s + L] for s in part])
                y = ids[:, cfg.window:]
                with autocast(input_ids, bf16):
                    if head is not None:
                        hidden = forward_hidden(model, ids, pos, docs)
                        h = hidden[:, cfg.window - 1:L - 1]
                        ce = _head_ce(h.reshape(-1, h.shape[-1]), head, y.reshape(-1), chunk,
                                      compute_dtype or hidden.dtype).view(len(ids), n)
                    else:
                        kwargs = {"logits_to_keep": n + 1} if keep_arg else {}
                        logits = forward(model, ids, pos, docs, **kwargs).logits[:, -(n + 1):-1]
                        logits = logits if logits.dtype == torch.float64 else logits.float()
                        ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), y.reshape(-1),
                                             reduction="none").view(len(ids), n)
                if loss is None:
                    loss = torch.zeros(B, T - 1, dtype=ce.dtype, device=device)
                for j, s in enumerate(part):
                    loss[:, s + cfg.window - 1:s + cfg.window - 1 + n] = ce[j * B:(j + 1) * B]
    if loss is None:
        param = next(model.parameters(), None)
        dtype = torch.float64 if param is not None and param.dtype == torch.float64 else torch.float32
        loss = torch.zeros(B, max(T - 1, 0), dtype=dtype, device=device)
    return group_sum(loss), mask  # every window's scores, whichever rank computed them


@torch.no_grad()
def longce_weights(loss_short: torch.Tensor, loss_full: torch.Tensor, mask: torch.Tensor,
                   max_weight: float = 5.0) -> torch.Tensor:
    """(B, T-1) detached LongCE weights: ``min(exp(loss_short - loss_full), max_weight)`` where ``mask`` is True
    (no lower clip), exactly 1 elsewhere; in ``loss_full``'s dtype."""
    if not max_weight > 0:
        raise ValueError(f"max_weight={max_weight!r}; allowed: > 0")
    if loss_short.shape != loss_full.shape or mask.shape != loss_full.shape:
        raise ValueError(f"shapes differ: loss_short {tuple(loss_short.shape)}, loss_full "
                         f"{tuple(loss_full.shape)}, mask {tuple(mask.shape)}; allowed: all (B, T-1)")
    full = loss_full.detach()
    w = torch.exp(loss_short.detach().to(full.dtype) - full).clamp(max=max_weight)
    return torch.where(mask, w, torch.ones_like(w))


def _check_reduction(reduction: str) -> None:
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction={reduction!r}; allowed: {', '.join(REDUCTIONS)}")


def longce_loss(hidden: torch.Tensor, head_weight: torch.Tensor, input_ids: torch.Tensor, weights: torch.Tensor,
                longce_w: torch.Tensor, chunk: int = 2048, compute_dtype: torch.dtype | None = None,
                reduction: str = "mean") -> torch.Tensor:
    """The LongCE loss from the final hidden states (B, T, H) and a plain head (V, H), on the chunked path.

    ``weights`` (B, T): the data's token weights ``d`` as in :func:`repro.loss.chunked_clm_loss` (``weights[:, t]``
    weighs target ``input_ids[:, t]``); ``longce_w`` (B, T-1): the LongCE weights ``w`` of
    :func:`longce_weights` (treated as constants). ``reduction="mean"`` (official) returns
    ``sum_t d_t w_t ce_t / sum_t d_t``: the official ``torch.mean(loss_full * w)`` when every ``d_t`` is 1, NOT
    divided by the LongCE weights' sum; ``"weighted_mean"`` divides by ``sum_t d_t w_t``. Computed as
    :func:`repro.loss.chunked_clm_loss` with token weights ``d * w`` (its normalised mean), rescaled by the
    constant ``sum d w / sum d``, so the gradients are those of the formula exactly; with all ``w`` = 1 it is
    :func:`~repro.loss.chunked_clm_loss`'s own value.
    """
    _check_reduction(reduction)
    B, T = input_ids.shape
    if tuple(longce_w.shape) != (B, T - 1):
        raise ValueError(f"longce_w has shape {tuple(longce_w.shape)}; allowed: (B, T-1) = {(B, T - 1)}")
    lw = longce_w.detach()
    dt = torch.promote_types(weights.dtype, lw.dtype)
    d = weights.detach().to(dt)
    combined = torch.cat([d[:, :1], d[:, 1:] * lw.to(dt)], 1)
    loss = chunked_clm_loss(hidden, head_weight, input_ids, combined, chunk, compute_dtype)
    if reduction == "weighted_mean":
        return loss
    scale = combined[:, 1:].sum().clamp_min(1e-8) / d[:, 1:].sum().clamp_min(1e-8)
    return loss * scale.to(loss.dtype)


def longce_loss_from_ce(ce: torch.Tensor, weights: torch.Tensor, longce_w: torch.Tensor,
                        reduction: str = "mean") -> torch.Tensor:
    """:func:`longce_loss` from a per-token loss with gradient (B, T-1), e.g. the second output of
    :func:`repro.loss.weighted_clm_loss` (the path for models without a plain head)."""
    _check_reduction(reduction)
    d = weights[:, 1:].detach().to(ce.dtype)
    dw = d * longce_w.detach().to(ce.dtype)
    return (ce * dw).sum() / (dw if reduction == "weighted_mean" else d).sum().clamp_min(1e-8)


def longce_clm_term(model: torch.nn.Module, hidden: torch.Tensor, batch: dict[str, torch.Tensor],
                    head: torch.Tensor | None, bf16: bool, cfg: LongCEConfig,
                    chunk: int = 2048) -> tuple[torch.Tensor, dict[str, float]]:
    """LongCE's CLM term of one batch from the final hidden states ``hidden`` of its full pass (the LongCE arm's and
    "skip + LongCE"'s, through :func:`repro.methods.selfdistill.clm_term`): ``(loss, weight metrics)``.

    Runs the short windows (:func:`short_context_losses`, no gradient), then ``loss_full``, the weights and the loss
    from ``hidden``: :func:`longce_loss_with_weights` through the plain ``head``, or (``head`` None: models without
    a plain head) :func:`longce_loss_from_ce` on the model's logits. The official code runs the full forward first;
    the order changes nothing but the memory peak (and the RNG stream, had the model dropout). Metrics:
    ``longce_mean_weight`` and ``longce_clipped_fraction`` (:func:`weight_metrics`)."""
    ids, w = batch["input_ids"], batch["weights"]
    short, mask = short_context_losses(model, ids, cfg, batch.get("doc_ids"), batch.get("position_ids"),
                                       chunk=chunk, bf16=bf16, chunked=head is not None)
    if head is not None:
        loss, lw = longce_loss_with_weights(hidden, head, ids, w, short, mask, cfg, chunk, head_dtype(bf16))
    else:
        ce = weighted_clm_loss(model.get_output_embeddings()(hidden), ids, w)[1]
        lw = longce_weights(short, ce.detach(), mask, cfg.max_weight)
        loss = longce_loss_from_ce(ce, w, lw, cfg.reduction)
    return loss, weight_metrics(lw, mask, cfg.max_weight)


def longce_loss_with_weights(hidden: torch.Tensor, head_weight: torch.Tensor, input_ids: torch.Tensor,
                             weights: torch.Tensor, loss_short: torch.Tensor, mask: torch.Tensor, cfg: LongCEConfig,
                             chunk: int = 2048, compute_dtype: torch.dtype | None = None
                             ) -> tuple[torch.Tensor, torch.Tensor]:
    """The plain-head path from the short-context losses: ``loss_full`` from ``hidden`` (no gradient), the weights
    (:func:`longce_weights`) and :func:`longce_loss`; returns ``(loss, weights)``."""
    full = per_token_ce(hidden.detach(), head_weight.detach(), input_ids, chunk, compute_dtype)
    w = longce_weights(loss_short, full, mask, cfg.max_weight)
    return longce_loss(hidden, head_weight, input_ids, weights, w, chunk, compute_dtype, cfg.reduction), w


def weight_metrics(w: torch.Tensor, mask: torch.Tensor, max_weight: float) -> dict[str, float]:
    """``longce_mean_weight`` and ``longce_clipped_fraction`` (weights at ``max_weight``) over the targets with a
    short score (1 and 0 when none has one)."""
    scored = w[mask]
    if not scored.numel():
        return {"longce_mean_weight": 1.0, "longce_clipped_fraction": 0.0}
    return {"longce_mean_weight": float(scored.mean()),
            "longce_clipped_fraction": float((scored >= max_weight).float().mean())}
