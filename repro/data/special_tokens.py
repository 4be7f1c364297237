"""Which special token separates documents, read from the tokenizer (no transformers import: any HF-style
tokenizer works).

Packed training text puts one token before every document (:func:`document_separator`). The rule, in order:

1. the tokenizer's **BOS**, unless it is a chat-turn marker (the testbed tokenizer's ``<|bos|>``, Llama's ``<s>``,
   Llama-3's ``<|begin_of_text|>``, Gemma's ``<bos>``, GPT-2's ``<|endoftext|>``);
2. else **``<|endoftext|>``** when the vocabulary has it (SmolLM2-Instruct, whose BOS ``<|im_start|>`` opens a chat
   turn and whose EOS ``<|im_end|>`` closes one; Qwen2, which has no BOS);
3. else the **EOS**.

A chat-turn marker (:func:`chat_markers`) is one of :data:`CHAT_MARKERS` or a special token written literally in
the tokenizer's chat template: a template that opens every turn with ``<|im_start|>`` marks it as a turn opener,
while one that writes ``{{ bos_token }}`` (Llama-3, Gemma) leaves its BOS a document start.

Prompts (retrieval tasks, evaluation, analyses) are not packed: they get what the tokenizer itself adds with
``add_special_tokens=True`` (its own ``add_bos_token``-style setting), as HF's pipelines and lm-eval do. The
testbed tokenizer adds ``<|bos|>``, its document separator; SmolLM2's adds nothing.
"""

from __future__ import annotations

CHAT_MARKERS: frozenset[str] = frozenset({
    "<|im_start|>", "<|im_end|>",  # ChatML (SmolLM2, Qwen)
    "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>",  # Llama-3
    "<start_of_turn>", "<end_of_turn>",  # Gemma
    "[INST]", "[/INST]",  # Llama-2 / Mistral
    "<|user|>", "<|assistant|>", "<|system|>", "<|end|>",  # Phi-3, Zephyr
})
"""Special tokens that open or close a chat turn in common chat formats, whether or not a chat template names them."""

ENDOFTEXT = "<|endoftext|>"
"""The GPT-2-style end-of-text token many tokenizers keep as their pretraining document separator."""


def _template_text(tokenizer) -> str:
    """The tokenizer's chat template(s) as one string ('' when it has none)."""
    t = getattr(tokenizer, "chat_template", None)
    if isinstance(t, dict):
        return "\n".join(str(v) for v in t.values())
    return t if isinstance(t, str) else ""


def chat_markers(tokenizer) -> frozenset[str]:
    """The tokenizer's chat-turn markers: :data:`CHAT_MARKERS` and every special token its chat template writes
    literally."""
    text = _template_text(tokenizer)
    special = getattr(tokenizer, "all_special_tokens", None) or []
    return CHAT_MARKERS | frozenset(s for s in special if s and s in text)


def _token_id(tokenizer, token: str) -> int | None:
    """The id of ``token`` when it is in the vocabulary (special tokens included), else None."""
    return tokenizer.get_vocab().get(token)


def document_separator(tokenizer) -> int:
    """The token id that starts every packed document (the rule in the module docstring): BOS unless it is a
    chat-turn marker, else ``<|endoftext|>`` when present, else EOS. ValueError when none applies."""
    markers = chat_markers(tokenizer)
    bos, eos = getattr(tokenizer, "bos_token", None), getattr(tokenizer, "eos_token", None)
    if bos is not None and tokenizer.bos_token_id is not None and bos not in markers:
        return int(tokenizer.bos_token_id)
    end = _token_id(tokenizer, ENDOFTEXT)
    if end is not None:
        return int(end)
    if eos is not None and tokenizer.eos_token_id is not None:
        return int(tokenizer.eos_token_id)
    raise ValueError(f"the tokenizer has no document separator: its BOS {bos!r} is a chat-turn marker (or absent), "
                     f"it has no {ENDOFTEXT} and no EOS; allowed: a tokenizer with a plain BOS, {ENDOFTEXT} or an EOS")
