"""The weighted next-token loss: the plain version and a chunked one that never holds the batch's logits.

:func:`weighted_clm_loss` takes the model's logits (B, T, V) and upcasts them to
fp32: on a small model with a 2K-token vocabulary that tensor, its log-softmax and
their gradients are most of a training step's memory traffic.
:func:`chunked_clm_loss` takes the final hidden states instead and, chunk by chunk of
``chunk`` target tokens, computes the logits, the loss and already the gradient with
respect to the hidden states and the output-embedding matrix (softmax minus one-hot,
times the token's weight), so the backward pass only scales stored gradients. Same
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


class _FusedHeadCE(torch.autograd.Function):
    """sum_i w_i * CE(h_i @ W^T, y_i), with the gradients computed during the forward pass."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, w, chunk, compute_dtype):
        grad_h = torch.zeros_like(hidden)
        grad_w = torch.zeros(weight.shape, dtype=torch.float32 if weight.dtype != torch.float64 else weight.dtype,
                             device=weight.device)
        acc = torch.float64 if hidden.dtype == torch.float64 else torch.float32
        total = torch.zeros((), dtype=acc, device=hidden.device)
        wc = weight.to(compute_dtype)
        for s in range(0, hidden.shape[0], chunk):
            h = hidden[s:s + chunk].to(compute_dtype)
            logits = (h @ wc.T).to(acc)
            y, ww = targets[s:s + chunk], w[s:s + chunk].to(acc)
            logp = torch.log_softmax(logits, -1)
            total += -(logp.gather(1, y[:, None]).squeeze(1) * ww).sum()
            g = logp.exp_()
            g[torch.arange(len(y), device=g.device), y] -= 1
            g *= ww[:, None]
            g = g.to(compute_dtype)
            grad_h[s:s + chunk] = (g @ wc).to(grad_h.dtype)
            grad_w += (g.T @ h).to(grad_w.dtype)
        ctx.save_for_backward(grad_h, grad_w.to(weight.dtype))
        return total

    @staticmethod
    def backward(ctx, grad_out):
        grad_h, grad_w = ctx.saved_tensors
        return grad_h * grad_out.to(grad_h.dtype), grad_w * grad_out.to(grad_w.dtype), None, None, None, None


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
