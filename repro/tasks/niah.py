"""Needle-in-a-haystack retrieval: RULER's NIAH family (Hsieh et al., 2024, §3.1 and Table 1).

One parameterised generator, :class:`NIAH`, covers RULER's eight retrieval
tasks (``scripts/synthetic.yaml`` of NVIDIA/RULER):

================  ==========  ========  ========  ====  ====  ====
task              haystack    key       value     keys  vals  qrys
================  ==========  ========  ========  ====  ====  ====
niah_single_1     noise       words     numbers   1     1     1
niah_single_2     essay       words     numbers   1     1     1
niah_single_3     essay       words     uuids     1     1     1
niah_multikey_1   essay       words     numbers   4     1     1
niah_multikey_2   needle      words     numbers   1     1     1
niah_multikey_3   needle      uuids     uuids     1     1     1
niah_multivalue   essay       words     numbers   1     4     1
niah_multiquery   essay       words     numbers   4     1     4
================  ==========  ========  ========  ====  ====  ====

Needle: "One of the special magic {values} for {key} is: {value}." Haystacks:
``noise`` is lines of RULER's block "The grass is green. ... There and back
again." with each needle on a line of its own; ``essay`` is corpus prose
(RULER: Paul Graham essays; here ``haystack_texts`` or Python's shipped
documentation) with needles between sentences, inline as in RULER; ``needle``
is made of distractor needles with other keys, one per line. ``words`` keys
are RULER's adjective-noun compounds (``bright-anchor``). The prompt is
RULER's template, singular when one value is asked for; its last sentence
(" The special magic number for ... is") is the answer prefix.
Scoring is RULER's ``string_match_all`` over the values of the queried keys.

``depth`` places the first needle the question asks about; the other needles
(further values, further queried keys, distractor keys) sit at seeded random
depths as in RULER.
"""

from __future__ import annotations

import random
import uuid
from typing import Sequence

from repro.tasks.base import Example, check_depth, register, string_match_all
from repro.tasks.layout import (NOISE, CorpusHaystack, NoiseHaystack, assemble, finish, fit_count, haystack_words,
                                n_tokens, piece_costs, require)
from repro.tasks.pools import check_pool, pool
from repro.tasks.vocab import word_pool

__all__ = ["NOISE", "PREFIX", "NEEDLE", "QUESTION", "NIAH", "n_tokens", "fill_sentences", "assemble",
           "NIAH_CONFIGS", "random_item"]

# The project's first single-needle prompt (plural prefix, singular question, plain-noun keys): the
# synthetic corpus documents (``repro.data.corpus.iter_synthetic``) and ``legacy_prompt=True`` use it.
PREFIX = ("Some special magic numbers are hidden within the following text. "
          "Make sure to memorize it. I will quiz you about the numbers afterwards.\n")
NEEDLE = "One of the special magic numbers for {key} is: {value}."
QUESTION = ("\nWhat is the special magic number for {key} mentioned in the provided text? "
            "The special magic number for {key} mentioned in the provided text is")
_LEGACY_ANSWER = " The special magic number for {key} mentioned in the provided text is"

# RULER's template (constants.py, task ``niah``), plural and singular forms
_PREFIX_PLURAL = ("Some special magic {kind} are hidden within the following text. "
                  "Make sure to memorize it. I will quiz you about the {kind} afterwards.\n")
_PREFIX_SINGULAR = ("A special magic {kind} is hidden within the following text. "
                    "Make sure to memorize it. I will quiz you about the {kind} afterwards.\n")
_QUESTION_PLURAL = "\nWhat are all the special magic {kind} for {query} mentioned in the provided text?"
_QUESTION_SINGULAR = "\nWhat is the special magic {kind} for {query} mentioned in the provided text?"
_ANSWER_PLURAL = " The special magic {kind} for {query} mentioned in the provided text are"
_ANSWER_SINGULAR = " The special magic {kind} for {query} mentioned in the provided text is"
_NEEDLE = "One of the special magic {kind} for {key} is: {value}."

HAYSTACKS = ("noise", "essay", "needle")
KEY_TYPES = ("noun", "words", "numbers", "uuids")
VALUE_TYPES = ("numbers", "words", "uuids")

NIAH_CONFIGS: dict[str, dict] = {
    "niah_single_1": dict(haystack="noise", key_type="words", value_type="numbers"),
    "niah_single_2": dict(haystack="essay", key_type="words", value_type="numbers"),
    "niah_single_3": dict(haystack="essay", key_type="words", value_type="uuids"),
    "niah_multikey_1": dict(haystack="essay", key_type="words", value_type="numbers", num_keys=4),
    "niah_multikey_2": dict(haystack="needle", key_type="words", value_type="numbers"),
    "niah_multikey_3": dict(haystack="needle", key_type="uuids", value_type="uuids"),
    "niah_multivalue": dict(haystack="essay", key_type="words", value_type="numbers", num_values=4),
    "niah_multiquery": dict(haystack="essay", key_type="words", value_type="numbers", num_keys=4, num_queries=4),
}


