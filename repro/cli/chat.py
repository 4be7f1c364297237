"""``--chat-template auto|on|off`` of ``evaluate``: whether prompts go through the tokenizer's chat template, and how a
task's prompt is placed in it (as lm-eval's ``--apply_chat_template`` and RULER's chat templates place it)."""

from __future__ import annotations

from repro.cli.common import CLIError

CHAT_MODES: tuple[str, ...] = ("auto", "on", "off")
"""The values of ``--chat-template``."""


def chat_on(tok, mode: str, where: str) -> bool:
    """Whether prompts go through ``tok``'s chat template under ``--chat-template mode``; ``on`` for a tokenizer
    without one is a :class:`CLIError` naming ``where`` (the tokenizer's folder)."""
    has = bool(getattr(tok, "chat_template", None))
    if mode == "on" and not has:
        raise CLIError(f"--chat-template on: the tokenizer of {where} has no chat template; allowed: --chat-template "
                       "off or auto, or a tokenizer whose tokenizer_config.json or chat_template.jinja holds one")
    return has if mode == "auto" else mode == "on"


def chat_prompt(tok, prompt: str, answer_prefix: str | None = None) -> str:
    """``prompt`` in ``tok``'s chat template: the prompt without its ``answer_prefix`` as the user's turn, the
    generation prompt, then the answer prefix (without its leading blanks) opening the assistant's turn, where RULER
    and lm-eval put a task's answer prefix. A leading BOS that the tokenizer adds itself is left out of the text, so
    it is not there twice."""
    question, prefix = prompt, ""
    if answer_prefix and prompt.endswith(answer_prefix):
        question, prefix = prompt[:-len(answer_prefix)].rstrip(), answer_prefix.lstrip()
    text = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                   tokenize=False)
    bos = tok.bos_token
    if bos and text.startswith(bos) and tok("").input_ids[:1] == [tok.bos_token_id]:
        text = text[len(bos):]
    return text + prefix
