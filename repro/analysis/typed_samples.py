"""Multi-hop samples with a label per token, ready for the CDT analyses (§3, App. B).

A :class:`TypedSample` is one prompt of CDT's multi-hop task (:mod:`repro.tasks.multihop`) with the reference answer
appended as in training rows (`` <answer>`` then end-of-sequence), the type of every token (``supporting``,
``interference``, ``irrelevant``, ``low_frequency``, ``prompt``, and ``answer`` for the appended tokens), the
answer positions (the loss of Eq. 1 is on these: the answer's own tokens, not the end-of-sequence
terminator, which on a chat model is ``<|im_end|>`` and would dominate the loss) and the training weights of such
a row (answer and terminator 1, the rest ``context_weight``). :func:`answers_correct` splits samples by whether
the model's greedy answer is right.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np

from repro.evaluate import generate
from repro.tasks.base import LengthTooShort
from repro.tasks.multihop import MultiHop

CONTEXT_TYPES = ("supporting", "interference", "irrelevant", "low_frequency")
"""The four context token types of the paper."""


@dataclass(frozen=True, eq=False)
class TypedSample:
    """One labelled multi-hop sample."""

    input_ids: np.ndarray
    """(T,) prompt tokens then the answer tokens and end-of-sequence."""
    types: tuple[str, ...]
    """(T,) token types (:data:`CONTEXT_TYPES`, ``prompt`` or ``answer``)."""
    weights: np.ndarray
    """(T,) training-row weights: 1 on answer tokens, ``context_weight`` elsewhere."""
    prompt_tokens: int
    """Tokens of the prompt (the answer starts here)."""
    prompt: str
    """The prompt text (generation starts after it)."""
    reference: str
    """The right answer."""
    seed: int
    """Evaluation seed of the prompt."""
    depth: float
    """Depth of the first supporting fact."""

    @property
    def answer_positions(self) -> np.ndarray:
        """Positions of the answer's own tokens (IG's target, Eq. 1's ``Y``): the end-of-sequence terminator after
        them is left out."""
        return np.arange(self.prompt_tokens, len(self.input_ids) - 1)


def typed_min_length(tokenizer, n: int, hops: int = 2, key_pool: str = "train",
                     depths: Sequence[float] = (0.1, 0.4, 0.7), seed0: int = 0) -> int:
    """The shortest ``length`` :func:`typed_samples` accepts for these arguments (at least 16): each prompt's own
    minimum (the task asked for 1 token) plus the answer budget, over the ``n`` seeds and depths it would use."""
    task, need = MultiHop(f"multihop_{hops}", hops, key_pool=key_pool), 16
    for i in range(n):
        try:
            task.generate(tokenizer, 1, float(depths[i % len(depths)]), seed0 + i)
        except LengthTooShort as err:
            need = max(need, err.minimum + task.max_new_tokens)
    return need


def typed_samples(tokenizer, length: int, n: int, hops: int = 2, key_pool: str = "train",
                  depths: Sequence[float] = (0.1, 0.4, 0.7), context_weight: float = 0.05,
                  seed0: int = 0) -> list[TypedSample]:
    """``n`` samples of the ``hops``-hop task whose prompt has ``length - 8`` tokens (the task's answer budget, as
    training rows), seeds ``seed0 ..`` (evaluation seeds: disjoint from training seeds), depths cycled."""
    if n < 1:
        raise ValueError(f"n={n}; allowed: n >= 1")
    need = typed_min_length(tokenizer, n, hops, key_pool, depths, seed0)
    if length < need:
        raise ValueError(f"length={length} is too short for {n} multihop_{hops} prompts; allowed: length >= {need}")
    task = MultiHop(f"multihop_{hops}", hops, key_pool=key_pool)
    out = []
    for i in range(n):
        depth, seed = float(depths[i % len(depths)]), seed0 + i
        ex = task.generate(tokenizer, length - task.max_new_tokens, depth, seed)
        prompt = tokenizer(ex.prompt).input_ids
        answer = tokenizer(" " + ex.references[0], add_special_tokens=False).input_ids + [tokenizer.eos_token_id]
        types = tuple(ex.metadata["token_types"]) + ("answer",) * len(answer)
        if len(types) != len(prompt) + len(answer):
            raise AssertionError(f"{len(types)} labels for {len(prompt) + len(answer)} tokens (seed {seed})")
        w = np.full(len(types), context_weight, dtype=np.float32)
        w[len(prompt):] = 1.0
        out.append(TypedSample(np.asarray(prompt + answer, dtype=np.int64), types, w, len(prompt), ex.prompt,
                               ex.references[0], seed, depth))
    return out


def answers_correct(model, tokenizer, samples: Sequence[TypedSample], hops: int = 2,
                    key_pool: str = "train") -> list[bool]:
    """Whether the model's greedy answer to each sample is right (the task's BABILong-style scorer)."""
    task = MultiHop(f"multihop_{hops}", hops, key_pool=key_pool)
    outs = generate(model, tokenizer, [s.prompt for s in samples], task.max_new_tokens)
    return [bool(task.score(o, [s.reference])) for o, s in zip(outs, samples)]


def construction(tokenizer, hops: int, length: int, n: int, key_pool: str = "eval",
                 depths: Sequence[float] = (0.0, 0.25, 0.5, 0.75)) -> dict:
    """CD-TaskB: how the generator builds ``n`` prompts of ``length`` tokens with ``hops`` supporting facts (seeds
    0..n-1, depths cycled): mean tokens per type, fact counts (interference: min, max, and the minimum count after
    the last supporting fact), emoji, and where the supporting facts sit (relative depth in the context). A length
    too short for the task gives a row that says so (``prompts`` 0)."""
    task = MultiHop(f"multihop_{hops}", hops, key_pool=key_pool)
    try:
        task.generate(tokenizer, length, float(depths[0]), 0)
    except LengthTooShort as e:
        return {"hops": hops, "length": length, "prompts": 0, "status": f"too short: {e}"}
    counts = {t: [] for t in (*CONTEXT_TYPES, "prompt")}
    n_int, after, n_low, sup_depths = [], [], [], []
    for i in range(n):
        ex = task.generate(tokenizer, length, float(depths[i % len(depths)]), i)
        md = ex.metadata
        types = md["token_types"]
        for t in counts:
            counts[t].append(sum(x == t for x in types))
        sup, inter = md["type_spans"]["supporting"], md["type_spans"]["interference"]
        n_int.append(len(inter))
        after.append(sum(s[0] > sup[-1][0] for s in inter))
        n_low.append(len(md["type_spans"]["low_frequency"]))
        sup_depths += [round(float(d), 2) for d in md["evidence_depths"]]
    total = int(np.mean([sum(c) for c in zip(*counts.values())]))
    row = {"hops": hops, "length": length, "prompts": n, "tokens": total}
    row.update({f"{t} tokens": round(float(np.mean(v)), 1) for t, v in counts.items()})
    row.update({"supporting facts": hops, "interference facts (mean)": round(float(np.mean(n_int)), 2),
                "interference_min": int(min(n_int)), "interference_max": int(max(n_int)),
                "interference_after_last_min": int(min(after)), "emoji": round(float(np.mean(n_low)), 1),
                "supporting depths (quartiles)": ", ".join(f"{q:.2f}"
                                                           for q in np.quantile(sup_depths, [.25, .5, .75]))})
    return row
