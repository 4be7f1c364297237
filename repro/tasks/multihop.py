"""Multi-hop reasoning with interference (Context Denoising Training, Appendix B.1, Fig. 11-13, Table 4).

bAbI/BABILong-style stories hidden in filler text. Supporting facts follow
the paper's patterns ({x} character, {m} move, {p} pick, {d} drop, {y}
locations, {o} object):

* 2 hops: ``x p o``, ``x m y`` -- "Where is the o?" -> y (bAbI qa2).
* 3 hops: ``x m y1``, ``x p o``, ``x m y2`` -- "Where was the o before the y2?" -> y1 (qa3).
* 4 hops: ``x m y1``, ``x p o``, ``x m y2``, ``x d o`` -- "Where was the o's location prior to
  the place where the o was discarded, left or dropped?" -> y1 (Fig. 13).

Construction as in Appendix B.1: the filler is cut into 10 equal chunks and
the supporting facts go, in order, to chunk boundaries (candidate slots
0/10 ... 9/10, the tail excluded); here the first supporting fact sits at
``depth`` and the later ones at sampled free slots after it (uniform
positions after it when too few slots remain). Between ``hops`` and
``2 * hops`` interference facts (other characters; objects never the answer's
object) go to random positions, at least one after the last supporting fact.
A few emoji are inserted as low-frequency tokens. With ``shared_noise`` (the
paper's choice) every sample of a given length uses the same filler.

Every token is labelled (``metadata["token_types"]``, aligned with
``tokenizer(prompt).input_ids``): ``supporting``, ``interference``,
``low_frequency``, ``irrelevant`` (filler), or ``prompt`` (bos, instruction,
question). ``metadata["type_spans"]`` gives the character spans per type.
"""

from __future__ import annotations

import bisect
import random
from typing import Sequence

from repro.tasks.base import Example, check_depth, register
from repro.tasks.layout import (CorpusHaystack, finish, fit_count, haystack_words, n_tokens, piece_costs,
                                require, spread_after)
from repro.tasks.pools import check_pool, pool

MOVE = ("went to", "journeyed to", "travelled to", "moved to", "went back to")
PICK = ("picked up", "took", "grabbed", "got")
DROP = ("dropped", "put down", "discarded", "left")
QUESTIONS = {
    2: "Where is the {o}?",
    3: "Where was the {o} before the {y2}?",
    4: "Where was the {o}'s location prior to the place where the {o} was discarded, left or dropped?",
}
PREFIX = "Read the text and answer the question about the story hidden in it.\n"
QUESTION = "\nQuestion: {q}\nAnswer:"
TOKEN_TYPES = ("supporting", "interference", "low_frequency", "irrelevant", "prompt")


def token_types(offsets: Sequence[tuple[int, int]], prompt: str, type_spans: dict[str, list[tuple[int, int]]],
                context: tuple[int, int]) -> list[str]:
    """Type of every token: the type of its first non-space character (bos and text outside the context: prompt)."""
    marks = sorted((s, e, t) for t, spans in type_spans.items() for s, e in spans)
    starts = [m[0] for m in marks]
    out = []
    for s, e in offsets:
        if e <= s:
            out.append("prompt")
            continue
        c = next((i for i in range(s, e) if not prompt[i].isspace()), s)
        if not context[0] <= c < context[1]:
            out.append("prompt")
            continue
        i = bisect.bisect_right(starts, c) - 1
        out.append(marks[i][2] if i >= 0 and marks[i][0] <= c < marks[i][1] else "irrelevant")
    return out


