"""RULER variable tracking, ``vt`` (Hsieh et al., 2024, §3.2 multi-hop tracing).

A chain ``VAR AAAAA = 12345``, ``VAR BBBBB = VAR AAAAA``, ... (``num_hops``
hops, 5-letter upper-case names) hides in RULER's noise haystack: lines of
"The grass is green. ... There and back again.", every assignment on a line
of its own. The question asks for every variable that ends up holding the
value. ``num_chains - 1`` further chains with other values are distractors.
References are the ``num_hops + 1`` names of the first chain, scored with
``string_match_all``.

``depth`` places the chain's first statement (the value assignment); the
later hops follow at seeded random depths after it, in order. RULER always
prepends one solved example (3-letter names, ~500 tokens); ``fewshot=True``
prepends one of :data:`SHOT_LENGTH` tokens (3-letter names). It is off by
default: with it the task needs about twice the tokens (~380 instead of
~190 with the tiny model's vocabulary), more than its 256-token window.
"""

from __future__ import annotations

import random
import string
from typing import Sequence

from repro.tasks.base import Example, LengthTooShort, check_depth, register, string_match_all
from repro.tasks.layout import NoiseHaystack, finish, fit_count, n_tokens, piece_costs, require, spread_after
from repro.tasks.pools import check_pool, in_pool

PREFIX = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
QUESTION = "\nQuestion: Find all variables that are assigned the value {value} in the text above."
ANSWER_PREFIX = (" Answer: According to the chain(s) of variable assignment in the text above, "
                 "{n} variables are assigned the value {value}, they are: ")
"""RULER's answer prefix, its trailing space included."""
SHOT_LENGTH = 160
"""Tokens of the solved example's prompt that ``fewshot=True`` prepends (more when a tokenizer needs
more); its answer and a blank line follow."""


@register("vt")
class VariableTracking:
    """RULER ``vt`` (``num_chains=1, num_hops=4``).

    Args:
        num_chains: chains in the context; the first is asked about.
        num_hops: assignments after the value, so ``num_hops + 1`` answers.
        key_pool: ``"eval"``/``"train"``: variable names split by CRC-32 parity.
        fewshot: prepend one solved short example, as RULER does.
    """

    name = "vt"

    def __init__(self, num_chains: int = 1, num_hops: int = 4, key_pool: str = "eval", fewshot: bool = False):
        for arg, v, hi in (("num_chains", num_chains, 16), ("num_hops", num_hops, 32)):
            if not isinstance(v, int) or not 1 <= v <= hi:
                raise ValueError(f"{arg}={v!r}; allowed: an integer in [1, {hi}]")
        self.num_chains, self.num_hops = num_chains, num_hops
        self.key_pool = check_pool(key_pool)
        self.fewshot = fewshot
        self.max_new_tokens = max(30, 6 * (num_hops + 1))  # RULER: 30

    def _chains(self, rng: random.Random, k: int) -> tuple[list[list[str]], list[list[str]]]:
        names: list[str] = []
        while len(names) < self.num_chains * (self.num_hops + 1):
            v = "".join(rng.choices(string.ascii_uppercase, k=k))
            if v not in names and in_pool(v, self.key_pool):
                names.append(v)
        values = rng.sample(range(10000, 100000), self.num_chains)
        chains, var_sets = [], []
        for c in range(self.num_chains):
            vs = names[c * (self.num_hops + 1):(c + 1) * (self.num_hops + 1)]
            chains.append([f"VAR {vs[0]} = {values[c]}"]
                          + [f"VAR {vs[j + 1]} = VAR {vs[j]}" for j in range(self.num_hops)])
            var_sets.append(vs)
        return chains, var_sets

    def _build(self, tokenizer, length: int, depth: float, rng: random.Random, head: str = "", letters: int = 5):
        chains, var_sets = self._chains(rng, letters)
        value = chains[0][0].split("= ")[1]
        prefix = head + PREFIX
        answer_prefix = ANSWER_PREFIX.format(value=value, n=self.num_hops + 1)
        question = QUESTION.format(value=value) + answer_prefix
        inserts = list(zip([float(depth)] + spread_after(rng, depth, self.num_hops), chains[0]))
        for chain in chains[1:]:
            inserts += list(zip(spread_after(rng, rng.random(), len(chain)), chain))
        fixed = 1 + n_tokens(tokenizer, prefix) + n_tokens(tokenizer, question) + sum(
            piece_costs(tokenizer, ["\n" + t for _, t in inserts]))
        require(length, fixed, self.name)
        hay = NoiseHaystack()
        build = hay.builder(tokenizer, prefix, inserts, question)
        k = fit_count(tokenizer, length, lambda k: build(k)[0], hay.costs(tokenizer, length - fixed), fixed, self.name)
        prompt, spans = build(k)
        return prompt, spans, var_sets, (len(prefix), len(prompt) - len(question)), answer_prefix

    def _shot(self, tokenizer, seed: int) -> str:
        """RULER's solved example: a whole short prompt (3-letter names), its answer, a blank line."""
        need = SHOT_LENGTH
        for _ in range(3):  # a tokenizer may need more than SHOT_LENGTH for one chain and the template
            shot_rng = random.Random(f"{self.name}:shot:{seed}")
            try:
                shot, _, shot_vars, _, _ = self._build(tokenizer, need, shot_rng.random(), shot_rng, letters=3)
                return shot + " ".join(shot_vars[0]) + "\n\n"
            except LengthTooShort as err:
                need = err.minimum
        raise AssertionError(f"{self.name}: no solved example fits {need} tokens")

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        head = self._shot(tokenizer, seed) if self.fewshot else ""
        try:
            prompt, spans, var_sets, context, answer_prefix = self._build(tokenizer, length, depth, rng, head)
        except LengthTooShort as err:
            if not head:
                raise
            raise LengthTooShort(f"{self.name}: length={length!r} is too short; allowed: an integer >= "
                                 f"{err.minimum} tokens (fewshot=True: the solved example takes "
                                 f"{n_tokens(tokenizer, head)} of them)", err.minimum) from None
        n = self.num_hops + 1
        return finish(self.name, tokenizer, prompt, var_sets[0], length=length, depth=depth, seed=seed,
                      spans=spans[:n], context=context, inserted=spans[n:], answer_prefix=answer_prefix,
                      value=prompt[spans[0][0]:spans[0][1]].split("= ")[1], fewshot=self.fewshot)

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return string_match_all(prediction, references)