def fill_sentences(tokenizer, sentences: Sequence[str], budget: int) -> list[str]:
    """Cycle ``sentences`` until ``budget`` tokens are used (never over)."""
    lens = [n_tokens(tokenizer, " " + s) for s in sentences]
    out, used, i = [], 0, 0
    while used + lens[i % len(sentences)] <= budget:
        out.append(sentences[i % len(sentences)])
        used += lens[i % len(sentences)]
        i += 1
    return out


def random_item(rng: random.Random, kind: str, key_pool: str, seen: set[str]) -> str:
    """A fresh (not in ``seen``) random needle key/value of RULER type ``kind``; adds it to ``seen``."""
    for _ in range(10_000):
        if kind == "numbers":
            item = str(rng.randint(1_000_000, 9_999_999))
        elif kind == "noun":
            item = rng.choice(word_pool(key_pool))
        elif kind == "words":
            item = f"{rng.choice(pool('adjectives', key_pool))}-{rng.choice(word_pool(key_pool))}"
        elif kind == "uuids":
            item = str(uuid.UUID(int=rng.getrandbits(128), version=4))
        else:
            raise ValueError(f"unknown needle type {kind!r}; allowed: {', '.join(KEY_TYPES)}")
        if item not in seen:
            seen.add(item)
            return item
    raise ValueError(f"ran out of distinct {kind!r} items ({len(seen)} used); use a shorter length")


def _join_query(keys: Sequence[str]) -> str:
    return keys[0] if len(keys) == 1 else ", ".join(keys[:-1]) + ", and " + keys[-1]


