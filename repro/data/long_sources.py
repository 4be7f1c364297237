"""ProLong's data sources (§3.1-3.3), from what the testbed's corpus holds or from a user's files.

Source specs (each gives tokenized documents, each starting with the tokenizer's document separator
(:func:`repro.data.special_tokens.document_separator`), as :class:`~repro.data.streams.TokenStream` reads them):

* ``corpus:code`` — **code repositories**: the corpus's ``code`` documents (each stdlib package, all its files
  concatenated: a repository, as ProLong's code repos are).
* ``corpus:books`` — **books, a substitute**: nothing book-length ships with Python. The longest prose we can
  assemble offline is Python's own documentation bound into volumes: the reference topics of ``pydoc_data`` in
  order as one volume, and each top-level package's docstrings (module by module) as one volume. Technical
  prose, not fiction; label it so wherever it is reported.
* ``corpus:short`` — **ShortMix, a substitute**: short documents cut from the same stdlib text: every top-level
  block of every source file (a function, a class, the module header) and every prose document, each its own
  document, cut below the long threshold. Unlike the paper's ShortMix (FineWeb, Wikipedia, StackExchange, ...)
  it adds no content: the long/short ablation here varies document length, not what the text is about.
* ``folder:<path>`` / ``hf_disk:<path>`` — a user's local text (``.txt`` / ``.jsonl`` with ``text``) or a
  ``datasets`` folder saved to disk, tokenized with the run's tokenizer (the paper profile's sources).

:func:`long_tokens` counts what PL-Tab3 reports: documents and tokens per source at and above the threshold.
"""

from __future__ import annotations

import re
from typing import Sequence

import numpy as np

from repro.data.corpus import iter_source
from repro.data.special_tokens import document_separator

BUILTIN_SPECS: tuple[str, ...] = ("corpus:code", "corpus:books", "corpus:short")
"""The built-in source specs (derived from the testbed corpus)."""

_TOP_LEVEL = re.compile(r"(?m)^(?=(?:def |class |async def |@)\S)")
_FILE = re.compile(r"(?m)^(?=# file: )")


def _volume(name: str) -> str:
    """The volume a prose document is bound into: ``reference`` for pydoc topics, else its top-level package."""
    if name.startswith("topic:"):
        return "reference"
    path = name.split(":", 1)[1]
    return path.split("/")[0].removesuffix(".py")


def _bind(parts: Sequence[np.ndarray]) -> np.ndarray:
    """Documents (each separator-first) bound into one: the first separator kept, the later ones dropped."""
    return np.concatenate([parts[0], *(p[1:] for p in parts[1:])])


def code_blocks(text: str) -> list[str]:
    """A code document cut into its files' top-level blocks (functions, classes, decorators, module headers)."""
    out: list[str] = []
    for f in _FILE.split(text):
        carry = ""  # decorator lines stay with the definition they decorate
        for b in _TOP_LEVEL.split(f):
            if b.strip() and all(line.startswith("@") for line in b.strip().splitlines()):
                carry += b
            elif b.strip() or carry:
                out.append(carry + b)
                carry = ""
        if carry:
            out.append(carry)
    return out


def _cut(ids: np.ndarray, below: int, sep: int) -> list[np.ndarray]:
    """``ids`` (separator-first) cut into pieces of fewer than ``below`` tokens, each starting with ``sep``."""
    body = ids[1:]
    step = below - 2
    return [np.r_[sep, body[i:i + step]].astype(np.int64) for i in range(0, max(len(body), 1), step)]


def source_documents(spec: str, corpus, tokenizer, threshold: int) -> list[np.ndarray]:
    """The tokenized documents of source ``spec`` (see the module docstring); ``corpus`` is the testbed's
    :class:`repro.data.corpus.Corpus` (for ``corpus:`` specs, whose documents already start with the separator),
    ``threshold`` the long-document length."""
    kind, _, arg = spec.partition(":")
    sep = document_separator(tokenizer)
    if kind == "corpus":
        if arg not in ("code", "books", "short"):
            raise ValueError(f"unknown source {spec!r}; allowed: {', '.join(BUILTIN_SPECS)}, folder:<path>, "
                             "hf_disk:<path>")
        docs = [(d, corpus.tokens[corpus.offsets[i]:corpus.offsets[i + 1]].astype(np.int64))
                for i, d in enumerate(corpus.documents)]
        if arg == "code":
            return [ids for d, ids in docs if d.source == "code"]
        if arg == "books":
            volumes: dict[str, list[np.ndarray]] = {}
            for d, ids in docs:
                if d.source == "prose":
                    volumes.setdefault(_volume(d.name), []).append(ids)
            return [_bind(v) for _, v in sorted(volumes.items())]
        texts = [b for d, _ in docs if d.source == "code" for b in code_blocks(d.text)]
        enc = tokenizer(texts, add_special_tokens=False).input_ids if texts else []
        pieces = [np.asarray([sep, *e], dtype=np.int64) for e in enc]
        pieces += [ids for d, ids in docs if d.source == "prose"]
        return [c for ids in pieces for c in (_cut(ids, threshold, sep) if len(ids) >= threshold else [ids])]
    if kind in ("folder", "hf_disk") and arg:
        texts = [d.text for d in iter_source(spec)]
        enc = tokenizer(texts, add_special_tokens=False).input_ids if texts else []
        return [np.asarray([sep, *e], dtype=np.int64) for e in enc]
    raise ValueError(f"unknown source {spec!r}; allowed: {', '.join(BUILTIN_SPECS)}, folder:<path>, hf_disk:<path>")


def split_by_length(documents: Sequence[np.ndarray], threshold: int, long: bool) -> list[np.ndarray]:
    """The documents a long stream reads (``long``: at least ``threshold`` tokens) or a short one (fewer)."""
    if threshold < 2:
        raise ValueError(f"long threshold {threshold}; allowed: >= 2 tokens")
    return [d for d in documents if (len(d) >= threshold) == long]


def long_tokens(documents: Sequence[np.ndarray], threshold: int) -> dict[str, int]:
    """PL-Tab3's counts for one source: documents and tokens in all, and at or above ``threshold``."""
    n = np.array([len(d) for d in documents], dtype=np.int64)
    return {"documents": int(len(n)), "tokens": int(n.sum()), "long_documents": int((n >= threshold).sum()),
            "long_tokens": int(n[n >= threshold].sum()), "longest": int(n.max()) if len(n) else 0}
