"""The two forward passes of RoPE-perturbed self-distillation: the standard view and the perturbed view.

Both passes run the same model on the same tokens and differ only in the RoPE indices (self-distillation
§2.2) or in a perturbation applied to the second pass only (NoPE, attention noise, dropout: §3.6). The
functions here return the final hidden states of both views; :mod:`repro.methods.selfdistill` turns them
into the CLM and KL terms.

**The prefix-shared pass.** With the skip view ``r_i = i + y [i >= s]`` the perturbed view's tokens
``[0, s)`` have the standard view's indices and attend only to each other, so their hidden states, keys and
values are the standard view's at every layer. :func:`perturbed_hidden_shared` therefore runs the standard
view once with a key/value cache, keeps the cache *in the autograd graph*, and runs only the suffix
``[s, T)`` a second time, at the shifted indices, attending to the standard pass's prefix keys and values.
The loss and every parameter gradient equal those of two full passes (:func:`perturbed_hidden_naive`;
``tests/methods/test_two_view.py`` checks both in float64 to 1e-10): the prefix is the same function of the
parameters in both computations, so the gradient that the naive path sends through the perturbed pass's
prefix arrives through the standard pass's prefix instead. With ``s`` uniform the second pass costs about
half a pass: ~1.5x a standard step instead of 2x.

Rows with different ``s`` run their suffixes in groups of equal ``s`` (the cache of a group is the
standard cache's first ``s`` positions of those rows). Only public extension points are used:
``position_ids``, ``past_key_values`` (a ``DynamicCache`` built from tensors) and explicit attention masks.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from repro.models import causal_doc_mask, single_document


def _mask(model: torch.nn.Module, input_ids: torch.Tensor, doc_ids: torch.Tensor | None) -> torch.Tensor:
    """The explicit mask of a full pass: all ones (plain rows: jumps in position ids are not document starts)
    or an additive 4-D causal-and-same-document mask (packed rows; never ``None``, which a cache would
    silently turn into cross-document attention)."""
    if single_document(doc_ids):
        return torch.ones_like(input_ids)
    return causal_doc_mask(doc_ids, next(model.parameters()).dtype)


def _suffix_mask(model: torch.nn.Module, doc_ids: torch.Tensor | None, rows: torch.Tensor, s: int,
                 T: int) -> torch.Tensor:
    """Mask of the suffix pass of ``rows``: queries ``[s, T)`` over keys ``[0, T)`` (cache prefix + suffix)."""
    if single_document(doc_ids):
        return torch.ones((len(rows), T), dtype=torch.long, device=rows.device)
    d = doc_ids[rows]
    q = torch.arange(s, T, device=d.device)
    k = torch.arange(T, device=d.device)
    allowed = (k[None, :] <= q[:, None])[None] & (d[:, s:, None] == d[:, None, :])
    dtype = next(model.parameters()).dtype
    return torch.zeros(allowed.shape, dtype=dtype, device=d.device).masked_fill(
        ~allowed, torch.finfo(dtype).min)[:, None]


def standard_pass(model: torch.nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor,
                  doc_ids: torch.Tensor | None = None, cache: bool = False, **kwargs):
    """The standard view's final hidden states (B, T, H) and, with ``cache``, its key/value cache (in the graph)."""
    past = DynamicCache(config=model.config) if cache else None
    out = model.get_decoder()(input_ids=input_ids, position_ids=position_ids,
                              attention_mask=_mask(model, input_ids, doc_ids), past_key_values=past,
                              use_cache=cache, **kwargs)
    return out.last_hidden_state, past


def perturbed_hidden_naive(model: torch.nn.Module, input_ids: torch.Tensor, perturbed_ids: torch.Tensor,
                           doc_ids: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
    """The perturbed view's final hidden states (B, T, H) from a full second pass at ``perturbed_ids``."""
    return standard_pass(model, input_ids, perturbed_ids, doc_ids, **kwargs)[0]


def perturbed_hidden_shared(model: torch.nn.Module, input_ids: torch.Tensor, perturbed_ids: torch.Tensor,
                            split: torch.Tensor, hidden: torch.Tensor, cache: DynamicCache,
                            doc_ids: torch.Tensor | None = None) -> torch.Tensor:
    """The perturbed view's final hidden states (B, T, H) for views that equal the standard view before
    ``split[b]`` in row ``b`` (skip views), from the standard pass's ``hidden`` and ``cache``
    (:func:`standard_pass` with ``cache=True``): positions ``< split[b]`` are the standard pass's own hidden
    states (same tensors, in the graph), the suffix comes from one pass per distinct split value over those
    rows' suffix tokens at the perturbed indices, attending to the cached prefix keys and values.
    """
    B, T = input_ids.shape
    if split.shape != (B,) or bool((split < 0).any()) or bool((split >= T).any()):
        raise ValueError(f"split {split.tolist()}: expected one split per row with 0 <= split < T = {T}")
    layers = list(cache)
    rows_out: list[torch.Tensor | None] = [None] * B
    for s in sorted(set(split.tolist())):
        rows = torch.nonzero(split == s).flatten()
        if s == 0:
            suffix = perturbed_hidden_naive(model, input_ids[rows], perturbed_ids[rows],
                                            None if doc_ids is None else doc_ids[rows])
        else:
            prefix = DynamicCache(ddp_cache_data=[(k[rows, :, :s], v[rows, :, :s]) for k, v, *_ in layers],
                                  config=model.config)
            suffix = model.get_decoder()(input_ids=input_ids[rows, s:], position_ids=perturbed_ids[rows, s:],
                                         attention_mask=_suffix_mask(model, doc_ids, rows, s, T),
                                         past_key_values=prefix, use_cache=True).last_hidden_state
        for i, r in enumerate(rows.tolist()):
            rows_out[r] = torch.cat([hidden[r, :s], suffix[i]], 0) if s else suffix[i]
    return torch.stack(rows_out)
