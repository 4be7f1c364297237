"""The weighted next-token loss: the plain version and a chunked one that never holds the batch's logits.

:func:`weighted_clm_loss` takes the model's logits (B, T, V) and upcasts them to
fp32: on a small model with a 2K-token vocabulary that tensor, its log-softmax and
their gradients are most of a training step's memory traffic.
:func:`chunked_clm_loss` takes the final hidden states instead and, chunk by chunk of
``chunk`` target tokens, computes the logits, the loss and already the gradient with
respect to the hidden states and the output-embedding matrix (softmax minus one-hot,
times the token's weight; only those autograd will ask for: a frozen head's is skipped),
so the backward pass only scales stored gradients. Same
matmul FLOPs as the plain path, O(chunk x V) extra memory instead of O(B x T x V),
and tokens of weight 0 are skipped. Tests check loss and every parameter gradient
against :func:`weighted_clm_loss` in float64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F


def weighted_clm_loss(logits: torch.Tensor, input_ids: torch.Tensor,
                      weights: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Weighted next-token loss averaged over weighted target tokens of the whole batch.

    ``weights[:, t]`` is the weight of predicting ``input_ids[:, t]`` (from position t-1).
    Returns the scalar loss and the per-token loss (B, T-1).
    """
    lg = logits[:, :-1]
    lg = lg if lg.dtype == torch.float64 else lg.float()  # half precisions upcast; float64 stays float64
    ce = F.cross_entropy(lg.reshape(-1, logits.shape[-1]), input_ids[:, 1:].reshape(-1),
                         reduction="none").view(input_ids.shape[0], -1)
    w = weights[:, 1:]
    return (ce * w).sum() / w.sum().clamp_min(1e-8), ce


def _head_buffers(ctx, hidden: torch.Tensor, weight: torch.Tensor, compute_dtype: torch.dtype):
    """What a fused head loss accumulates into: gradient buffers for the hidden states and the head (fp32, fp64 for
    fp64 heads; None for an input autograd will not ask a gradient of, e.g. a frozen head or a no-grad call: its
    matmul is skipped), the accumulation dtype, the running total and the head in the matmul dtype."""
    need_h, need_w = ctx.needs_input_grad[0], ctx.needs_input_grad[1]
    grad_h = torch.zeros_like(hidden) if need_h else None
    grad_w = torch.zeros(weight.shape, dtype=torch.float32 if weight.dtype != torch.float64 else weight.dtype,
                         device=weight.device) if need_w else None
    acc = torch.float64 if hidden.dtype == torch.float64 else torch.float32
    return grad_h, grad_w, acc, torch.zeros((), dtype=acc, device=hidden.device), weight.to(compute_dtype)


class _PrecomputedHeadGrads(torch.autograd.Function):
    """A fused head loss whose forward already computed the gradients of its first two inputs (hidden states, head)
    and saved them; backward only scales them (every other input gets no gradient)."""

    @staticmethod
    def save(ctx, grad_h, grad_w, weight, n_constants: int) -> None:
        """Keep the forward's gradients (None where not needed) for :meth:`backward`."""
        ctx.has = (grad_h is not None, grad_w is not None)
        ctx.save_for_backward(*[g for g in (grad_h, None if grad_w is None else grad_w.to(weight.dtype))
                                if g is not None])
        ctx.n_constants = n_constants

    @staticmethod
    def backward(ctx, grad_out):
        saved = iter(ctx.saved_tensors)
        grads = [next(saved) if has else None for has in ctx.has]
        return *[None if g is None else g * grad_out.to(g.dtype) for g in grads], *([None] * ctx.n_constants)


