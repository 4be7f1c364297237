"""LongPPL across tokenizers: the evaluator's key tokens carried to the evaluated model by character offsets.

The official code (PKU-ML/LongPPL, ``longppl/longppl.py``) lets the evaluator and the evaluated model tokenize
the text differently, and aligns them through the text itself:

1. ``find_key_token`` tokenizes the text with the evaluator's tokenizer *with* its special tokens (a BOS where
   the tokenizer adds one) and with character offsets, finds the key tokens (:mod:`repro.analysis.longppl`),
   and turns them into character spans: the key tokens' offsets, in token order, with each span merged into the
   previous one when it starts exactly where that one ends (``merge_intervals``; key tokens separated by a
   non-key character or token stay apart). :func:`key_spans` does this.
2. ``compute_longppl`` tokenizes the text with the evaluated model's tokenizer *without* special tokens, and
   ``cal_overlap`` flags its token ``i`` as key when the token's character span lies inside one span
   (``start >= span_start and end <= span_end``), walking tokens and spans together in order. A token only
   partly inside a span is not key. :func:`tokens_in_spans` does this, with the same walk.
3. The evaluated model's LongPPL is then computed on its own tokens (:func:`repro.analysis.longppl.longppl`).

Where we differ: ``cal_overlap`` stores key token ``i`` as loss index ``i - 1``, so a key token 0 would read
index -1 (the *last* target's loss); we never flag token 0 (it is predicted by nothing), and it cannot be key in
practice anyway (the evaluator scores only tokens from its ``window``-th on). Offsets must come from the
tokenizers (``return_offsets_mapping``, i.e. "fast" tokenizers); the official fallback for slow tokenizers, which
rebuilds offsets by decoding token pairs, is not implemented: a tokenizer without offsets is an error.
"""

from __future__ import annotations

from typing import Sequence

import torch

from repro.analysis.longppl import LongPPLConfig, ModelLike, as_model, key_tokens, longppl

Span = tuple[int, int]
"""Character offsets ``(start, end)``, end exclusive (a tokenizer's ``offset_mapping`` entry)."""


def _spans(offsets) -> list[Span]:
    return [(int(a), int(b)) for a, b in (offsets.tolist() if isinstance(offsets, torch.Tensor) else offsets)]


def key_spans(offsets: Sequence[Span] | torch.Tensor, key: Sequence[bool] | torch.Tensor) -> list[Span]:
    """Character spans of the key tokens: the offsets of the tokens with ``key[i]`` True, in token order, each
    merged into the previous span when it starts exactly at that span's end (official ``merge_intervals``)."""
    offs = _spans(offsets)
    flags = key.tolist() if isinstance(key, torch.Tensor) else list(key)
    if len(flags) != len(offs):
        raise ValueError(f"key has {len(flags)} entries for {len(offs)} offsets; allowed: one per token")
    merged: list[list[int]] = []
    for (a, b), is_key in zip(offs, flags):
        if not is_key:
            continue
        if merged and a == merged[-1][1]:
            merged[-1][1] = b
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]


def tokens_in_spans(offsets: Sequence[Span] | torch.Tensor, spans: Sequence[Span]) -> torch.Tensor:
    """(T,) bool: token ``i`` lies wholly inside one of ``spans`` (sorted, as :func:`key_spans` returns them),
    found by the official ``cal_overlap`` walk: inside the current span -> key, next token; starts before it ->
    next token; otherwise -> next span. Token 0 is never flagged (module docstring)."""
    offs = _spans(offsets)
    out = torch.zeros(len(offs), dtype=torch.bool)
    i = j = 0
    while i < len(offs) and j < len(spans):
        (a, b), (s, e) = offs[i], spans[j]
        if a >= s and b <= e:
            out[i] = i > 0
            i += 1
        elif a < s:
            i += 1
        else:
            j += 1
    return out


def transfer_key_mask(evaluator_offsets: Sequence[Span] | torch.Tensor, evaluator_key: Sequence[bool] | torch.Tensor,
                      model_offsets: Sequence[Span] | torch.Tensor) -> torch.Tensor:
    """(T_model,) bool: the evaluated model's key tokens from the evaluator's key tokens of the same text
    (:func:`key_spans`, then :func:`tokens_in_spans`)."""
    return tokens_in_spans(model_offsets, key_spans(evaluator_offsets, evaluator_key))


def _encode(tokenizer, text: str, add_special_tokens: bool) -> tuple[torch.Tensor, list[Span]]:
    try:
        enc = tokenizer(text, add_special_tokens=add_special_tokens, return_offsets_mapping=True)
    except NotImplementedError as e:
        raise ValueError(f"{type(tokenizer).__name__} gives no character offsets; allowed: a fast tokenizer "
                         "(return_offsets_mapping=True)") from e
    return torch.tensor(enc["input_ids"], dtype=torch.long), _spans(enc["offset_mapping"])


def compute_longppl_text(text: str, model: ModelLike, tokenizer, evaluator: ModelLike, evaluator_tokenizer,
                         cfg: LongPPLConfig = LongPPLConfig()) -> dict:
    """LongPPL of ``model`` on ``text`` with key tokens chosen by ``evaluator``, each with its own tokenizer, as
    the official ``compute_longppl`` does: the evaluator reads the text with special tokens, the model without,
    and key tokens cross by character spans. Returns :func:`repro.analysis.longppl.longppl`'s dict (one
    document) plus ``key_spans`` and the model's ``key_mask`` (T,)."""
    model, evaluator = as_model(model), as_model(evaluator)
    ev_ids, ev_offsets = _encode(evaluator_tokenizer, text, True)
    ids, offsets = _encode(tokenizer, text, False)
    spans = key_spans(ev_offsets, key_tokens(evaluator, ev_ids[None], cfg)[0].cpu())
    key = tokens_in_spans(offsets, spans)
    return {**longppl(model, ids[None], key[None], cfg.chunk), "key_spans": spans, "key_mask": key}
