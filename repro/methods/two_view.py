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

Rows with different ``s`` run their suffixes in one decoder call, laid end to end, over their prefixes laid end
to end in the cache (:mod:`repro.attention.suffix`). Only public extension points are used: ``position_ids``,
``past_key_values`` (a ``DynamicCache`` built from tensors), explicit attention masks and an attention function
registered with transformers.
"""

from __future__ import annotations

import torch
from transformers import DynamicCache

from repro.attention.suffix import SUFFIX, register, suffix_layout
from repro.attention.switch import attention_implementation
from repro.models import causal_doc_mask, single_document
from repro.parallel.rows import active, decoder_hidden


def _mask(model: torch.nn.Module, input_ids: torch.Tensor, doc_ids: torch.Tensor | None) -> torch.Tensor:
    """The explicit mask of a full pass: all ones (plain rows: jumps in position ids are not document starts)
    or an additive 4-D causal-and-same-document mask (packed rows; never ``None``, which a cache would
    silently turn into cross-document attention)."""
    if single_document(doc_ids):
        return torch.ones_like(input_ids)
    return causal_doc_mask(doc_ids, next(model.parameters()).dtype)


def standard_pass(model: torch.nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor,
                  doc_ids: torch.Tensor | None = None, cache: bool = False, **kwargs):
    """The standard view's final hidden states (B, T, H) and, with ``cache``, its key/value cache (in the graph).
    Inside :func:`repro.parallel.rows.split_rows`: this rank's tokens through the decoder, the full rows back, no
    cache."""
    if (rows := active()) is not None:
        if cache:
            raise ValueError("the prefix-shared pass needs the whole rows' key/value cache, which sequence "
                             "parallelism shards; allowed: cache=False (two full passes)")
        return decoder_hidden(model, input_ids, position_ids, doc_ids, rows, **kwargs), None
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
    states (same tensors, in the graph); every row's suffix at the perturbed indices comes from one decoder call
    over the suffixes laid end to end, attending to the cached prefix keys and values
    (:mod:`repro.attention.suffix`).
    """
    B, T = input_ids.shape
    if split.shape != (B,) or bool((split < 0).any()) or bool((split >= T).any()):
        raise ValueError(f"split {split.tolist()}: expected one split per row with 0 <= split < T = {T}")
    splits = split.tolist()
    if not any(splits):
        return perturbed_hidden_naive(model, input_ids, perturbed_ids, doc_ids)
    layout = suffix_layout(split, T, doc_ids)
    prefix = DynamicCache(ddp_cache_data=[
        tuple(torch.cat([x[b:b + 1, :, :s] for b, s in enumerate(splits) if s], 2) for x in (k, v))
        for k, v, *_ in cache], config=model.config)
    ids = torch.cat([input_ids[b, s:] for b, s in enumerate(splits)])[None]
    pos = torch.cat([perturbed_ids[b, s:] for b, s in enumerate(splits)])[None]
    register()
    with attention_implementation(model, SUFFIX):
        out = model.get_decoder()(input_ids=ids, position_ids=pos, past_key_values=prefix, use_cache=True,
                                  suffix_layout=layout).last_hidden_state[0]
    rows, at = [], 0
    for b, s in enumerate(splits):
        rows.append(torch.cat([hidden[b, :s], out[at:at + T - s]], 0))
        at += T - s
    return torch.stack(rows)
