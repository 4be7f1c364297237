"""Training samples as the position transforms see them, and the argument checks they share.

:class:`PositionSample` holds the sample length ``n`` (and token ids /
sentence starts / token texts where a transform needs them). Sentence starts follow
LongRecipe Appendix D, Algorithm 1 line 6 (:data:`SENTENCE_DELIMITERS`, a token
*containing* a delimiter ends its sentence); the official LongRecipe code's rule
(:data:`OFFICIAL_SENTENCE_ENDS`, a token *equal to* one of five texts) is kept as
a named option for :func:`repro.positions.transforms.longrecipe_official`.
:func:`sample_from_text` / :func:`sample_from_documents` build samples with
real sentence boundaries and token texts from a tokenizer (used by the notebook). The
``_check_*`` helpers validate the uniform transform arguments for both
:mod:`repro.positions.transforms` and :mod:`repro.positions.views`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Sequence

import numpy as np

SENTENCE_DELIMITERS: tuple[str, ...] = (".", "!", "?", "\n")
"""Sentence delimiters of LongRecipe Appendix D, Algorithm 1 line 6 (a token containing one ends its sentence)."""

OFFICIAL_SENTENCE_ENDS: tuple[str, ...] = (".", "\n", "?", "!", ".\n")
"""Token texts that end a sentence in the official LongRecipe code, matched exactly: it splits on five
hard-coded Llama-3 token ids (``.``, ``\\n``, ``?``, ``!``, ``.\\n``), so a token such as ``\\n\\n``,
``).`` or a newline followed by indentation does not end a sentence there. Used by
:func:`repro.positions.transforms.longrecipe_official` (``split="official"``)."""

SPLIT_RULES: tuple[str, ...] = ("paper", "official")
"""Sentence-split rules: ``paper`` (:data:`SENTENCE_DELIMITERS`, contained) or ``official``
(:data:`OFFICIAL_SENTENCE_ENDS`, exact token texts)."""


# ---------------------------------------------------------------------------------------
# sample
# ---------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PositionSample:
    """One training sample as the transforms see it."""

    n: int
    """Number of tokens in the sample (>= 1)."""
    token_ids: tuple[int, ...] | None = None
    """The sample's token ids (length ``n``), where known; unused by the transforms themselves."""
    sentence_starts: tuple[int, ...] | None = None
    """Token indices where sentences start: strictly increasing, first 0, all < ``n``.
    Needed by the LongRecipe transforms (§4.2); see :func:`sentence_starts_from_offsets`."""
    token_texts: tuple[str, ...] | None = None
    """The decoded text of each token (length ``n``), where known. Needed by the official LongRecipe
    reading, which splits sentences at exact token texts (:data:`OFFICIAL_SENTENCE_ENDS`)."""

    def __post_init__(self) -> None:
        if not isinstance(self.n, (int, np.integer)) or isinstance(self.n, bool) or self.n < 1:
            raise ValueError(f"sample length n={self.n!r}; allowed: an integer >= 1")
        object.__setattr__(self, "n", int(self.n))
        if self.token_ids is not None:
            ids = tuple(int(t) for t in self.token_ids)
            if len(ids) != self.n:
                raise ValueError(f"len(token_ids)={len(ids)} but n={self.n}; allowed: len(token_ids) == n")
            object.__setattr__(self, "token_ids", ids)
        if self.token_texts is not None:
            texts = tuple(self.token_texts)
            if len(texts) != self.n or not all(isinstance(t, str) for t in texts):
                raise ValueError(f"token_texts has {len(texts)} entries but n={self.n}; "
                                 "allowed: one string per token (len(token_texts) == n)")
            object.__setattr__(self, "token_texts", texts)
        if self.sentence_starts is not None:
            starts = np.asarray(self.sentence_starts, dtype=np.int64).ravel()
            if starts.size == 0 or starts[0] != 0:
                raise ValueError(f"sentence_starts must begin with 0, got {starts[:3].tolist()}...")
            if np.any(np.diff(starts) <= 0) or starts[-1] >= self.n:
                raise ValueError(f"sentence_starts must be strictly increasing and < n={self.n}; "
                                 f"got max {int(starts.max())}")
            object.__setattr__(self, "sentence_starts", tuple(int(s) for s in starts))

    @property
    def sentence_lengths(self) -> np.ndarray:
        """Token count of each sentence (requires ``sentence_starts``)."""
        starts = np.asarray(_require_sentences(self), dtype=np.int64)
        return np.diff(np.append(starts, self.n))


def _require_sentences(sample: PositionSample) -> tuple[int, ...]:
    if sample.sentence_starts is None:
        raise ValueError("this transform needs sample.sentence_starts (LongRecipe §4.2 splits the "
                         "sample into sentences); build the sample with sample_from_text/"
                         "sample_from_documents or pass sentence_starts")
    return sample.sentence_starts


def sentence_starts_by_rule(sample: PositionSample, split: str = "paper") -> tuple[int, ...]:
    """The sample's sentence starts under a split rule of :data:`SPLIT_RULES`.

    ``paper``: ``sample.sentence_starts`` (LongRecipe Alg. 1 line 6, plus document
    boundaries where the sample was built from a corpus). ``official``: a token whose
    text equals one of :data:`OFFICIAL_SENTENCE_ENDS` ends its sentence, computed from
    ``sample.token_texts`` (token texts only: like the official code, which splits one
    document's tokens, it knows no document boundaries).
    """
    if split == "paper":
        return _require_sentences(sample)
    if split != "official":
        raise ValueError(f"split={split!r}; allowed: {', '.join(repr(r) for r in SPLIT_RULES)}")
    if sample.token_texts is None:
        raise ValueError("split='official' needs sample.token_texts (the official code splits at exact token "
                         "texts); build the sample with sample_from_text/sample_from_documents or pass token_texts, "
                         "or use split='paper'")
    return tuple(sentence_starts_from_pieces(sample.token_texts, OFFICIAL_SENTENCE_ENDS, exact=True).tolist())


