"""Synthetic training rows: dense copy, retrieval examples and corpus text.

All generators draw from a ``numpy.random.Generator`` so a batch is a pure
function of ``(seed, step)``: resuming a run reproduces its data stream.
Retrieval rows come from the evaluation task generators with the ``train``
key pool and seeds far from evaluation seeds.
"""

from __future__ import annotations

import numpy as np

from repro.data.packing import Segment
from repro.tasks import get_task
from repro.tasks.base import LengthTooShort

TRAIN_SEED_OFFSET = 1_000_000_000
"""Training examples use task seeds >= this; evaluation seeds stay below it."""


def copy_segment(rng: np.random.Generator, row_len: int, period: tuple[int, int], vocab_lo: int,
                 vocab_hi: int) -> Segment:
    """A random ``p``-token segment repeated to ``row_len`` tokens; loss only after the first period."""
    p = int(rng.integers(period[0], period[1] + 1))
    seg = rng.integers(vocab_lo, vocab_hi, size=p)
    toks = np.resize(seg, row_len).astype(np.int64)
    w = np.zeros(row_len, dtype=np.float32)
    w[p:] = 1.0
    return Segment(toks, w)


class RetrievalRows:
    """Retrieval examples of a given total length: prompt, then `` answer`` and EOS.

    The answer is the task's references joined by ``", "`` (multi-value tasks list every
    value); each task reserves its ``max_new_tokens`` for it. Tasks whose minimum prompt
    length does not fit a row length are skipped at that length.

    Args:
        tokenizer: the model's tokenizer.
        tasks: registered task names used for training rows (``train`` key pool).
        context_weight: loss weight of prompt tokens (answer and EOS weigh 1).
        weights: relative share of each task (None: equal); at a length where only some tasks
            fit, the weights of those are renormalised.
    """

    def __init__(self, tokenizer, tasks: tuple[str, ...] = ("niah_single_1",), context_weight: float = 0.05,
                 weights: tuple[float, ...] | None = None):
        self.tok = tokenizer
        self.tasks = [get_task(t, key_pool="train") for t in tasks]
        self.context_weight = context_weight
        if weights is not None and (len(weights) != len(tasks) or min(weights) <= 0):
            raise ValueError(f"weights={weights}; allowed: one positive weight per task ({len(tasks)})")
        self.weights = None if weights is None else np.asarray(weights, dtype=np.float64)
        self._eligible: dict[int, list] = {}
        self._probs: dict[int, np.ndarray] = {}

    def eligible(self, length: int) -> list:
        """Tasks that fit a row of ``length`` tokens (probed once per length)."""
        if length not in self._eligible:
            idx = []
            for i, task in enumerate(self.tasks):
                try:
                    task.generate(self.tok, length - task.max_new_tokens, 0.5, TRAIN_SEED_OFFSET)
                    idx.append(i)
                except ValueError:
                    continue
            if not idx:
                raise ValueError(f"no training task fits rows of {length} tokens; tasks: "
                                 f"{[t.name for t in self.tasks]}; use longer rows")
            self._eligible[length] = [self.tasks[i] for i in idx]
            if self.weights is not None:
                self._probs[length] = self.weights[idx] / self.weights[idx].sum()
        return self._eligible[length]

    def segment(self, rng: np.random.Generator, length: int) -> Segment:
        return self.segment_with_evidence(rng, length)[0]

    def segment_with_evidence(self, rng: np.random.Generator, length: int) -> tuple[Segment, np.ndarray]:
        """A retrieval row and, per token, whether it lies outside the haystack or in evidence.

        The mask marks the instruction before the context, every evidence span, the
        question after the context and the answer: what sentence selection must keep
        for the row to stay answerable.
        """
        tasks = self.eligible(length)
        if self.weights is None:
            first = int(rng.integers(len(tasks)))
        else:
            first = int(rng.choice(len(tasks), p=self._probs[length]))
        seed = TRAIN_SEED_OFFSET + int(rng.integers(0, 2**31))
        depth = float(rng.random())
        for k in range(len(tasks)):  # a seed may need a longer prompt than the probe: try the next task
            task = tasks[(first + k) % len(tasks)]
            try:
                ex = task.generate(self.tok, length - task.max_new_tokens, depth, seed)
                break
            except LengthTooShort:
                continue
        else:
            raise ValueError(f"no training task fits rows of {length} tokens for seed {seed}")
        enc = self.tok(ex.prompt, return_offsets_mapping=True)
        prompt = enc["input_ids"]
        answer = self.tok(" " + ", ".join(ex.references), add_special_tokens=False).input_ids + [self.tok.eos_token_id]
        toks = np.asarray(prompt + answer, dtype=np.int64)[:length]
        w = np.full(len(toks), self.context_weight, dtype=np.float32)
        is_answer = np.zeros(len(toks), dtype=bool)
        is_answer[len(prompt):] = True
        w[is_answer] = 1.0
        c0, c1 = ex.metadata.get("context_char_span", (0, len(ex.prompt)))
        spans = ex.metadata.get("evidence_char_spans", ())
        keep = np.ones(len(toks), dtype=bool)
        for i, (a, b) in enumerate(enc["offset_mapping"][:len(toks)]):
            if b > a and c0 <= a < c1:
                keep[i] = any(a < e and s < b for s, e in spans)
        return Segment(toks, w, answer=is_answer), keep


class CorpusRows:
    """Chunks of corpus documents (a flat token array with document offsets)."""

    def __init__(self, tokens: np.ndarray, offsets: np.ndarray, weight: float = 1.0):
        self.tokens, self.offsets, self.weight = tokens, offsets, weight
        self.lengths = np.diff(offsets)
        if len(self.lengths) == 0:
            raise ValueError("the corpus holds no documents")

    def segment(self, rng: np.random.Generator, length: int, whole: bool = False) -> Segment:
        """A random chunk of at most ``length`` tokens, documents drawn by length.

        ``whole=True`` draws only among documents with at least ``length`` tokens
        (a full-length sample, as long-context extension needs).
        """
        lengths = self.lengths if not whole else np.where(self.lengths >= length, self.lengths, 0)
        if lengths.sum() == 0:
            raise ValueError(f"no corpus document has {length} tokens; longest: {int(self.lengths.max())}")
        d = int(rng.choice(len(lengths), p=lengths / lengths.sum()))
        n = int(self.lengths[d])
        start = int(rng.integers(0, max(n - length, 0) + 1))
        toks = self.tokens[self.offsets[d] + start: self.offsets[d] + min(start + length, n)].astype(np.int64)
        return Segment(toks, np.full(len(toks), self.weight, dtype=np.float32))