class MultiHop:
    """Args:
        hops: 2, 3 or 4 supporting facts.
        n_emoji: low-frequency tokens inserted (the paper: "a few").
        key_pool: ``"eval"``/``"train"`` characters, locations, objects, emoji.
        shared_noise: one filler per length (paper) instead of one per seed.
        haystack_texts: filler corpus (default Python's documentation prose; the paper uses BABILong's PG-19).
    """

    max_new_tokens = 8
    prefix = PREFIX
    """The instruction before the context."""
    ties_by_depth = False
    """Whether pieces that land on one haystack slot stand in the order of their depths (else in list order:
    the supporting facts first)."""

    def __init__(self, name: str, hops: int, n_emoji: int = 3, key_pool: str = "eval", shared_noise: bool = True,
                 haystack_texts: Sequence[str] | None = None):
        if hops not in QUESTIONS:
            raise ValueError(f"hops={hops!r}; allowed: 2, 3 or 4")
        if not isinstance(n_emoji, int) or not 0 <= n_emoji <= 64:
            raise ValueError(f"n_emoji={n_emoji!r}; allowed: an integer in [0, 64]")
        self.name, self.hops, self.n_emoji = name, hops, n_emoji
        self.key_pool = check_pool(key_pool)
        self.shared_noise = shared_noise
        self.words = haystack_words(haystack_texts)
        self.locations = pool("locations", self.key_pool)
        self.all_locations = pool("locations", "eval") + pool("locations", "train")

    def _story(self, rng: random.Random):
        names, objects = pool("first_names", self.key_pool), pool("objects", self.key_pool)
        x = rng.choice(names)
        o = rng.choice(objects)
        y1, y2 = rng.sample(self.locations, 2)
        m = lambda: rng.choice(MOVE)  # noqa: E731
        if self.hops == 2:
            facts, answer = [f"{x} {rng.choice(PICK)} the {o}.", f"{x} {m()} the {y1}."], y1
        else:
            facts = [f"{x} {m()} the {y1}.", f"{x} {rng.choice(PICK)} the {o}.", f"{x} {m()} the {y2}."]
            if self.hops == 4:
                facts.append(f"{x} {rng.choice(DROP)} the {o}.")
            answer = y1
        question = QUESTIONS[self.hops].format(o=o, y2=y2)
        others = [n for n in names if n != x]
        other_objects = [b for b in objects if b != o]
        interference = []
        for _ in range(rng.randint(self.hops, 2 * self.hops)):
            c, kind = rng.choice(others), rng.random()
            if kind < 0.5:
                interference.append(f"{c} {m()} the {rng.choice(self.locations)}.")
            elif kind < 0.75:
                interference.append(f"{c} {rng.choice(PICK)} the {rng.choice(other_objects)}.")
            else:
                interference.append(f"{c} {rng.choice(DROP)} the {rng.choice(other_objects)}.")
        return facts, interference, question, answer, {"character": x, "object": o}

    def _support_depths(self, rng: random.Random, depth: float) -> list[float]:
        slots = [j / 10 for j in range(10) if j / 10 > depth]
        if len(slots) >= self.hops - 1:
            return [float(depth)] + sorted(rng.sample(slots, self.hops - 1))
        return [float(depth)] + spread_after(rng, depth, self.hops - 1)

    def _place(self, rng: random.Random, depth: float, interference: list[str]):
        """``(supporting depths, interference depths, interference)``: the supporting facts from ``depth`` on, one
        interference fact after the last of them and the rest anywhere."""
        sup_d = self._support_depths(rng, depth)
        return sup_d, [rng.uniform(sup_d[-1], 1.0)] + [rng.random() for _ in interference[1:]], interference

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        facts, interference, q, answer, story = self._story(rng)
        sup_d, int_d, interference = self._place(rng, depth, interference)
        emoji = [rng.choice(pool("emoji", self.key_pool)) for _ in range(self.n_emoji)]
        inserts = (list(zip(sup_d, facts)) + list(zip(int_d, interference))
                   + [(rng.random(), e) for e in emoji])
        question = QUESTION.format(q=q)
        fixed = 1 + n_tokens(tokenizer, self.prefix) + n_tokens(tokenizer, question) + sum(
            piece_costs(tokenizer, [" " + t for _, t in inserts]))
        require(length, fixed, self.name)
        noise_rng = random.Random(f"{self.name}:noise:{length}") if self.shared_noise else rng
        hay = CorpusHaystack(self.words, noise_rng)
        # pieces on one haystack slot stand in list order, or (``ties_by_depth``) in the order of their depths
        order = sorted(range(len(inserts)), key=lambda i: inserts[i][0]) if self.ties_by_depth \
            else list(range(len(inserts)))
        build = hay.builder(tokenizer, self.prefix, [inserts[i] for i in order], question)
        k = fit_count(tokenizer, length, lambda k: build(k)[0], hay.costs(tokenizer, length - fixed), fixed,
                      self.name)
        prompt, placed = build(k)
        spans = [None] * len(inserts)
        for at, i in enumerate(order):
            spans[i] = placed[at]
        n_s, n_i = len(facts), len(interference)
        context = (len(self.prefix), len(prompt) - len(question))
        type_spans = {"supporting": spans[:n_s], "interference": spans[n_s:n_s + n_i],
                      "low_frequency": spans[n_s + n_i:]}
        offsets = [tuple(o) for o in tokenizer(prompt, return_offsets_mapping=True)["offset_mapping"]]
        return finish(self.name, tokenizer, prompt, [answer], length=length, depth=depth, seed=seed,
                      spans=spans[:n_s], context=context, inserted=spans[n_s:], answer_prefix="\nAnswer:",
                      hops=self.hops,
                      type_spans=type_spans, token_types=token_types(offsets, prompt, type_spans, context),
                      question=q, **story)

    def score(self, prediction: str, references: Sequence[str]) -> float:
        """BABILong-style: the answer location is named and no other known location is."""
        words = set(prediction.lower().replace(".", " ").replace(",", " ").split())
        named = {loc for loc in self.all_locations if loc in words} | ({r.lower() for r in references} & words)
        return float(bool(named) and named <= {r.lower() for r in references})


for _hops in (2, 3, 4):
    register(f"multihop_{_hops}")(lambda _h=_hops, **kw: MultiHop(f"multihop_{_h}", _h, **kw))
