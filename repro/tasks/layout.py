"""Shared machinery: haystacks, evidence placement, exact-length fitting, metadata.

Every generator builds ``prefix + context + question`` where the context is a
list of haystack *units* (noise sentences, corpus words, distractor needles,
documents, ...) with evidence *inserts* placed at depths. The number of units
is chosen so the prompt (with the special tokens its tokenizer adds: ``<|bos|>`` on the testbed's, none on
SmolLM2's; :mod:`repro.data.special_tokens`) has at most ``length`` tokens and
no further unit fits (:func:`fit_count`), so lengths are exact up to one unit
(one word or noise sentence for most tasks).
"""

from __future__ import annotations

import bisect
import pydoc_data.topics as topics
import random
import re
from functools import lru_cache
from typing import Callable, Sequence

from repro.tasks.base import Example, LengthTooShort, check_length

Span = tuple[int, int]


def n_tokens(tokenizer, text: str) -> int:
    """Token count of ``text`` without special tokens."""
    return len(tokenizer(text, add_special_tokens=False).input_ids)


def piece_costs(tokenizer, pieces: Sequence[str]) -> list[int]:
    """Token counts of many pieces in one batched call."""
    if not pieces:
        return []
    return [len(ids) for ids in tokenizer(list(pieces), add_special_tokens=False).input_ids]


def prompt_tokens(tokenizer, prompt: str) -> int:
    """Token count of a full prompt as the tokenizer encodes it, its own special tokens included (``<|bos|>`` on the
    testbed tokenizer; what ``length`` measures)."""
    return len(tokenizer(prompt).input_ids)


def _slot(d: float, cum: Sequence[float]) -> int:
    """Unit boundary whose cumulative weight fraction is nearest ``d`` (``cum`` starts at 0)."""
    x = d * cum[-1]
    i = bisect.bisect_left(cum, x)
    if i >= len(cum):
        return len(cum) - 1
    return i - 1 if i > 0 and x - cum[i - 1] <= cum[i] - x else i


def assemble(prefix: str, haystack: Sequence[str], inserts: Sequence[tuple[float, str]], question: str,
             sep: str = " ", weights: Sequence[int] | None = None) -> tuple[str, list[Span]]:
    """Join haystack units with ``sep``, each insert placed before unit ``round(depth * len(haystack))``.

    With ``weights`` (tokens per unit) the slot is instead the unit boundary
    nearest ``depth`` of the haystack's tokens, for units of uneven size.
    Inserts that land on the same slot keep their order in ``inserts``. Returns
    the prompt and the character span of every insert (in ``inserts`` order).
    """
    if weights is not None and len(haystack) and sum(weights) > 0:
        cum = [0]
        for w in weights:
            cum.append(cum[-1] + w)
        slots = sorted((_slot(d, cum), k) for k, (d, _) in enumerate(inserts))
    else:
        slots = sorted((round(d * len(haystack)), k) for k, (d, _) in enumerate(inserts))
    pieces: list[tuple[str, int | None]] = []
    j = 0
    for i in range(len(haystack) + 1):
        while j < len(slots) and slots[j][0] == i:
            pieces.append((inserts[slots[j][1]][1], slots[j][1]))
            j += 1
        if i < len(haystack):
            pieces.append((haystack[i], None))
    parts, pos, spans = [prefix], len(prefix), [None] * len(inserts)
    for n, (s, k) in enumerate(pieces):
        if n:
            parts.append(sep)
            pos += len(sep)
        if k is not None:
            spans[k] = (pos, pos + len(s))
        parts.append(s)
        pos += len(s)
    parts.append(question)
    return "".join(parts), spans