class _FusedHeadCE(_PrecomputedHeadGrads):
    """sum_i w_i * CE(h_i @ W^T, y_i), with the gradients computed during the forward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, w, chunk, compute_dtype):
        grad_h, grad_w, acc, total, wc = _head_buffers(ctx, hidden, weight, compute_dtype)
        for s in range(0, hidden.shape[0], chunk):
            h = hidden[s:s + chunk].to(compute_dtype)
            logits = (h @ wc.T).to(acc)
            y, ww = targets[s:s + chunk], w[s:s + chunk].to(acc)
            logp = torch.log_softmax(logits, -1)
            total += -(logp.gather(1, y[:, None]).squeeze(1) * ww).sum()
            if grad_h is None and grad_w is None:
                continue
            g = logp.exp_()
            g[torch.arange(len(y), device=g.device), y] -= 1
            g *= ww[:, None]
            g = g.to(compute_dtype)
            if grad_h is not None:
                grad_h[s:s + chunk] = (g @ wc).to(grad_h.dtype)
            if grad_w is not None:
                grad_w += (g.T @ h).to(grad_w.dtype)
        _FusedHeadCE.save(ctx, grad_h, grad_w, weight, 4)
        return total


def chunked_clm_loss(hidden: torch.Tensor, head_weight: torch.Tensor, input_ids: torch.Tensor,
                     weights: torch.Tensor, chunk: int = 2048,
                     compute_dtype: torch.dtype | None = None) -> torch.Tensor:
    """:func:`weighted_clm_loss`'s scalar from the final hidden states (B, T, H) and the output
    embedding (V, H) of a bias-free LM head.

    ``chunk``: target tokens per chunk (>= 1). ``compute_dtype``: dtype of the head's matmuls
    (default: the hidden states'; bf16 under autocast); log-softmax and sums stay in fp32 (fp64
    for fp64 inputs).
    """
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; allowed: >= 1 target tokens")
    h = hidden[:, :-1].reshape(-1, hidden.shape[-1])
    y = input_ids[:, 1:].reshape(-1)
    w = weights[:, 1:].reshape(-1)
    denom = w.sum().clamp_min(1e-8)
    keep = w != 0
    if not bool(keep.all()):
        h, y, w = h[keep], y[keep], w[keep]
    total = _FusedHeadCE.apply(h, head_weight, y, w, chunk, compute_dtype or hidden.dtype)
    return total / denom.to(total.dtype)


KL_DIRECTIONS: tuple[str, ...] = ("reverse", "forward")
"""``reverse``: KL(student || sg(teacher)) (self-distillation Eq. 5, the default);
``forward``: KL(sg(teacher) || student)."""


def _check_direction(direction: str) -> None:
    if direction not in KL_DIRECTIONS:
        raise ValueError(f"direction={direction!r}; allowed: {', '.join(KL_DIRECTIONS)}")


def kl_from_logits(student: torch.Tensor, teacher: torch.Tensor, direction: str = "reverse") -> torch.Tensor:
    """Per-position KL divergence (...,) between the next-token distributions of ``student`` and ``teacher``
    logits (..., V), in fp32 (fp64 stays fp64). The teacher is detached (stop-gradient).

    ``reverse``: KL(p_student || p_teacher) = sum_v p_s (log p_s - log p_t); ``forward``: KL(p_teacher || p_student).
    The naive reference of :func:`chunked_kl_loss`.
    """
    _check_direction(direction)
    acc = torch.float64 if student.dtype == torch.float64 else torch.float32
    ls = torch.log_softmax(student.to(acc), -1)
    lt = torch.log_softmax(teacher.detach().to(acc), -1)
    if direction == "reverse":
        return (ls.exp() * (ls - lt)).sum(-1)
    return (lt.exp() * (lt - ls)).sum(-1)


class _FusedHeadKL(_PrecomputedHeadGrads):
    """sum_i w_i * KL_i between student logits h_s @ W^T and detached teacher logits h_t @ W^T, gradients in forward.

    d KL_rev / d z_s = p_s * (log p_s - log p_t - KL); d KL_fwd / d z_s = p_s - p_t.
    """

    @staticmethod
    def forward(ctx, student, weight, teacher, w, chunk, compute_dtype, reverse):
        grad_h, grad_w, acc, total, wc = _head_buffers(ctx, student, weight, compute_dtype)
        for s in range(0, student.shape[0], chunk):
            h = student[s:s + chunk].to(compute_dtype)
            ls = torch.log_softmax((h @ wc.T).to(acc), -1)
            lt = torch.log_softmax((teacher[s:s + chunk].to(compute_dtype) @ wc.T).to(acc), -1)
            ww = w[s:s + chunk].to(acc)
            # in place where possible: these (chunk, V) passes, not the matmuls, dominate a small model's step
            if reverse:
                d = lt.neg_().add_(ls)  # log p_s - log p_t
                g = ls.exp_()  # p_s
                kl = (g[:, None, :] @ d[:, :, None]).view(-1)
                g = d.sub_(kl[:, None]).mul_(g)
            else:
                pt = lt.exp()
                kl = (pt[:, None, :] @ (lt - ls)[:, :, None]).view(-1)
                g = ls.exp_().sub_(pt)
            total += (kl * ww).sum()
            g = g.mul_(ww[:, None]).to(compute_dtype)
            if grad_h is not None:
                grad_h[s:s + chunk] = (g @ wc).to(grad_h.dtype)
            if grad_w is not None:
                grad_w += (g.T @ h).to(grad_w.dtype)
        _FusedHeadKL.save(ctx, grad_h, grad_w, weight, 5)
        return total


def chunked_kl_loss(student: torch.Tensor, teacher: torch.Tensor, head_weight: torch.Tensor, w: torch.Tensor,
                    direction: str = "reverse", chunk: int = 2048,
                    compute_dtype: torch.dtype | None = None) -> torch.Tensor:
    """``sum_i w_i KL_i`` over positions i of final hidden states ``student`` (N, H) and ``teacher`` (N, H) through
    the bias-free LM head ``head_weight`` (V, H), never holding more than ``chunk`` positions' logits.

    The teacher side is a stop-gradient target (no gradient reaches ``teacher`` or the head through it); the
    gradient reaches ``student`` and the head through the student's logits only. Positions of weight 0 are
    skipped. ``compute_dtype``: dtype of the head's matmuls (default: the student's); softmaxes and sums in fp32
    (fp64 for fp64 inputs). Equal to ``(kl_from_logits(student @ W.T, teacher @ W.T) * w).sum()`` with the same
    gradients (tested in float64).
    """
    _check_direction(direction)
    if chunk < 1:
        raise ValueError(f"chunk={chunk}; allowed: >= 1 positions")
    if student.shape != teacher.shape or student.ndim != 2 or w.shape != student.shape[:1]:
        raise ValueError(f"student {tuple(student.shape)}, teacher {tuple(teacher.shape)}, w {tuple(w.shape)}: "
                         "expected (N, H), (N, H) and (N,)")
    keep = w != 0
    if not bool(keep.all()):
        student, teacher, w = student[keep], teacher[keep], w[keep]
    return _FusedHeadKL.apply(student, head_weight, teacher.detach(), w, chunk, compute_dtype or student.dtype,
                              direction == "reverse")
