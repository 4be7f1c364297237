"""LongRecipe's sentence selection (§4.1, last paragraph; Table 3 ablations).

From a long sample, LongRecipe drops the sentences that hold none of the
impactful token types (the *anchors* of :mod:`repro.analysis.tokens`) and
takes a fixed number of tokens from the remaining ones; the LongRecipe
position transform then spreads them over the target window. The ablation
"Random T" takes random sentences instead.

Our reading, where the paper is silent:

* Sentences end at (and include) every token holding ``. ! ? \\n`` (App. D).
* Sentences are added whole, never cut. The budget is filled greedily in a
  random order: first the *mandatory* sentences (for retrieval rows: the
  instruction, the evidence and the question with its answer), then the anchor
  sentences, then, if room is left, other sentences. A sentence that does not
  fit is skipped, so when selection ends no unselected sentence fits the room
  left.
* The kept sentences stay in their original order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

SELECTION_MODES = ("anchors", "random")
"""``anchors``: LongRecipe; ``random``: the "Random T" ablation."""


@dataclass(frozen=True)
class Selection:
    """The result of selecting sentences from one long sample."""

    index: np.ndarray
    """Token indices kept, increasing (whole sentences)."""
    sentence_starts: np.ndarray
    """Start of every kept sentence inside the selected tokens (first is 0)."""
    kept: np.ndarray
    """Indices of the kept sentences in the long sample."""
    n_sentences: int
    """Sentences in the long sample."""
    n_anchor_sentences: int
    """Sentences holding at least one anchor token."""


def sentence_bounds(sentence_ends: np.ndarray) -> np.ndarray:
    """``(N, 2)`` start/end (exclusive) of each sentence from a per-token "ends a sentence" mask."""
    ends = np.asarray(sentence_ends, dtype=bool)
    if ends.size == 0:
        raise ValueError("no tokens; allowed: at least one token")
    stops = np.flatnonzero(ends) + 1
    if not stops.size or stops[-1] != ends.size:
        stops = np.append(stops, ends.size)
    starts = np.concatenate([[0], stops[:-1]])
    return np.stack([starts, stops], axis=1).astype(np.int64)


def _per_sentence(mask: np.ndarray | None, bounds: np.ndarray) -> np.ndarray:
    if mask is None:
        return np.zeros(len(bounds), dtype=bool)
    mask = np.asarray(mask, dtype=bool)
    csum = np.concatenate([[0], np.cumsum(mask)])
    return csum[bounds[:, 1]] > csum[bounds[:, 0]]


def select_sentences(sentence_ends: np.ndarray, budget: int, rng: np.random.Generator, mode: str = "anchors",
                     anchor_mask: np.ndarray | None = None, mandatory_mask: np.ndarray | None = None) -> Selection:
    """Keep whole sentences of a long sample within ``budget`` tokens.

    Args:
        sentence_ends: per token, whether it ends a sentence (holds a delimiter).
        budget: most tokens to keep (LongRecipe: 30% of the target window).
        rng: draws the order in which sentences of one priority class are tried.
        mode: ``anchors`` (anchor sentences before the others) or ``random``.
        anchor_mask: per token, whether it is an anchor type (``mode="anchors"``).
        mandatory_mask: per token, whether its sentence must be kept.
    """
    if mode not in SELECTION_MODES:
        raise ValueError(f"selection mode {mode!r}; allowed: {', '.join(SELECTION_MODES)}")
    if budget < 1:
        raise ValueError(f"budget={budget}; allowed: >= 1 token")
    if mode == "anchors" and anchor_mask is None:
        raise ValueError("mode='anchors' needs anchor_mask (per-token anchor flags)")
    bounds = sentence_bounds(sentence_ends)
    for name, m in (("anchor_mask", anchor_mask), ("mandatory_mask", mandatory_mask)):
        if m is not None and len(m) != len(sentence_ends):
            raise ValueError(f"{name} has {len(m)} entries for {len(sentence_ends)} tokens")
    lengths = bounds[:, 1] - bounds[:, 0]
    must = _per_sentence(mandatory_mask, bounds)
    anchored = _per_sentence(anchor_mask, bounds)
    need = int(lengths[must].sum())
    if need > budget:
        raise ValueError(f"the mandatory sentences hold {need} tokens; budget={budget}; allowed: budget >= {need}")
    chosen = must.copy()
    room = budget - need
    classes = [np.flatnonzero(~must & anchored), np.flatnonzero(~must & ~anchored)] if mode == "anchors" \
        else [np.flatnonzero(~must)]
    for cls in classes:
        for i in rng.permutation(cls):
            if lengths[i] <= room:
                chosen[i] = True
                room -= int(lengths[i])
    kept = np.flatnonzero(chosen)
    index = np.concatenate([np.arange(*bounds[i]) for i in kept]) if kept.size else np.zeros(0, dtype=np.int64)
    starts = np.concatenate([[0], np.cumsum(lengths[kept])[:-1]]).astype(np.int64) if kept.size else \
        np.zeros(0, dtype=np.int64)
    return Selection(index.astype(np.int64), starts, kept, len(bounds), int(anchored.sum()))
