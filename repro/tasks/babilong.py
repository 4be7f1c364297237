"""BABILong's first five bAbI tasks, generated here (nothing downloaded): ``babilong_qa1`` .. ``babilong_qa5``.

BABILong (Kuratov et al., 2024) hides the facts of a bAbI story in long background text (PG-19 books) and asks
its question at the end; CDT reports it (Table 2). The stories here are drawn from the same kinds of facts, with
this suite's names, places and objects and its background text (:mod:`repro.tasks.multihop`'s layout: the first
supporting fact at ``depth``, later ones at free tenths after it, distractor facts of other characters anywhere):

* ``qa1`` single supporting fact: ``x`` moves around; "Where is x?" -> x's latest place (its earlier moves are
  distractors);
* ``qa2`` two supporting facts: ``x`` takes ``o``, then moves to ``y``; "Where is the o?" -> y;
* ``qa3`` three supporting facts: ``x`` goes to ``y1``, takes ``o``, goes to ``y2``; "Where was the o before the
  y2?" -> y1;
* ``qa4`` two-argument relations: "The y1 is north of the y2."; "What is north of the y2?" -> y1, or "What is the
  y1 north of?" -> y2 (a second relation of the same places is a distractor);
* ``qa5`` three-argument relations: "x gave the o to z."; "Who gave the o?" -> x, "Who did x give the o to?" -> z
  or "What did x give to z?" -> o (the object taken beforehand and other hand-overs are distractors).

Scoring is BABILong's (and lm-evaluation-harness's ``babilong`` tasks'): the prediction, stripped of control
characters, contains the one-word answer, case-insensitively.
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from repro.tasks.base import register
from repro.tasks.multihop import DROP, MOVE, PICK, MultiHop
from repro.tasks.pools import pool

KINDS: tuple[int, ...] = (1, 2, 3, 4, 5)
"""The bAbI tasks generated (qa1-qa5)."""
SUPPORTING: dict[int, int] = {1: 1, 2: 2, 3: 3, 4: 1, 5: 1}
"""Supporting facts per task."""
DIRECTIONS = {"north": "south", "south": "north", "east": "west", "west": "east"}
GIVE = ("gave", "handed", "passed")
PREFIXES = {
    1: "The text below hides facts about where people went. Answer the question from those facts alone; when a "
       "person was in several places, their last place counts. Answer with one word.\n",
    2: "The text below hides facts about people, where they went and what they took. Answer the question from "
       "those facts alone with one word: a place.\n",
    3: "The text below hides facts about people, where they went and what they took. Answer the question from "
       "those facts alone with one word: a place.\n",
    4: "The text below hides facts about places and how they lie to each other. Answer the question from those "
       "facts alone with one word: a place.\n",
    5: "The text below hides facts about people handing things to each other. Answer the question from those "
       "facts alone with one word.\n",
}


class BabiLong(MultiHop):
    """One of BABILong's qa1-qa5 (``kind``) over this suite's background text; the other arguments as
    :class:`~repro.tasks.multihop.MultiHop`'s."""

    max_new_tokens = 8
    ties_by_depth = True  # qa1's earlier place of x must stand before the supporting fact, also on one slot

    def __init__(self, name: str, kind: int, n_emoji: int = 0, key_pool: str = "eval", shared_noise: bool = True,
                 haystack_texts: Sequence[str] | None = None):
        if kind not in KINDS:
            raise ValueError(f"kind={kind!r}; allowed: {', '.join(map(str, KINDS))} (BABILong's qa1-qa5)")
        super().__init__(name, 2, n_emoji, key_pool, shared_noise, haystack_texts)
        self.kind, self.hops, self.prefix = kind, SUPPORTING[kind], PREFIXES[kind]

    def _story(self, rng: random.Random):
        names, objects = pool("first_names", self.key_pool), pool("objects", self.key_pool)
        x, z = rng.sample(names, 2)
        o = rng.choice(objects)
        y1, y2, y3 = rng.sample(self.locations, 3)
        others = [n for n in names if n not in (x, z)]
        move = lambda who, where: f"{who} {rng.choice(MOVE)} the {where}."  # noqa: E731
        noise = [move(rng.choice(others), rng.choice(self.locations)) for _ in range(rng.randint(2, 4))]
        if self.kind == 1:
            facts, q, answer = [move(x, y2)], f"Where is {x}?", y2
            noise.insert(0, move(x, y1))  # an earlier place of x: before the supporting fact
        elif self.kind == 2:
            facts, q, answer = [f"{x} {rng.choice(PICK)} the {o}.", move(x, y1)], f"Where is the {o}?", y1
        elif self.kind == 3:
            facts = [move(x, y1), f"{x} {rng.choice(PICK)} the {o}.", move(x, y2)]
            q, answer = f"Where was the {o} before the {y2}?", y1
        elif self.kind == 4:
            d = rng.choice(sorted(DIRECTIONS))
            facts = [f"The {y1} is {d} of the {y2}."]
            noise = [f"The {y3} is {DIRECTIONS[d]} of the {y2}."] + [
                f"The {a} is {rng.choice(sorted(DIRECTIONS))} of the {b}."
                for a, b in (rng.sample([w for w in self.locations if w not in (y1, y2, y3)], 2) for _ in range(2))]
            q, answer = (f"What is {d} of the {y2}?", y1) if rng.random() < 0.5 else (f"What is the {y1} {d} of?", y2)
        else:
            facts = [f"{x} {rng.choice(GIVE)} the {o} to {z}."]
            other = rng.choice([b for b in objects if b != o])
            noise = [f"{x} {rng.choice(PICK)} the {o}.", f"{z} {rng.choice(GIVE)} the {other} to "
                     f"{rng.choice(others)}.", f"{rng.choice(others)} {rng.choice(DROP)} the {other}."] + noise[:2]
            q, answer = rng.choice([(f"Who gave the {o}?", x), (f"Who did {x} give the {o} to?", z),
                                    (f"What did {x} give to {z}?", o)])
        return facts, noise, q, answer, {"kind": f"qa{self.kind}"}

    def _place(self, rng: random.Random, depth: float, interference: list[str]):
        """As :class:`MultiHop`'s, but qa1's earlier place of ``x`` (its first distractor) goes before the
        supporting fact, and is left out when that fact opens the text (``depth`` 0)."""
        sup_d, int_d, interference = super()._place(rng, depth, interference)
        if self.kind == 1:
            if sup_d[0] > 0:
                int_d[0] = rng.uniform(0.0, sup_d[0]) * 0.999
            else:
                int_d, interference = int_d[1:], interference[1:]
        return sup_d, int_d, interference

    def score(self, prediction: str, references: Sequence[str]) -> float:
        """BABILong's: the prediction (control characters made spaces, stripped) contains the answer word,
        case-insensitively."""
        text = re.sub(r"[\x00-\x1f]", " ", prediction).strip().lower()
        return float(any(r.strip().lower() in text for r in references))


for _kind in KINDS:
    register(f"babilong_qa{_kind}")(lambda _k=_kind, **kw: BabiLong(f"babilong_qa{_k}", _k, **kw))