class NIAH:
    """A RULER needle-in-a-haystack task.

    Args:
        name: registry name (set by the registered factories).
        haystack: ``"noise"`` (RULER ``repeat``), ``"essay"`` or ``"needle"``.
        key_type: ``"noun"`` (plain noun), ``"words"`` (adjective-noun), ``"numbers"`` or ``"uuids"``.
        value_type: ``"numbers"`` (7 digits), ``"words"`` or ``"uuids"``.
        num_keys, num_values, num_queries: RULER's ``num_needle_k/v/q`` (keys are at least queries).
        key_pool: ``"eval"`` (default) or ``"train"``: disjoint word vocabularies.
        haystack_texts: corpus for the essay haystack; default Python's documentation prose.
        legacy_prompt: the project's first single-needle prompt (plural prefix, singular question).
        max_new_tokens: generation budget (RULER generates 128 tokens; answers here need far fewer).
    """

    def __init__(self, name: str = "niah", haystack: str = "essay", key_type: str = "words",
                 value_type: str = "numbers", num_keys: int = 1, num_values: int = 1, num_queries: int = 1,
                 key_pool: str = "eval", haystack_texts: Sequence[str] | None = None,
                 legacy_prompt: bool = False, max_new_tokens: int | None = None):
        if haystack not in HAYSTACKS:
            raise ValueError(f"haystack={haystack!r}; allowed: {', '.join(HAYSTACKS)}")
        if key_type not in KEY_TYPES:
            raise ValueError(f"key_type={key_type!r}; allowed: {', '.join(KEY_TYPES)}")
        if value_type not in VALUE_TYPES:
            raise ValueError(f"value_type={value_type!r}; allowed: {', '.join(VALUE_TYPES)}")
        for arg, v in (("num_keys", num_keys), ("num_values", num_values), ("num_queries", num_queries)):
            if not isinstance(v, int) or not 1 <= v <= 64:
                raise ValueError(f"{arg}={v!r}; allowed: an integer in [1, 64]")
        if legacy_prompt and num_queries * num_values != 1:
            raise ValueError("legacy_prompt=True needs num_values == num_queries == 1")
        self.name = name
        self.haystack, self.key_type, self.value_type = haystack, key_type, value_type
        self.num_keys, self.num_values, self.num_queries = max(num_keys, num_queries), num_values, num_queries
        self.key_pool = check_pool(key_pool)
        self.words = haystack_words(haystack_texts) if haystack == "essay" else ()
        self.legacy = legacy_prompt
        n_answers = num_values * num_queries
        per_answer = 8 if value_type == "numbers" else 40
        self.max_new_tokens = max_new_tokens or max(12, n_answers * per_answer + 4 * (n_answers - 1))

    # ------------------------------------------------------------------ text
    def _templates(self, query_keys: Sequence[str]) -> tuple[str, str, str, str]:
        """``(prefix, question, answer_prefix, needle)``; the question ends with the answer prefix."""
        kind = self.value_type  # plural, as in RULER's needle
        query = _join_query(query_keys)
        if self.legacy:
            return PREFIX, QUESTION.format(key=query), _LEGACY_ANSWER.format(key=query), NEEDLE
        needle = _NEEDLE.replace("{kind}", kind)
        if self.num_values * self.num_queries == 1:
            answer = _ANSWER_SINGULAR.format(kind=kind[:-1], query=query)
            return (_PREFIX_SINGULAR.format(kind=kind[:-1]),
                    _QUESTION_SINGULAR.format(kind=kind[:-1], query=query) + answer, answer, needle)
        answer = _ANSWER_PLURAL.format(kind=kind, query=query)
        return (_PREFIX_PLURAL.format(kind=kind), _QUESTION_PLURAL.format(kind=kind, query=query) + answer, answer,
                needle)

    # ------------------------------------------------------------------ generation
    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        seen: set[str] = set()
        keys, values = [], []
        for _ in range(self.num_keys):
            keys.append(random_item(rng, self.key_type, self.key_pool, seen))
            values.append([random_item(rng, self.value_type, self.key_pool, seen) for _ in range(self.num_values)])
        queried = [0] if self.num_keys == 1 else rng.sample(range(self.num_keys), self.num_queries)
        prefix, question, answer_prefix, needle_fmt = self._templates([keys[i] for i in queried])

        evidence = [(i, v) for i in queried for v in values[i]]
        distract = [(i, v) for i in range(self.num_keys) if i not in queried for v in values[i]]
        first = [float(depth)] + [rng.random() for _ in evidence[1:]]
        inserts = [(d, needle_fmt.format(key=keys[i], value=values[i][j]))
                   for d, (i, j) in zip(first, [(i, j) for i in queried for j in range(self.num_values)])]
        inserts += [(rng.random(), needle_fmt.format(key=keys[i], value=v)) for i, v in distract]

        sep = " " if self.haystack == "essay" else "\n"
        fixed = 1 + n_tokens(tokenizer, prefix) + n_tokens(tokenizer, question) + sum(
            piece_costs(tokenizer, [sep + t for _, t in inserts]))
        require(length, fixed, self.name)
        budget = length - fixed

        if self.haystack == "noise":
            hay = NoiseHaystack()
            unit_costs = hay.costs(tokenizer, budget)
        elif self.haystack == "essay":
            hay = CorpusHaystack(self.words, rng)
            unit_costs = hay.costs(tokenizer, budget)
        else:
            pile: list[str] = []
            unit_costs = []
            while sum(unit_costs) <= budget:
                batch = [needle_fmt.format(key=random_item(rng, self.key_type, self.key_pool, seen),
                                           value=random_item(rng, self.value_type, self.key_pool, seen))
                         for _ in range(32)]
                pile += batch
                unit_costs += piece_costs(tokenizer, [sep + b for b in batch])
            make_units = lambda k: pile[:k]  # noqa: E731

        if self.haystack == "needle":
            build = lambda k: assemble(prefix, make_units(k), inserts, question, sep)  # noqa: E731
        else:
            build = hay.builder(tokenizer, prefix, inserts, question)
        k = fit_count(tokenizer, length, lambda k: build(k)[0], unit_costs, fixed, self.name)
        prompt, spans = build(k)
        n_ev = len(evidence)
        extra = {"key": keys[queried[0]], "keys": [keys[i] for i in queried],
                 "distractor_char_spans": spans[n_ev:]} if self.num_keys > 1 or self.haystack == "needle" else {
                 "key": keys[0]}
        return finish(self.name, tokenizer, prompt, [v for _, v in evidence], length=length, depth=depth, seed=seed,
                      spans=spans[:n_ev], context=(len(prefix), len(prompt) - len(question)), inserted=spans[n_ev:],
                      answer_prefix=answer_prefix, **extra)

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return string_match_all(prediction, references)


def _factory(task_name: str):
    def make(**kwargs) -> NIAH:
        return NIAH(name=task_name, **{**NIAH_CONFIGS[task_name], **kwargs})

    make.__name__ = task_name
    make.__doc__ = f"RULER ``{task_name}``: {NIAH_CONFIGS[task_name]} (override any :class:`NIAH` argument)."
    return make


for _name in NIAH_CONFIGS:
    register(_name)(_factory(_name))

NIAHSingle = _factory("niah_single_1")
"""Backwards-compatible name: ``NIAHSingle(key_pool=...)`` builds ``niah_single_1``."""
