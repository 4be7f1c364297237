"""Batched greedy generation with a KV cache: the evaluation's generator.

:func:`greedy_generate` is what HF ``generate(do_sample=False)`` computes for a
left-padded batch (tests check token-for-token equality), without its per-step
machinery (logits processors, stopping criteria, candidate bookkeeping), which
on a small model costs more than the model itself: the prompt is encoded once
with ``logits_to_keep=1``, then one token per step for the rows still running.
It calls only the model's public forward (``past_key_values``, ``position_ids``,
``attention_mask``, ``logits_to_keep``), so it works for any HF causal LM with a cache.
"""

from __future__ import annotations

from typing import Sequence

import torch


@torch.no_grad()
def greedy_ids(model, input_ids: torch.Tensor, attention_mask: torch.Tensor, max_new_tokens: int,
               eos_token_id: int | None, pad_token_id: int) -> torch.Tensor:
    """Greedy continuation ids (B, <= max_new_tokens) of a left-padded batch; rows that ended
    (EOS) are padded with ``pad_token_id`` after their EOS, like HF ``generate``."""
    if max_new_tokens < 1:
        raise ValueError(f"max_new_tokens={max_new_tokens}; allowed: >= 1")
    mask = attention_mask.long()
    pos = (mask.cumsum(-1) - 1).clamp_min(0)
    out = model(input_ids=input_ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1)
    cache = out.past_key_values
    nxt = out.logits[:, -1].argmax(-1)
    done = torch.zeros(len(input_ids), dtype=torch.bool, device=input_ids.device)
    last = pos[:, -1]
    new: list[torch.Tensor] = []
    for step in range(max_new_tokens):
        nxt = torch.where(done, torch.full_like(nxt, pad_token_id), nxt)
        new.append(nxt)
        if eos_token_id is not None:
            done |= nxt == eos_token_id
        if step == max_new_tokens - 1 or bool(done.all()):
            break
        mask = torch.cat([mask, torch.ones_like(mask[:, :1])], dim=1)
        last = last + 1
        out = model(input_ids=nxt[:, None], attention_mask=mask, position_ids=last[:, None], past_key_values=cache,
                    use_cache=True, logits_to_keep=1)
        cache = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1)
    return torch.stack(new, dim=1)


def encode_left(tokenizer, prompts: Sequence[str], device) -> tuple[torch.Tensor, torch.Tensor]:
    """Left-padded ``(input_ids, attention_mask)`` of ``prompts``."""
    side = tokenizer.padding_side
    tokenizer.padding_side = "left"
    try:
        enc = tokenizer(list(prompts), return_tensors="pt", padding=True)
    finally:
        tokenizer.padding_side = side
    return enc.input_ids.to(device), enc.attention_mask.to(device)


def greedy_generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
    """Greedy continuations of ``prompts`` (decoded, special tokens dropped)."""
    ids, mask = encode_left(tokenizer, prompts, next(model.parameters()).device)
    new = greedy_ids(model, ids, mask, max_new_tokens, tokenizer.eos_token_id, tokenizer.pad_token_id)
    return [tokenizer.decode(row, skip_special_tokens=True) for row in new]
