"""RULER variable tracking, ``vt`` (Hsieh et al., 2024, §3.2 multi-hop tracing).

A chain ``VAR AAAAA = 12345``, ``VAR BBBBB = VAR AAAAA``, ... (``num_hops``
hops, 5-letter upper-case names) hides among noise sentences; the question
asks for every variable that ends up holding the value. ``num_chains - 1``
further chains with other values are distractors. References are the
``num_hops + 1`` names of the first chain, scored with ``string_match_all``.

``depth`` places the chain's first statement (the value assignment); the
later hops follow at seeded random depths after it, in order. RULER also
prepends one solved few-shot example (~500 tokens); ``fewshot=True`` adds a
short one (off by default: it costs more than the tiny model's 256-token window).
"""

from __future__ import annotations

import random
import string
from typing import Sequence

from repro.tasks.base import Example, check_depth, register, string_match_all
from repro.tasks.layout import assemble, cycle, finish, fit_count, n_tokens, piece_costs, require, spread_after
from repro.tasks.niah import NOISE
from repro.tasks.pools import check_pool, in_pool

PREFIX = "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
QUESTION = ("\nQuestion: Find all variables that are assigned the value {value} in the text above. "
            "Answer: According to the chain(s) of variable assignment in the text above, "
            "{n} variables are assgined the value {value}, they are:")


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

    def _chains(self, rng: random.Random, k: int = 5) -> tuple[list[list[str]], list[list[str]]]:
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

    def _build(self, tokenizer, length: int, depth: float, rng: random.Random, head: str = ""):
        chains, var_sets = self._chains(rng)
        value = chains[0][0].split("= ")[1]
        prefix = head + PREFIX
        question = QUESTION.format(value=value, n=self.num_hops + 1)
        inserts = list(zip([float(depth)] + spread_after(rng, depth, self.num_hops), chains[0]))
        for chain in chains[1:]:
            inserts += list(zip(spread_after(rng, rng.random(), len(chain)), chain))
        fixed = 1 + n_tokens(tokenizer, prefix) + n_tokens(tokenizer, question) + sum(
            piece_costs(tokenizer, [" " + t for _, t in inserts]))
        require(length, fixed, self.name)
        costs = [n_tokens(tokenizer, " " + s) for s in NOISE]
        unit_costs = cycle(costs, (length - fixed) // min(costs) + 2)
        build = lambda k: assemble(prefix, cycle(NOISE, k), inserts, question)[0]  # noqa: E731
        k = fit_count(tokenizer, length, build, unit_costs, fixed)
        prompt, spans = assemble(prefix, cycle(NOISE, k), inserts, question)
        return prompt, spans, var_sets, (len(prefix), len(prompt) - len(question))

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        head = ""
        if self.fewshot:
            shot_rng = random.Random(f"{self.name}:shot:{seed}")
            shot, _, shot_vars, _ = self._build(tokenizer, 160, shot_rng.random(), shot_rng)
            head = shot + " " + " ".join(shot_vars[0]) + "\n\n"
        prompt, spans, var_sets, context = self._build(tokenizer, length, depth, rng, head)
        n = self.num_hops + 1
        return finish(self.name, tokenizer, prompt, var_sets[0], length=length, depth=depth, seed=seed,
                      spans=spans[:n], context=context, inserted=spans[n:],
                      value=prompt[spans[0][0]:spans[0][1]].split("= ")[1])

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return string_match_all(prediction, references)
