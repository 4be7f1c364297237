"""IG and FR scores per token type (Context Denoising Training §3.1, Eq. 1; App. B.2), memory linear in T.

What the paper defines, for an input X of n tokens and an answer Y of m tokens, per layer l and head h with the
post-softmax attention matrix A:

* **IG score** (Eq. 1): ``IG = A ⊙ |∂L/∂A|``; per token type r,
  ``IG^(r)_{h,l} = (1/|T_r|) Σ_{i∈T_r} Σ_{j∈Y} IG[j, i]``, averaged over heads and layers.
* **FR score**: at each answer step j and head, ``s_j`` = the keys whose weight is in the top-k of row j;
  ``FR^(r) = |s_j ∩ T_r| / |T_r|``, averaged over answer steps, heads and layers, or over the "top-30 heads"
  (App. B: the heads that give the most attention to critical = supporting + interference tokens).
* The authors' code replaces Eq. 1 by a proxy: the **L1 norm** over the hidden dimension of ``∂L/∂E`` (the
  gradient of the loss w.r.t. the input embeddings), per token; §4.1 / Fig. 5 use its **L2 norm**.

What we compute (:func:`token_scores`):

* ``L`` = the mean cross-entropy over the answer tokens (each answer token's loss comes from the query one
  position earlier: the "answer rows" ``j = p - 1`` for answer positions ``p``), in float32 (float64 for float64
  models), from the logits of the answer rows only.
* Only the answer rows of A matter, and ``∂L/∂A[j, i] = ⟨∂L/∂o_j, v_i⟩`` with ``o_j`` the head's output row
  (``O = A V``). One forward + backward runs through the capturing attention of :mod:`repro.analysis.capture`
  (transformers' sdpa: no T x T matrix); it keeps the query rows ``q_j`` (after RoPE), the keys and values, and a
  tensor hook on the attention output keeps ``∂L/∂o_j``. Afterwards ``A[j, :] = softmax(q_j K^T * scaling + mask)``
  is recomputed for the answer rows only, in float32 (float64 for float64 models). Memory: O(layers x heads x T x
  head_dim) for the kept keys and values (the tensors autograd keeps anyway) plus O(m x T) per head.
* Per layer and head, per key token i: ``ig = Σ_j A[j,i] |∂L/∂A[j,i]|``, the attention mass ``Σ_j A[j,i]`` and the
  FR hits (the share of answer rows whose top-k holds key i; ties as ``torch.topk`` breaks them, keys with weight
  0 never count); per token, ``‖∂L/∂E_i‖_2`` and ``‖∂L/∂E_i‖_1`` (the authors' code's proxy).

:func:`naive_token_scores` is Eq. 1 computed directly (eager attention with ``output_attentions=True`` and
``retain_grad()`` on every T x T attention tensor): the reference for tests and the CD-Mem table, quadratic memory.

Batch size 1 only (one sequence per call). Parameters get no ``.grad`` (they are frozen during the call and their
``requires_grad`` flags restored); the model's attention implementation is restored on exit, also after an error.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

from repro.analysis.capture import (AttentionCall, attention_implementation, capturing_attention, compute_dtype,
                                    mask_rows, row_probabilities)

TYPES = ("supporting", "interference", "irrelevant", "low_frequency")
"""The four token types the paper scores (labels of any other value, e.g. ``prompt``, are left out)."""
CRITICAL = ("supporting", "interference")
"""Critical tokens (App. B): the heads ranked for the "top-30 heads" give the most attention to these."""
DEFAULT_TOP_K = 10
"""FR's k (our default; pass the paper's value where it is known)."""


# -- aggregation -----------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TokenScores:
    """Per-token scores of one sequence (layers, heads, T arrays in float64), and their means per token type."""

    ig: np.ndarray
    """(layers, heads, T): ``Σ_j IG[j, i]`` over the answer rows j (Eq. 1 summed over the answer)."""
    attention: np.ndarray
    """(layers, heads, T): attention mass ``Σ_j A[j, i]`` over the answer rows."""
    fr: np.ndarray
    """(layers, heads, T): share of answer rows whose top-``top_k`` keys hold token i."""
    grad_l2: np.ndarray
    """(T,): ``‖∂L/∂E_i‖_2``, the paper's §4.1 / Fig. 5 gradient score."""
    grad_l1: np.ndarray
    """(T,): ``‖∂L/∂E_i‖_1``, the authors' code's proxy for the IG score."""
    loss: float
    """L, the mean cross-entropy over the answer tokens."""
    answer_positions: tuple[int, ...]
    """Positions p of the answer tokens (the answer rows are p - 1)."""
    top_k: int
    """FR's k."""
    embedding_grad: torch.Tensor | None = None
    """(T, hidden) ``∂L/∂E`` when asked for (``return_embedding_grad=True``), else None."""

    @property
    def length(self) -> int:
        return self.grad_l2.shape[0]

    def _index(self, labels: Sequence[str]) -> dict[str, np.ndarray]:
        lab = np.asarray(list(labels), dtype=object)
        if lab.shape != (self.length,):
            raise ValueError(f"{lab.size} type labels for {self.length} tokens; allowed: one label per token")
        return {t: np.flatnonzero(lab == t) for t in TYPES}

    def top_heads(self, labels: Sequence[str], n: int = 30) -> list[tuple[int, int]]:
        """The ``n`` (layer, head) pairs that give the most attention (summed over the answer rows) to critical
        tokens, best first. ``n`` larger than the model's number of heads is clipped to it, with a warning."""
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
            raise ValueError(f"n={n!r}; allowed: an integer >= 1")
        idx = self._index(labels)
        crit = np.concatenate([idx[t] for t in CRITICAL])
        if crit.size == 0:
            raise ValueError("no supporting or interference tokens in the labels; the top heads are ranked by the "
                             "attention on them")
        layers, heads = self.attention.shape[:2]
        if n > layers * heads:
            warnings.warn(f"top {n} heads asked for; the model has {layers * heads} ({layers} layers x {heads} heads): "
                          "using all of them", stacklevel=2)
            n = layers * heads
        score = self.attention[:, :, crit].sum(-1).ravel()
        order = np.argsort(-score, kind="stable")[:n]
        return [(int(i // heads), int(i % heads)) for i in order]

    def _by_type(self, values: np.ndarray, labels, per_layer: bool, normalized: bool,
                 heads: list[tuple[int, int]] | None = None) -> dict:
        idx = self._index(labels)
        out = {}
        for t in TYPES:
            if idx[t].size == 0:
                out[t] = np.full(values.shape[0], np.nan) if per_layer and values.ndim == 3 else float("nan")
                continue
            per_head = values[..., idx[t]].mean(-1)
            if values.ndim == 1:
                out[t] = float(per_head)
            elif heads is not None:
                out[t] = float(np.mean([per_head[l_, h] for l_, h in heads]))
            else:
                out[t] = per_head.mean(-1) if per_layer else float(per_head.mean())
        return _normalize(out) if normalized else out

    def ig_by_type(self, labels: Sequence[str], per_layer: bool = False, normalized: bool = False) -> dict:
        """Type -> ``IG^(r)`` averaged over heads and layers (``per_layer``: over heads, an array per layer);
        ``normalized``: shares that sum to 1 over the four types (as the paper's Fig. 3). A type without tokens
        gets NaN (and is left out of the shares)."""
        return self._by_type(self.ig, labels, per_layer, normalized)

    def attention_by_type(self, labels: Sequence[str], per_layer: bool = False, normalized: bool = False) -> dict:
        """Type -> mean over its tokens of the attention mass ``Σ_j A[j, i]``, averaged like :meth:`ig_by_type`."""
        return self._by_type(self.attention, labels, per_layer, normalized)

    def fr_by_type(self, labels: Sequence[str], top_heads: int | None = None, per_layer: bool = False,
                   normalized: bool = False) -> dict:
        """Type -> ``FR^(r)`` averaged over answer steps and all heads and layers, or (``top_heads=n``) over the
        :meth:`top_heads` (the paper's top 30; clipped to the model's head count, with a warning)."""
        if top_heads is not None and per_layer:
            raise ValueError("top_heads and per_layer together; allowed: one of them (the top heads span layers)")
        heads = None if top_heads is None else self.top_heads(labels, top_heads)
        return self._by_type(self.fr, labels, per_layer, normalized, heads)

    def grad_by_type(self, labels: Sequence[str], norm: str = "l2", normalized: bool = False) -> dict:
        """Type -> mean over its tokens of the embedding-gradient norm: ``"l2"`` (the paper's §4.1) or ``"l1"``
        (the authors' code's proxy for the IG score)."""
        if norm not in ("l2", "l1"):
            raise ValueError(f"norm={norm!r}; allowed: 'l2', 'l1'")
        return self._by_type(self.grad_l2 if norm == "l2" else self.grad_l1, labels, False, normalized)


def _normalize(values: dict) -> dict:
    """Shares over the types present (NaN types stay NaN; an all-zero total gives NaN)."""
    stacked = np.array([np.asarray(v, dtype=np.float64) for v in values.values()])
    total = np.nansum(stacked, axis=0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shares = stacked / np.where(total == 0, np.nan, total)
    return {t: (float(s) if np.ndim(s) == 0 else s) for t, s in zip(values, shares)}


# -- per-row statistics ------------------------------------------------------------------------------
def topk_hits(rows: torch.Tensor, k: int) -> torch.Tensor:
    """Share of the rows (dim -2) whose top-``k`` entries hold each key (dim -1); entries equal to 0 (masked keys)
    never count, ties are broken as ``torch.topk`` does. ``rows`` (..., m, T) -> (..., T)."""
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise ValueError(f"top_k={k!r}; allowed: an integer >= 1")
    vals, idx = rows.topk(min(int(k), rows.shape[-1]), dim=-1)
    hits = torch.zeros_like(rows).scatter_(-1, idx, (vals > 0).to(rows.dtype))
    return hits.mean(-2)


def _row_stats(a: torch.Tensor, da: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """From answer rows A (…, m, T) and ∂L/∂A (…, m, T): IG, attention mass and FR hits per key (…, T)."""
    return (a * da.abs()).sum(-2), a.sum(-2), topk_hits(a, k)


# -- inputs ------------------------------------------------------------------------------------------
def _check_ids(input_ids) -> torch.Tensor:
    ids = torch.as_tensor(input_ids)
    if ids.ndim == 1:
        ids = ids[None]
    if ids.ndim != 2 or ids.shape[0] != 1:
        raise ValueError(f"input_ids of shape {tuple(ids.shape)}; allowed: (T,) or (1, T): batch size 1 only")
    if ids.shape[1] < 2:
        raise ValueError(f"input of {ids.shape[1]} token(s); allowed: at least 2 (an answer token needs a query)")
    return ids.long()


def answer_targets(input_ids: torch.Tensor, answer_positions=None, answer_mask=None,
                   labels=None) -> tuple[torch.Tensor, torch.Tensor]:
    """(positions, targets) of the answer tokens from exactly one of: ``answer_positions`` (token indices p, the
    targets are ``input_ids[p]``), ``answer_mask`` (boolean (T,) or (1, T)) or ``labels`` ((T,) or (1, T), HF
    convention: aligned with ``input_ids``, -100 = not an answer token; the targets are the labels)."""
    t = input_ids.shape[1]
    given = [x is not None for x in (answer_positions, answer_mask, labels)]
    if sum(given) != 1:
        raise ValueError("give exactly one of answer_positions, answer_mask, labels")
    targets = None
    if answer_positions is not None:
        pos = torch.as_tensor(answer_positions).reshape(-1)
        if pos.dtype in (torch.bool,) or pos.is_floating_point():
            raise ValueError(f"answer_positions of dtype {pos.dtype}; allowed: integers (use answer_mask for a mask)")
        pos = pos.long()
    else:
        m = torch.as_tensor(answer_mask if answer_mask is not None else labels)
        m = m.reshape(-1) if m.ndim == 2 and m.shape[0] == 1 else m
        if m.shape != (t,):
            name = "answer_mask" if answer_mask is not None else "labels"
            raise ValueError(f"{name} of shape {tuple(m.shape)}; allowed: ({t},) or (1, {t}) like input_ids")
        if answer_mask is not None:
            pos = torch.nonzero(m.bool()).reshape(-1)
        else:
            pos = torch.nonzero(m != -100).reshape(-1)
            targets = m[pos].long()
    if pos.numel() == 0:
        raise ValueError("no answer tokens; allowed: at least one answer position in 1..T-1")
    bad = pos[(pos < 1) | (pos >= t)]
    if bad.numel():
        raise ValueError(f"answer positions {bad.tolist()[:5]} out of range; allowed: 1..{t - 1} (position 0 has no "
                         "preceding query; T is the input length)")
    if torch.unique(pos).numel() != pos.numel():
        raise ValueError("repeated answer positions; allowed: each position once")
    order = torch.argsort(pos)
    pos = pos[order]
    targets = input_ids[0, pos] if targets is None else targets[order]
    return pos.to(input_ids.device), targets.to(input_ids.device)


@contextlib.contextmanager
def frozen_parameters(model: torch.nn.Module) -> Iterator[None]:
    """Within the block no parameter requires grad (nothing lands in ``.grad``); the flags are restored on exit."""
    params = list({id(p): p for p in model.parameters()}.values())
    flags = [p.requires_grad for p in params]
    try:
        for p in params:
            p.requires_grad_(False)
        yield
    finally:
        for p, f in zip(params, flags):
            p.requires_grad_(f)


def _embeddings(model: torch.nn.Module, ids: torch.Tensor, inputs_embeds: torch.Tensor | None) -> torch.Tensor:
    """The input embeddings E (1, T, hidden) as a fresh leaf that requires grad (the lookup's, or the caller's in
    the embedding matrix's dtype and device)."""
    table = model.get_input_embeddings()
    if inputs_embeds is None:
        with torch.no_grad():
            emb = table(ids)
    else:
        emb = torch.as_tensor(inputs_embeds)
        emb = emb[None] if emb.ndim == 2 else emb
        if emb.ndim != 3 or emb.shape[:2] != ids.shape:
            raise ValueError(f"inputs_embeds of shape {tuple(inputs_embeds.shape)}; allowed: (T, hidden) or "
                             f"(1, T, hidden) with T = {ids.shape[1]} (the length of input_ids)")
        emb = emb.to(table.weight.device, table.weight.dtype)
    return emb.detach().requires_grad_(True)


def _answer_loss(model: torch.nn.Module, emb: torch.Tensor, rows: torch.Tensor, targets: torch.Tensor,
                 position_ids: torch.Tensor | None, **kwargs):
    """Mean CE over the answer tokens from the logits of the answer rows only; returns (loss, model output)."""
    mask = torch.ones(emb.shape[:2], dtype=torch.long, device=emb.device)  # fully causal (no packing guess)
    if "logits_to_keep" in inspect.signature(model.forward).parameters:  # logits of the answer rows only
        kwargs["logits_to_keep"] = rows
    out = model(inputs_embeds=emb, attention_mask=mask, position_ids=position_ids, use_cache=False, **kwargs)
    logits = out.logits[0]
    logits = logits if logits.shape[0] == rows.numel() else logits[rows]
    loss = torch.nn.functional.cross_entropy(logits.to(compute_dtype(logits.dtype)), targets)
    return loss, out


def _grad_norms(grad: torch.Tensor) -> tuple[np.ndarray, np.ndarray]:
    g = grad.to(compute_dtype(grad.dtype))
    return (g.norm(dim=-1).double().cpu().numpy(), g.abs().sum(-1).double().cpu().numpy())


def _prepare(model, input_ids, answer_positions, answer_mask, labels, top_k, position_ids):
    ids = _check_ids(input_ids).to(model.get_input_embeddings().weight.device)
    pos, targets = answer_targets(ids, answer_positions, answer_mask, labels)
    if isinstance(top_k, bool) or not isinstance(top_k, (int, np.integer)) or top_k < 1:
        raise ValueError(f"top_k={top_k!r}; allowed: an integer >= 1")
    if position_ids is not None:
        position_ids = torch.as_tensor(position_ids).reshape(1, -1).to(ids.device)
        if position_ids.shape != ids.shape:
            raise ValueError(f"position_ids of shape {tuple(position_ids.shape)}; allowed: {tuple(ids.shape)}")
    return ids, pos, targets, int(top_k), position_ids


# -- memory-linear scores ------------------------------------------------------------------------------
@dataclass
class _Kept:
    """What one layer's capture keeps for the recompute (not the output tensor: nothing holds the graph)."""

    q_rows: torch.Tensor
    """(heads, m, head_dim) query rows of the answer rows."""
    key: torch.Tensor
    """(kv_heads, T, head_dim)."""
    value: torch.Tensor
    """(kv_heads, T, head_dim)."""
    allowed: torch.Tensor
    """(1|heads, m, T) boolean mask rows."""
    scaling: float
    groups: int
    grad_rows: torch.Tensor | None = None
    """(heads, m, head_dim) ∂L/∂o_j, set by the tensor hook during backward."""


def token_scores(model: torch.nn.Module, input_ids, answer_positions=None, *, answer_mask=None, labels=None,
                 top_k: int = DEFAULT_TOP_K, inputs_embeds: torch.Tensor | None = None,
                 position_ids: torch.Tensor | None = None, return_embedding_grad: bool = False,
                 progress: bool = False) -> TokenScores:
    """IG, attention mass and FR hits per layer, head and token, and the embedding-gradient norms, of one sequence
    (batch size 1), memory linear in T (module docstring).

    ``input_ids`` (T,) or (1, T); the answer from exactly one of ``answer_positions`` / ``answer_mask`` /
    ``labels`` (:func:`answer_targets`); ``inputs_embeds`` ((T, hidden) or (1, T, hidden)) replaces the embedding
    lookup (e.g. CDT §3.2's denoised embeddings E'; ``input_ids`` still gives the length and the targets);
    ``position_ids`` are passed to the model (with an all-ones attention mask: fully causal).
    ``return_embedding_grad``: keep ``∂L/∂E`` (T, hidden) in the result. Works on HF causal LMs that use the
    attention-function registry (Llama, Qwen2, Mistral, ...); the caller chooses train/eval mode (attention dropout
    must be off).
    """
    ids, pos, targets, k, position_ids = _prepare(model, input_ids, answer_positions, answer_mask, labels, top_k,
                                                  position_ids)
    rows = pos - 1
    kept: dict[int, _Kept] = {}

    def on_call(call: AttentionCall) -> None:
        r = rows.to(call.query.device)
        item = _Kept(call.query[:, r], call.key, call.value, mask_rows(call, r), call.scaling, call.groups)
        kept[call.layer] = item

        def keep_grad(grad: torch.Tensor) -> None:
            item.grad_rows = grad[0, r].detach().transpose(0, 1)  # (heads, m, head_dim)

        if call.output.requires_grad:
            call.output.register_hook(keep_grad)

    with frozen_parameters(model), capturing_attention(model, on_call), torch.enable_grad():
        emb = _embeddings(model, ids, inputs_embeds)
        loss, _ = _answer_loss(model, emb, rows, targets, position_ids)
        loss.backward()
    grad = emb.grad[0]
    if not kept:
        raise ValueError(f"no attention call reached the capturing function in {type(model).__name__}")
    layers = sorted(kept)
    heads, t = kept[layers[0]].q_rows.shape[0], ids.shape[1]
    ig, att, fr = (np.zeros((len(layers), heads, t)) for _ in range(3))
    for li, layer in enumerate(tqdm(layers, desc="IG rows", disable=not progress)):
        item = kept.pop(layer)  # frees this layer's keys and values once done
        for h in range(heads):
            kv = h // item.groups
            a = row_probabilities(item.q_rows[h], item.key[kv], item.allowed[h % item.allowed.shape[0]], item.scaling)
            if item.grad_rows is None:  # this layer's output did not reach the loss
                da = torch.zeros_like(a)
            else:
                da = item.grad_rows[h].to(a.dtype) @ item.value[kv].to(a.dtype).T
            for out, v in zip((ig, att, fr), _row_stats(a, da, k)):
                out[li, h] = v.double().cpu().numpy()
    l2, l1 = _grad_norms(grad)
    return TokenScores(ig=ig, attention=att, fr=fr, grad_l2=l2, grad_l1=l1, loss=float(loss.detach()),
                       answer_positions=tuple(pos.tolist()), top_k=k,
                       embedding_grad=grad.detach() if return_embedding_grad else None)


# -- the direct Eq. 1 (reference) -----------------------------------------------------------------------
def naive_token_scores(model: torch.nn.Module, input_ids, answer_positions=None, *, answer_mask=None, labels=None,
                       top_k: int = DEFAULT_TOP_K, inputs_embeds: torch.Tensor | None = None,
                       position_ids: torch.Tensor | None = None, return_embedding_grad: bool = False,
                       attn_implementation: str = "eager") -> TokenScores:
    """The same scores as :func:`token_scores`, by Eq. 1 directly: the model's eager attention with
    ``output_attentions=True``, ``retain_grad()`` on every (1, heads, T, T) attention tensor, ``IG = A ⊙ |A.grad|``
    summed over the answer rows. Quadratic memory: for tests and the CD-Mem table only. Eager attention computes
    its softmax in float32 whatever the model's dtype (transformers' ``eager_attention_forward``), so a float64
    model agrees with :func:`token_scores` to ~1e-7; ``attn_implementation`` names another registered function that
    returns the weights (e.g. an all-float64 eager, for a tight comparison)."""
    ids, pos, targets, k, position_ids = _prepare(model, input_ids, answer_positions, answer_mask, labels, top_k,
                                                  position_ids)
    rows = pos - 1
    with frozen_parameters(model), attention_implementation(model, attn_implementation), torch.enable_grad():
        emb = _embeddings(model, ids, inputs_embeds)
        loss, out = _answer_loss(model, emb, rows, targets, position_ids, output_attentions=True)
        attentions = out.attentions
        if not attentions or any(a is None for a in attentions):
            raise ValueError(f"{type(model).__name__} returned no attention weights with eager attention")
        for a in attentions:
            a.retain_grad()
        loss.backward()
    per_layer = []
    for a in attentions:
        ar = a[0][:, rows].detach()
        dar = a.grad[0][:, rows] if a.grad is not None else torch.zeros_like(ar)
        dt = compute_dtype(ar.dtype)
        per_layer.append([v.double().cpu().numpy() for v in _row_stats(ar.to(dt), dar.to(dt), k)])
    grad = emb.grad[0]
    l2, l1 = _grad_norms(grad)
    ig, att, fr = (np.stack([p[i] for p in per_layer]) for i in range(3))
    return TokenScores(ig=ig, attention=att, fr=fr, grad_l2=l2, grad_l1=l1, loss=float(loss.detach()),
                       answer_positions=tuple(pos.tolist()), top_k=k,
                       embedding_grad=grad.detach() if return_embedding_grad else None)