def fit_count(tokenizer, length: int, build: Callable[[int], str], costs: Sequence[int], fixed: int,
              task: str = "task") -> int:
    """Largest ``k <= len(costs)`` with ``build(k)`` at most ``length`` tokens (special tokens included).

    ``costs[i]`` estimates the tokens unit ``i`` adds and ``fixed`` those of
    everything else; the estimate is then corrected with real token counts.
    Raises :class:`LengthTooShort` (naming the real minimum) when even
    ``build(0)`` is longer than ``length``: ``fixed`` counts pieces one by one,
    which can miss a token or two where pieces meet.
    """
    budget, k, used = length - fixed, 0, 0
    while k < len(costs) and used + costs[k] <= budget:
        used += costs[k]
        k += 1
    while k > 0 and prompt_tokens(tokenizer, build(k)) > length:
        k -= 1
    if k == 0:
        need = prompt_tokens(tokenizer, build(0))
        if need > length:
            raise LengthTooShort(f"{task}: length={length!r} is too short; allowed: an integer >= {need} tokens",
                                 need)
    while k < len(costs) and prompt_tokens(tokenizer, build(k + 1)) <= length:
        k += 1
    return k


def cycle(units: Sequence[str], n: int, start: int = 0) -> list[str]:
    return [units[(start + i) % len(units)] for i in range(n)]


# ----------------------------------------------------------------- corpus haystack

_SENT_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])")


@lru_cache(maxsize=4)
def _default_words() -> tuple[str, ...]:
    return corpus_words(tuple(topics.topics[k] for k in sorted(topics.topics)))


@lru_cache(maxsize=8)
def corpus_words(texts: tuple[str, ...]) -> tuple[str, ...]:
    """Whitespace words of the corpus; words holding a run of 5+ digits are dropped
    so generated numeric needles never collide with corpus text."""
    words = " ".join(texts).split()
    return tuple(w for w in words if not re.search(r"\d{5}", w))


def haystack_words(haystack_texts: Sequence[str] | None) -> tuple[str, ...]:
    """Word stream of the corpus haystack (RULER uses Paul Graham essays; default: Python's docs prose)."""
    words = _default_words() if haystack_texts is None else corpus_words(tuple(haystack_texts))
    if not words:
        raise ValueError("haystack_texts holds no words; allowed: a non-empty sequence of texts")
    return words


def split_sentences(text: str, max_words: int = 30) -> list[str]:
    """Sentence split at ``.!?`` followed by whitespace and a capital/digit/quote (RULER uses nltk).

    Runs longer than ``max_words`` words (code listings in the default corpus)
    are cut into ``max_words``-word pieces so evidence can be placed finely.
    """
    out = []
    for s in _SENT_END.split(text.strip()):
        words = s.split()
        out += [" ".join(words[i:i + max_words]) for i in range(0, len(words), max_words)]
    return out


class CorpusHaystack:
    """A window of corpus words starting at a seeded offset; units are words, inserts go
    between sentences (RULER's essay haystack: words, then ``sent_tokenize``)."""

    def __init__(self, words: Sequence[str], rng: random.Random):
        self.words = words
        self.start = rng.randrange(len(words))

    def take(self, k: int) -> list[str]:
        return cycle(self.words, k, self.start)

    def costs(self, tokenizer, budget: int) -> list[int]:
        # words cost at least one token: budget + margin words always suffice
        return piece_costs(tokenizer, [" " + w for w in self.take(budget + 16)])

    def sentences(self, k: int) -> list[str]:
        return split_sentences(" ".join(self.take(k))) if k else []

    def builder(self, tokenizer, prefix: str, inserts, question: str):
        """``build(k) -> (prompt, spans)`` with the first ``k`` words, inserts placed by token depth."""
        def build(k: int):
            sents = self.sentences(k)
            return assemble(prefix, sents, inserts, question, " ", piece_costs(tokenizer, [" " + s for s in sents]))
        return build


# ----------------------------------------------------------------- noise haystack

NOISE = ("The grass is green.", "The sky is blue.", "The sun is yellow.", "Here we go.", "There and back again.")
"""RULER's noise haystack: these five sentences are one block, and every block is a line of its own."""


