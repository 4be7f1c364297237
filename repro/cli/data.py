"""Training and analysis data from one source spec (:mod:`repro.data.long_sources`): ``corpus:code``,
``corpus:books``, ``corpus:short`` (built from Python's own files, as the testbed corpus), ``folder:<path>``
(``.txt`` / ``.jsonl`` with ``text``) or ``hf_disk:<path>`` (a ``datasets`` folder saved to disk)."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from repro.cli.common import CLIError, warnings_as_lines
from repro.cli.train_checks import MIN_TARGET
from repro.data.corpus import Corpus, SkippedFileWarning, iter_code, iter_prose
from repro.data.long_sources import BUILTIN_SPECS, source_documents, split_by_length
from repro.data.special_tokens import document_separator
from repro.data.streams import TokenStream
from repro.data.synthetic import CorpusRows
from repro.methods.prolong import long_threshold

DATA_KINDS: tuple[str, ...] = ("corpus:code", "corpus:books", "corpus:short", "folder:<path>", "hf_disk:<path>")
"""The source specs ``--data`` accepts."""


def parse_data_spec(spec: str) -> str:
    """``spec`` if it parses and its folder exists, else a :class:`CLIError` naming it and the allowed forms."""
    kind, colon, arg = spec.partition(":")
    if spec in BUILTIN_SPECS:
        return spec
    if colon and arg and kind in ("folder", "hf_disk"):
        if not Path(arg).exists():
            raise CLIError(f"--data {spec!r}: {arg!r} does not exist; allowed: an existing folder")
        if not Path(arg).is_dir():
            raise CLIError(f"--data {spec!r}: {arg!r} is a file, not a folder; allowed: {kind}:<folder> "
                           f"({'the folder holding it' if kind == 'folder' else 'a dataset saved with save_to_disk'})")
        return spec
    raise CLIError(f"--data {spec!r} does not parse; allowed: {', '.join(DATA_KINDS)}")


def builtin_corpus(tokenizer, max_bytes: int | None):
    """The testbed corpus's code and prose documents (each source cut at ``max_bytes``), tokenized in memory as a
    :class:`repro.data.corpus.Corpus` (what the ``corpus:`` specs read)."""
    docs = [*iter_code(max_bytes), *iter_prose(max_bytes)]
    enc = tokenizer([d.text for d in docs], add_special_tokens=False).input_ids
    sep = document_separator(tokenizer)
    ids = [np.asarray([sep, *e], dtype=np.int64) for e in enc]
    offsets = np.concatenate([[0], np.cumsum([len(i) for i in ids])]).astype(np.int64)
    return Corpus(Path("."), docs, np.concatenate(ids), offsets, [d.source for d in docs], {})


def documents(spec: str, tokenizer, threshold: int, max_bytes: int | None = 2_000_000) -> list[np.ndarray]:
    """The tokenized documents (separator first) of ``spec``; ``threshold`` is the long-document length
    (``corpus:short`` cuts below it), ``max_bytes`` caps each built-in source. A file the source skips (a ``.txt``
    of binary data) gets one ``warning:`` line naming it."""
    spec = parse_data_spec(spec)
    corpus = builtin_corpus(tokenizer, max_bytes) if spec.startswith("corpus:") else None
    try:
        with warnings_as_lines(SkippedFileWarning):
            docs = source_documents(spec, corpus, tokenizer, threshold)
    except (FileNotFoundError, ValueError, ImportError) as e:
        raise CLIError(f"--data {spec!r}: {' '.join(str(e).split())}") from e
    docs = [d for d in docs if len(d) > 1]
    if not docs:
        raise CLIError(f"--data {spec!r} holds no text; allowed: a source with at least one document")
    return docs


def require_length(docs: Sequence[np.ndarray], length: int, spec: str, flag: str = "--target",
                   minimum: int = MIN_TARGET) -> None:
    """A :class:`CLIError` unless some document has at least ``length`` tokens; when even the longest is below
    ``minimum`` (the shortest ``flag`` accepted) the advice is longer documents, not a shorter ``flag``."""
    longest = max(len(d) for d in docs)
    if longest < length:
        if longest < minimum:
            raise CLIError(f"--data {spec!r} is too small: its longest document has {longest} tokens, below the "
                           f"shortest {flag} ({minimum}); allowed: documents of at least {length} tokens")
        raise CLIError(f"{flag} {length} is longer than allowed: the longest document of --data {spec!r} has "
                       f"{longest} tokens; allowed: {flag} <= {longest} (or longer documents)")


def corpus_rows(docs: Sequence[np.ndarray]):
    """:class:`repro.data.synthetic.CorpusRows` over ``docs``."""
    offsets = np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64)
    return CorpusRows(np.concatenate(docs).astype(np.int64), offsets)


def prolong_streams(p, docs: Sequence[np.ndarray], spec: str, seed: int) -> list:
    """One :class:`repro.data.streams.TokenStream` per ``prolong.sources`` name, all read from ``docs``: the long
    streams keep the documents of at least the long threshold, the others the shorter ones."""
    thr, out = long_threshold(p), []
    for name, _ in p.prolong.sources:
        long = name in p.prolong.long_streams
        kept = split_by_length(docs, thr, long)
        if not kept:
            raise CLIError(f"--data {spec!r} has no document {'of at least' if long else 'shorter than'} {thr} "
                           f"tokens for ProLong's {'long' if long else 'short'} stream {name!r}; allowed: data with "
                           "documents on both sides of the target")
        out.append(TokenStream(name, kept, seed=seed))
    return out


def texts(docs: Sequence[np.ndarray], tokenizer, length: int, n: int, spec: str) -> list[str]:
    """The first ``n`` documents of at least ``length`` tokens, decoded to text (for the analyses)."""
    long = [d for d in docs if len(d) > length]
    if not long:
        longest = max(len(d) for d in docs)
        raise CLIError(f"--length {length} is longer than allowed: the longest document of --data {spec!r} has "
                       f"{longest} tokens; allowed: --length <= {longest - 1} (or longer documents)")
    if len(long) < n:
        raise CLIError(f"--data {spec!r} has {len(long)} documents longer than --length {length}; allowed: "
                       f"--samples <= {len(long)} or a shorter --length")
    return [tokenizer.decode(d[1:], skip_special_tokens=True) for d in long[:n]]
