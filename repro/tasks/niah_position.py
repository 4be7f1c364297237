"""NIAH-position: order-sensitive multi-value retrieval (RoPE-perturbed self-distillation, Appendix B.3, Table 14).

The same key appears ``num_occurrences`` times in a corpus haystack, each
time with a different value, in RULER's needle format; the question asks for
the first / second / third / last occurrence's value. ``depth`` places the
asked occurrence; the earlier ones sit at seeded random depths before it and
the later ones after it, so the ordinal is always well defined.

Scoring is stricter than RULER's substring match, because a model that
lists every value would otherwise score 1: the *first* 7-digit number in
the prediction must equal the reference.
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from repro.tasks.base import Example, check_depth, register
from repro.tasks.layout import (CorpusHaystack, finish, fit_count, haystack_words, n_tokens, ordered_depths,
                                piece_costs, require)
from repro.tasks.niah import random_item
from repro.tasks.pools import check_pool

ORDINALS = ("first", "second", "third", "last")
PREFIX = ("Some special magic numbers are hidden within the following text. "
          "Make sure to memorize it. I will quiz you about the numbers afterwards.\n")
NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUESTION = "\nWhat is the {ordinal} special magic number for {key} mentioned in the provided text?"
ANSWER_PREFIX = " The {ordinal} special magic number for {key} mentioned in the provided text is"


@register("niah_position")
class NIAHPosition:
    """Args:
        ordinal: ``"first"``, ``"second"``, ``"third"``, ``"last"``, or ``None`` to draw one per seed.
        num_occurrences: values stored under the key (at least 3 so "third" exists; default 4).
        key_pool: ``"eval"``/``"train"`` key vocabularies.
        haystack_texts: corpus for the haystack (default Python's documentation prose).
    """

    name = "niah_position"
    max_new_tokens = 12

    def __init__(self, ordinal: str | None = None, num_occurrences: int = 4, key_pool: str = "eval",
                 haystack_texts: Sequence[str] | None = None):
        if ordinal is not None and ordinal not in ORDINALS:
            raise ValueError(f"ordinal={ordinal!r}; allowed: {', '.join(ORDINALS)} or None")
        if not isinstance(num_occurrences, int) or not 3 <= num_occurrences <= 16:
            raise ValueError(f"num_occurrences={num_occurrences!r}; allowed: an integer in [3, 16]")
        self.ordinal, self.n = ordinal, num_occurrences
        self.key_pool = check_pool(key_pool)
        self.words = haystack_words(haystack_texts)

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        seen: set[str] = set()
        key = random_item(rng, "words", self.key_pool, seen)
        values = [random_item(rng, "numbers", self.key_pool, seen) for _ in range(self.n)]
        ordinal = self.ordinal or rng.choice(ORDINALS)
        index = self.n - 1 if ordinal == "last" else ORDINALS.index(ordinal)
        depths = ordered_depths(rng, depth, self.n, index)
        inserts = [(d, NEEDLE.format(key=key, value=v)) for d, v in zip(depths, values)]
        answer_prefix = ANSWER_PREFIX.format(ordinal=ordinal, key=key)
        question = QUESTION.format(ordinal=ordinal, key=key) + answer_prefix
        fixed = 1 + n_tokens(tokenizer, PREFIX) + n_tokens(tokenizer, question) + sum(
            piece_costs(tokenizer, [" " + t for _, t in inserts]))
        require(length, fixed, self.name)
        hay = CorpusHaystack(self.words, rng)
        build = hay.builder(tokenizer, PREFIX, inserts, question)
        k = fit_count(tokenizer, length, lambda k: build(k)[0], hay.costs(tokenizer, length - fixed), fixed,
                      self.name)
        prompt, spans = build(k)
        return finish(self.name, tokenizer, prompt, [values[index]], length=length, depth=depth, seed=seed,
                      spans=[spans[index]], context=(len(PREFIX), len(prompt) - len(question)),
                      inserted=[s for i, s in enumerate(spans) if i != index], answer_prefix=answer_prefix,
                      key=key, ordinal=ordinal,
                      values=values, occurrence_char_spans=spans)

    def score(self, prediction: str, references: Sequence[str]) -> float:
        """1 if the first 7-digit number in the prediction is the reference, else 0."""
        m = re.search(r"(?<!\d)\d{7}(?!\d)", prediction)
        return float(m is not None and m.group(0) in references)