class NoiseHaystack:
    """RULER's ``noise`` haystack: lines of the five :data:`NOISE` sentences, joined by newlines.

    Units are sentences so lengths stay exact: ``lines(k)`` holds ``k // 5``
    whole blocks and, when ``k % 5``, a last line with the block's first
    ``k % 5`` sentences. Inserts (needles, variable assignments) go between
    lines, each on a line of its own, placed by token depth.
    """

    def costs(self, tokenizer, budget: int) -> list[int]:
        first = n_tokens(tokenizer, "\n" + NOISE[0])
        rest = [n_tokens(tokenizer, " " + s) for s in NOISE[1:]]
        return cycle([first] + rest, budget // min([first] + rest) + 2)

    @staticmethod
    def lines(k: int) -> list[str]:
        block = " ".join(NOISE)
        out = [block] * (k // len(NOISE))
        if k % len(NOISE):
            out.append(" ".join(NOISE[:k % len(NOISE)]))
        return out

    def builder(self, tokenizer, prefix: str, inserts, question: str):
        """``build(k) -> (prompt, spans)`` with the first ``k`` noise sentences."""
        def build(k: int):
            lines = self.lines(k)
            return assemble(prefix, lines, inserts, question, "\n", piece_costs(tokenizer, ["\n" + s for s in lines]))
        return build


# ----------------------------------------------------------------- depths and metadata

def spread_after(rng: random.Random, anchor: float, n: int) -> list[float]:
    """``n`` sorted depths uniform in ``[anchor, 1]`` (evidence that must follow the anchor)."""
    return sorted(rng.uniform(anchor, 1.0) for _ in range(n))


def ordered_depths(rng: random.Random, depth: float, n: int, index: int) -> list[float]:
    """``n`` sorted depths with the one at ``index`` exactly ``depth``: the others uniform before/after it."""
    before = sorted(rng.uniform(0.0, depth) for _ in range(index))
    after = sorted(rng.uniform(depth, 1.0) for _ in range(n - index - 1))
    return before + [float(depth)] + after


def token_offsets(tokenizer, prompt: str) -> list[Span]:
    return [tuple(o) for o in tokenizer(prompt, return_offsets_mapping=True)["offset_mapping"]]


def evidence_depths(offsets: Sequence[Span], spans: Sequence[Span], context: Span,
                    inserted: Sequence[Span] = ()) -> list[float]:
    """Where each evidence span starts: the fraction of haystack tokens before it.

    Haystack tokens are the context tokens outside ``spans`` and ``inserted``
    (every other placed piece), so a needle placed at ``depth`` measures ``depth``
    up to one haystack unit.
    """
    placed = sorted(set(map(tuple, spans)) | set(map(tuple, inserted)))
    starts = []
    for s, e in offsets:
        if e > s and context[0] <= s < context[1]:
            i = bisect.bisect_right(placed, (s, float("inf"))) - 1
            if i < 0 or not (placed[i][0] <= s < placed[i][1]):
                starts.append(s)
    if not starts:
        return [0.0 for _ in spans]
    return [bisect.bisect_left(starts, sp[0]) / len(starts) for sp in spans]


def finish(task: str, tokenizer, prompt: str, references: Sequence[str], *, length: int, depth: float, seed: int,
           spans: Sequence[Span], context: Span, answer_prefix: str, inserted: Sequence[Span] = (),
           **extra) -> Example:
    """Build the :class:`Example` with the standard metadata (see ``base.Example``).

    ``context`` is the character span of the context (haystack plus evidence),
    ``inserted`` the spans of other placed pieces (distractor needles, ...);
    ``evidence_depths`` gives the measured depth of every evidence span.
    ``answer_prefix`` is the end of the prompt that RULER's JSONL keeps apart
    from ``input`` (its ``answer_prefix`` field).
    """
    if not answer_prefix or not prompt.endswith(answer_prefix):
        raise AssertionError(f"{task}: the prompt does not end with its answer prefix {answer_prefix!r}")
    offsets = token_offsets(tokenizer, prompt)
    if len(offsets) > length:
        raise AssertionError(f"{task}: built {len(offsets)} tokens for length={length}")
    meta = {"length": length, "n_tokens": len(offsets), "depth": float(depth), "seed": seed,
            "answer_prefix": answer_prefix,
            "evidence_char_spans": [tuple(s) for s in spans], "context_char_span": tuple(context),
            "evidence_depths": evidence_depths(offsets, spans, context, inserted)}
    meta.update(extra)
    return Example(task, prompt, tuple(references), meta)


def require(length: int, fixed: int, task: str, slack: int = 1) -> None:
    """``check_length`` with the minimum a task needs: its fixed tokens plus ``slack`` haystack tokens."""
    check_length(length, fixed + slack, task)