def sentence_starts_from_pieces(pieces: Sequence[str],
                                delimiters: Sequence[str] = SENTENCE_DELIMITERS,
                                exact: bool = False) -> np.ndarray:
    """Sentence starts from the decoded text of each token (LongRecipe App. D, Alg. 1 line 6).

    A sentence ends at (and includes) every token whose text contains one of
    ``. ! ? \\n`` (``exact=True``: whose text equals one of ``delimiters``, the
    official code's rule with :data:`OFFICIAL_SENTENCE_ENDS`); the next token
    starts a new sentence. Splits therefore fall on token boundaries. Token 0
    always starts a sentence.
    """
    if exact:
        ends_set = frozenset(delimiters)
        ends = np.fromiter((p in ends_set for p in pieces), dtype=bool, count=len(pieces))
    else:
        ends = np.fromiter((any(d in p for d in delimiters) for p in pieces), dtype=bool, count=len(pieces))
    if ends.size == 0:
        raise ValueError("no tokens; allowed: at least one token")
    starts = np.flatnonzero(ends[:-1]) + 1
    return np.concatenate([[0], starts]).astype(np.int64)


def sentence_starts_from_offsets(text: str, offsets: Sequence[tuple[int, int]],
                                 delimiters: Sequence[str] = SENTENCE_DELIMITERS) -> np.ndarray:
    """Sentence starts from a fast tokenizer's ``offset_mapping`` into ``text``."""
    return sentence_starts_from_pieces([text[a:b] for a, b in offsets], delimiters)


def sample_from_text(text: str, tokenizer, n: int | None = None) -> PositionSample:
    """Tokenize ``text`` (no special tokens), keep the first ``n`` tokens, split into sentences."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids, offsets = enc["input_ids"], enc["offset_mapping"]
    if n is not None:
        if n > len(ids):
            raise ValueError(f"n={n} but the text has only {len(ids)} tokens; allowed n <= {len(ids)}")
        ids, offsets = ids[:n], offsets[:n]
    pieces = [text[a:b] for a, b in offsets]
    starts = sentence_starts_from_pieces(pieces)
    return PositionSample(n=len(ids), token_ids=tuple(ids), sentence_starts=tuple(starts.tolist()),
                          token_texts=tuple(pieces))


def sample_from_documents(documents: Iterable[Any], tokenizer, n: int,
                          sources: Sequence[str] | None = ("prose", "code"),
                          rng: np.random.Generator | None = None) -> PositionSample:
    """A sample of exactly ``n`` tokens with real sentence boundaries from a corpus.

    Documents (objects with ``.text`` and ``.source``) whose source is in
    ``sources`` (all if ``None``) are tokenized one by one, in corpus order or
    shuffled by ``rng``, and concatenated until ``n`` tokens; the first ``n``
    are kept. Each document boundary also starts a sentence (``sentence_starts``;
    ``token_texts`` holds each token's text).
    """
    docs = [d for d in documents if sources is None or d.source in sources]
    if not docs:
        raise ValueError(f"no documents with source in {sources!r}")
    order = rng.permutation(len(docs)) if rng is not None else np.arange(len(docs))
    ids: list[int] = []
    starts: list[int] = []
    texts: list[str] = []
    for k in order:
        text = docs[int(k)].text
        if not text:
            continue
        enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
        if not enc["input_ids"]:
            continue
        pieces = [text[a:b] for a, b in enc["offset_mapping"]]
        starts.extend((sentence_starts_from_pieces(pieces) + len(ids)).tolist())
        ids.extend(enc["input_ids"])
        texts.extend(pieces)
        if len(ids) >= n:
            break
    if len(ids) < n:
        raise ValueError(f"corpus has only {len(ids)} tokens in sources {sources!r}; allowed n <= {len(ids)}")
    starts = [s for s in starts if s < n]
    return PositionSample(n=n, token_ids=tuple(ids[:n]), sentence_starts=tuple(starts), token_texts=tuple(texts[:n]))


# ---------------------------------------------------------------------------------------
# validation helpers
# ---------------------------------------------------------------------------------------
def _check_target(sample: PositionSample, target: int) -> int:
    if not isinstance(target, (int, np.integer)) or isinstance(target, bool) or target < 1:
        raise ValueError(f"target={target!r}; allowed: an integer >= 1")
    if sample.n > target:
        raise ValueError(f"sample length n={sample.n} exceeds target={int(target)}; allowed n <= target")
    return int(target)


def _check_rng(rng: np.random.Generator) -> None:
    if not isinstance(rng, np.random.Generator):
        raise TypeError(f"rng must be a numpy.random.Generator (np.random.default_rng(seed)), got {type(rng).__name__}")


def _check_int(name: str, value: Any, lo: int, hi: int | None = None) -> int:
    ok = isinstance(value, (int, np.integer)) and not isinstance(value, bool)
    if not ok or value < lo or (hi is not None and value > hi):
        rng_txt = f"{lo} <= {name}" + (f" <= {hi}" if hi is not None else "")
        raise ValueError(f"{name}={value!r}; allowed: an integer with {rng_txt}")
    return int(value)

