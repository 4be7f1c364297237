"""``--chat-template auto|on|off`` of ``evaluate``: whether prompts go through the tokenizer's chat template, and how a
task's prompt is placed in it (as lm-eval's ``--apply_chat_template`` and RULER's chat templates place it)."""

from __future__ import annotations

from repro.cli.common import CLIError
from repro.evaluate import chat_prompt  # noqa: F401  (where it lived: the evaluation's, used by the CLI too)

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
