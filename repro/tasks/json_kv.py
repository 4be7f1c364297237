"""JSON key-value recall (HELMET "Recall / JSON KV"; ProLong Table 13; Liu et al., 2024 "Lost in the middle").

The context is a JSON object of random uuid keys and uuid values (one pair
per line, ``json.dumps(..., indent=1)`` layout); the question gives one key
and the model continues after "Corresponding value:". The prompt follows
HELMET's ``load_json_kv`` without demonstrations::

    JSON data:
    {<pairs>}

    Extract the value corresponding to the specified key in the JSON object below.

    Key: "<key>"
    Corresponding value:

Scoring is HELMET's substring exact match (SubEM): the normalised value
(lower case, no punctuation/articles, single spaces) is found in the
normalised prediction. ``depth`` places the queried pair; lengths are exact
up to one pair (uuid pairs cost ~60 tokens with a small BPE vocabulary).
"""

from __future__ import annotations

import json
import random
import re
import string
import uuid
from typing import Sequence

from repro.tasks.base import Example, check_depth, register
from repro.tasks.layout import finish, fit_count, n_tokens, piece_costs, require
from repro.tasks.pools import check_pool

HEADER = "JSON data:\n{"
QUESTION = ("\n}}\n\nExtract the value corresponding to the specified key in the JSON object below.\n\n"
            "Key: {key}\nCorresponding value:")


def normalize_answer(s: str) -> str:
    """SQuAD/HELMET normalisation: lower case, drop punctuation and articles, squeeze whitespace."""
    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def substring_exact_match(prediction: str, references: Sequence[str]) -> float:
    """HELMET ``substring_exact_match``: 1 if any normalised reference is in the normalised prediction."""
    pred = normalize_answer(prediction)
    return float(any(normalize_answer(r) in pred for r in references))


@register("json_kv")
class JsonKV:
    """HELMET JSON KV recall.

    Args:
        key_pool: accepted for a uniform interface; uuids are random, so both pools behave alike.
    """

    name = "json_kv"
    max_new_tokens = 48

    def __init__(self, key_pool: str = "eval"):
        self.key_pool = check_pool(key_pool)

    @staticmethod
    def _pair(k: str, v: str) -> str:
        return f'\n {json.dumps(k)}: {json.dumps(v)}'

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        new = lambda: str(uuid.UUID(int=rng.getrandbits(128), version=4))  # noqa: E731
        key, value = new(), new()
        question = QUESTION.format(key=json.dumps(key))
        gold = self._pair(key, value)
        fixed = 1 + n_tokens(tokenizer, HEADER) + n_tokens(tokenizer, question) + n_tokens(tokenizer, gold + ",")
        require(length, fixed, self.name)
        pairs: list[str] = []
        costs: list[int] = []
        while sum(costs) <= length - fixed:
            batch = [self._pair(new(), new()) for _ in range(16)]
            pairs += batch
            costs += piece_costs(tokenizer, [b + "," for b in batch])

        def render(k: int):
            items = pairs[:k]
            at = round(depth * k)
            items = items[:at] + [gold] + items[at:]
            text, span = HEADER, None
            for i, it in enumerate(items):
                if i:
                    text += ","
                if it is gold:
                    span = (len(text) + 2, len(text) + len(it))  # after the newline and indent
                text += it
            return text + question, span

        k = fit_count(tokenizer, length, lambda k: render(k)[0], costs, fixed, self.name)
        prompt, span = render(k)
        return finish(self.name, tokenizer, prompt, [value], length=length, depth=depth, seed=seed, spans=[span],
                      context=(len(HEADER), len(prompt) - len(question)), answer_prefix="\nCorresponding value:",
                      key=key, num_kvs=k + 1)

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return substring_exact_match(prediction, references)
