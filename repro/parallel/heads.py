"""Which sequence-parallel degrees a model allows, read from its ``config.json`` alone (before any weight loads).

Ulysses attention (:mod:`repro.parallel.ulysses`) hands each of the ``N`` ranks of a row ``H / N`` of the query
heads over the whole row, so ``N`` must divide the query heads ``H``. The key/value heads need not divide: when
they do not, each rank repeats them up to the query heads before the all-to-all (more traffic, the same result).
So the degrees that work are the divisors of ``H`` above 1 (:func:`workable_degrees`); ``train --sequence-parallel
N`` is refused with them before the model loads (:func:`check_model_heads`), and again, should a caller skip that,
by :func:`repro.parallel.rows.setup` on the loaded model.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping

QUERY_KEYS: tuple[str, ...] = ("num_attention_heads", "n_head", "num_heads")
"""config.json keys of the query-head count, first found wins (Llama/Qwen/Mistral, GPT-2, others)."""
KV_KEYS: tuple[str, ...] = ("num_key_value_heads", "num_kv_heads", "multi_query_group_num")
"""config.json keys of the key/value-head count (absent: as many as the query heads)."""


def head_counts(config: Mapping) -> tuple[int, int] | None:
    """``(query heads, key/value heads)`` of a model config (a text model's, or a multimodal config's
    ``text_config``); None when it names no query-head count."""
    for cfg in (config, config.get("text_config") or {}):
        heads = next((cfg[k] for k in QUERY_KEYS if isinstance(cfg.get(k), int) and cfg[k] >= 1), None)
        if heads is not None:
            kv = next((cfg[k] for k in KV_KEYS if isinstance(cfg.get(k), int) and cfg[k] >= 1), heads)
            return heads, kv
    return None


def workable_degrees(heads: int) -> list[int]:
    """The sequence-parallel degrees ``N > 1`` that split ``heads`` query heads evenly (its divisors above 1)."""
    return [n for n in range(2, heads + 1) if heads % n == 0]


def head_error(config: Mapping, n: int, flag: str = "--sequence-parallel") -> str | None:
    """The one-line refusal of ``n`` ranks per row for a model of ``config``, naming its head counts and the
    degrees that work; None when ``n`` is 1, divides the query heads, or the config names no head count."""
    counts = head_counts(config)
    if n <= 1 or counts is None or counts[0] % n == 0:
        return None
    heads, kv = counts
    ok = workable_degrees(heads)
    sep = "" if flag.endswith("=") else " "  # a flag (--sequence-parallel 2) or a field (sequence_parallel=2)
    allowed = (f"{flag}{sep}{' or '.join(str(d) for d in ok)} (a divisor of {heads}) on a multiple of that many "
               "processes" if ok else f"none: one attention head cannot be split; train without {flag.rstrip('=')}")
    return (f"{flag}{sep}{n} does not divide the model's {heads} attention heads ({kv} key/value heads): each of "
            f"the {n} ranks of a row attends with 1/{n} of the query heads (Ulysses); allowed: {allowed}")


def check_model_heads(folder: str | Path, n: int, error: type[Exception] = ValueError) -> None:
    """Raise ``error`` with :func:`head_error` when ``n`` ranks per row cannot split the heads of the model in
    ``folder``, reading its ``config.json`` only (a folder without a readable one is left to the model loader)."""
    if n <= 1:
        return
    try:
        config = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return
    message = head_error(config, n) if isinstance(config, dict) else None
    if message is not None:
        raise error(message)
