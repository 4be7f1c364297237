"""The training corpus: documents from pluggable sources, and its manifest.

Built-in sources need nothing downloaded (ProLong §3.1 motivates code
repositories as long documents):

* ``code``: the Python standard library; every top-level package (all its
  ``.py`` files, sorted, each preceded by a ``# file:`` line) becomes ONE
  document, like a repository concatenated; top-level modules are documents
  of their own. Test packages are left out.
* ``prose``: Python's own documentation: the reference topics shipped in
  ``pydoc_data`` and every stdlib module's docstrings (module, classes,
  functions), one document per topic or module.
* ``synthetic``: generated retrieval text (RULER-style needle examples) so the
  tokenizer learns the task vocabulary.
* ``folder:<path>``: every ``.txt`` file (one document each) and ``.jsonl``
  file (one document per line, field ``text``) under a folder.
* ``hf_disk:<path>``: a ``datasets`` dataset saved with ``save_to_disk``
  (column ``text``); needs the optional ``datasets`` package.
"""

from __future__ import annotations

import ast
import hashlib
import json
import random
import sys
import sysconfig
import warnings
from dataclasses import dataclass
from pathlib import Path
from pydoc_data.topics import topics
from typing import Callable, Iterator

import numpy as np

from repro.data.synthetic import CorpusRows
from repro.tasks.niah import NEEDLE, NOISE, PREFIX, QUESTION
from repro.tasks.vocab import word_pool

EXCLUDED_PACKAGES = frozenset({"test", "idlelib", "lib2to3", "tkinter", "turtledemo", "ensurepip",
                               "site-packages", "dist-packages", "__pycache__", "venv", "pydoc_data"})


@dataclass(frozen=True)
class Document:
    """One training document."""

    text: str
    """The document's text."""
    source: str
    """Name of the source that produced it (``code``, ``prose``, ...)."""
    name: str
    """A stable identifier inside the source (package, topic, file name)."""


@dataclass
class Corpus:
    """A tokenized corpus: documents, their token arrays (each led by the tokenizer's document
    separator, :func:`repro.data.special_tokens.document_separator`; concatenated) and the manifest."""

    path: Path
    """The folder it was built in (``Path(".")`` for one built in memory)."""
    documents: list[Document]
    """The documents, in order."""
    tokens: np.ndarray
    """Every document's token ids, concatenated."""
    offsets: np.ndarray
    """Document ``i`` is ``tokens[offsets[i]:offsets[i + 1]]``."""
    sources: list[str]
    """Each document's source name."""
    manifest: dict
    """What was read and how (empty for one built in memory)."""

    def rows(self, sources: tuple[str, ...] | None = None, weight: float = 1.0):
        """Language-modelling rows (:class:`repro.data.synthetic.CorpusRows`) over documents of ``sources``
        (default: every non-synthetic source)."""
        keep = [i for i, s in enumerate(self.sources) if (s in sources if sources else s != "synthetic")]
        parts = [self.tokens[self.offsets[i]:self.offsets[i + 1]] for i in keep]
        toks = np.concatenate(parts) if parts else np.zeros(0, dtype=self.tokens.dtype)
        offs = np.concatenate([[0], np.cumsum([len(p) for p in parts])]).astype(np.int64)
        return CorpusRows(toks, offs, weight)


def stdlib_dir() -> Path:
    return Path(sysconfig.get_paths()["stdlib"])


def _is_test_path(p: Path) -> bool:
    return any(part in ("test", "tests") or part.startswith("test_") for part in p.parts)


def iter_heldout_code(limit: int, seed: int = 0) -> list[Document]:
    """Up to ``limit`` stdlib test modules (``test/test_*.py``), in a seeded order.

    The ``code`` and ``prose`` sources leave the test package out, so these files are
    held-out text from the code distribution (e.g. for a short-window LM loss). Returns
    ``[]`` when the interpreter ships without its test suite (some Linux packages split it).
    """
    root = stdlib_dir() / "test"
    files = sorted(root.glob("test_*.py")) if root.is_dir() else []
    random.Random(seed).shuffle(files)
    docs = []
    for f in files:
        try:
            docs.append(Document(f.read_text(encoding="utf-8"), "heldout", f.name))
        except (UnicodeDecodeError, OSError):
            continue
        if len(docs) >= limit:
            break
    return docs


def iter_code(max_bytes: int | None = None) -> Iterator[Document]:
    """Stdlib packages, each concatenated into one document (ProLong §3.1's repository documents)."""
    root = stdlib_dir()
    used = 0
    for entry in sorted(root.iterdir()):
        if entry.name in EXCLUDED_PACKAGES or entry.name.startswith((".", "_")) and entry.name != "__future__.py":
            continue
        if entry.is_dir():
            files = sorted(p for p in entry.rglob("*.py") if not _is_test_path(p.relative_to(root)))
        elif entry.suffix == ".py" and not _is_test_path(Path(entry.name)):
            files = [entry]
        else:
            continue
        parts = []
        for f in files:
            try:
                src = f.read_text(encoding="utf-8")
            except (UnicodeDecodeError, OSError):
                continue
            parts.append(f"# file: {f.relative_to(root).as_posix()}\n{src}")
        if not parts:
            continue
        text = "\n".join(parts)
        yield Document(text, "code", entry.stem)
        used += len(text.encode())
        if max_bytes is not None and used >= max_bytes:
            return


def _docstrings(src: str) -> list[str]:
    try:
        tree = ast.parse(src)
    except SyntaxError:
        return []
    out = []
    for node in [tree, *ast.walk(tree)]:
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            doc = ast.get_docstring(node)
            if doc and len(doc) > 40:
                out.append(doc.strip())
    return list(dict.fromkeys(out))


def iter_prose(max_bytes: int | None = None) -> Iterator[Document]:
    """Python's documentation: pydoc reference topics, then module docstrings."""
    used = 0
    for name in sorted(topics):
        text = topics[name].strip()
        if len(text) < 200:
            continue
        yield Document(text, "prose", f"topic:{name}")
        used += len(text.encode())
        if max_bytes is not None and used >= max_bytes:
            return
    root = stdlib_dir()
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root)
        if rel.parts[0] in EXCLUDED_PACKAGES or _is_test_path(rel):
            continue
        try:
            docs = _docstrings(f.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, OSError):
            continue
        text = "\n\n".join(docs)
        if len(text) < 200:
            continue
        yield Document(text, "prose", f"docstrings:{rel.as_posix()}")
        used += len(text.encode())
        if max_bytes is not None and used >= max_bytes:
            return


def iter_synthetic(n_docs: int, seed: int = 0) -> Iterator[Document]:
    """RULER-style needle examples rendered as text (training key pool, disjoint seeds)."""
    keys = word_pool("train")
    rng = random.Random(f"synthetic-corpus:{seed}")
    for i in range(n_docs):
        hay = [rng.choice(NOISE) for _ in range(rng.randint(5, 60))]
        key, value = rng.choice(keys), str(rng.randint(1_000_000, 9_999_999))
        hay.insert(rng.randint(0, len(hay)), NEEDLE.format(key=key, value=value))
        text = PREFIX + " ".join(hay) + QUESTION.format(key=key) + " " + value + "."
        yield Document(text, "synthetic", f"needle-{i}")


class SkippedFileWarning(UserWarning):
    """A file of a ``folder:`` source that is not read as a document (:func:`iter_folder`)."""


MAX_FILE_BYTES = 1 << 31
"""Largest file a ``folder:`` source reads (2 GiB): a ``.txt`` is one document, read whole into memory."""


def iter_folder(path: str | Path) -> Iterator[Document]:
    """``.txt`` files (one document each) and ``.jsonl`` files (field ``text``) under ``path``. A ``.txt`` file
    holding a NUL byte is binary data, not text (UTF-8 text never holds one): it is skipped with a
    :class:`SkippedFileWarning` naming it, and the other files are read."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"corpus source folder {str(path)!r} does not exist; "
                                "allowed: an existing folder of .txt/.jsonl files")
    files = sorted(p for p in path.rglob("*") if p.suffix in (".txt", ".jsonl") and p.is_file())  # regular files
    if not files:
        raise ValueError(f"corpus source folder {str(path)!r} holds no .txt or .jsonl files; allowed: a folder of "
                         "UTF-8 .txt files (one document each) and/or .jsonl files (a 'text' field per line)")
    for f in files:
        try:
            if f.stat().st_size > MAX_FILE_BYTES:
                raise ValueError(f"{str(f)!r} has {f.stat().st_size:,} bytes, more than one document may; allowed: "
                                 f"files of at most {MAX_FILE_BYTES:,} bytes (split it into documents)")
            if f.suffix == ".txt":
                text = f.read_text(encoding="utf-8")
                if "\x00" in text:
                    warnings.warn(SkippedFileWarning(
                        f"{str(f)!r} holds NUL bytes ({text.count(chr(0))} of {len(text)} characters): binary data, "
                        "not text; skipped (the other files of the folder are read)"), stacklevel=2)
                    continue
                yield Document(text, "folder", f.relative_to(path).as_posix())
                continue
            with open(f, encoding="utf-8") as fh:
                for i, line in enumerate(fh):
                    if line.strip():
                        yield Document(_jsonl_text(f, i + 1, line), "folder", f"{f.relative_to(path).as_posix()}:{i}")
        except (OSError, UnicodeDecodeError) as e:
            raise ValueError(f"{str(f)!r} is not readable UTF-8 text ({type(e).__name__}: {e}); allowed: "
                             "readable UTF-8 .txt / .jsonl files") from e


def _jsonl_text(f: Path, lineno: int, line: str) -> str:
    """The ``text`` field of one JSONL line; a ValueError naming ``f:lineno`` when it has none."""
    allowed = "allowed: one JSON object per line with a string 'text' field"
    try:
        rec = json.loads(line)
    except (ValueError, RecursionError) as e:
        why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:200]
        raise ValueError(f"{f}:{lineno}: not a JSON object ({why}); {allowed}") from e
    if not isinstance(rec, dict) or "text" not in rec:
        raise ValueError(f"{f}:{lineno}: JSONL record has no 'text' field; {allowed}")
    if not isinstance(rec["text"], str):
        raise ValueError(f"{f}:{lineno}: 'text' is {type(rec['text']).__name__}; allowed: a string")
    return rec["text"]


def iter_hf_disk(path: str | Path) -> Iterator[Document]:
    """A ``datasets`` dataset saved with ``save_to_disk`` (column ``text``)."""
    if not Path(path).exists():
        raise FileNotFoundError(f"HF dataset path {str(path)!r} does not exist")
    try:
        import datasets  # optional and heavy: only the hf_disk: source reads it
    except ImportError as e:  # optional dependency of the paper profile
        raise ImportError("source 'hf_disk:' needs the 'datasets' package: pip install datasets") from e
    try:
        ds = datasets.load_from_disk(str(path))
    except (FileNotFoundError, ValueError) as e:  # a folder that is not a saved dataset
        why = (str(e).strip().splitlines() or [type(e).__name__])[0]
        raise ValueError(f"{why} allowed: a folder written by datasets' save_to_disk, with a 'text' column") from e
    if isinstance(ds, datasets.DatasetDict):
        raise ValueError(f"HF dataset path {str(path)!r} holds several splits ({', '.join(ds)}); allowed: one saved "
                         "Dataset (save one split with save_to_disk)")
    if "text" not in ds.column_names:
        raise ValueError(f"HF dataset path {str(path)!r} has no 'text' column (columns: "
                         f"{', '.join(ds.column_names)[:200]}); allowed: a saved Dataset with a string 'text' column")
    for i, rec in enumerate(ds):
        if not isinstance(rec["text"], str):
            raise ValueError(f"HF dataset path {str(path)!r}: row {i}'s 'text' is {type(rec['text']).__name__} "
                             f"({str(rec['text'])[:40]}); allowed: a string in every row of the 'text' column")
        yield Document(rec["text"], "hf_disk", str(i))


BUILTIN_SOURCES: dict[str, Callable[..., Iterator[Document]]] = {
    "code": iter_code, "prose": iter_prose, "synthetic": iter_synthetic}


def iter_source(spec: str, max_bytes: int | None = None, synthetic_docs: int = 0, seed: int = 0) -> Iterator[Document]:
    """Documents of one source spec: ``code``, ``prose``, ``synthetic``, ``folder:<path>``, ``hf_disk:<path>``."""
    kind, _, arg = spec.partition(":")
    if kind == "code":
        return iter_code(max_bytes)
    if kind == "prose":
        return iter_prose(max_bytes)
    if kind == "synthetic":
        return iter_synthetic(synthetic_docs, seed)
    if kind == "folder" and arg:
        return iter_folder(arg)
    if kind == "hf_disk" and arg:
        return iter_hf_disk(arg)
    raise ValueError(f"unknown corpus source {spec!r}; allowed: code, prose, synthetic, folder:<path>, hf_disk:<path>")


def manifest(documents: list[Document], token_counts: list[int] | None = None) -> dict:
    """Sources, document counts, bytes, tokens and content hashes, plus the Python version."""
    per: dict[str, dict] = {}
    hashes: dict[str, "hashlib._Hash"] = {}
    for i, d in enumerate(documents):
        row = per.setdefault(d.source, {"documents": 0, "bytes": 0, "tokens": 0, "longest_tokens": 0})
        row["documents"] += 1
        row["bytes"] += len(d.text.encode())
        if token_counts is not None:
            row["tokens"] += token_counts[i]
            row["longest_tokens"] = max(row["longest_tokens"], token_counts[i])
        h = hashes.setdefault(d.source, hashlib.sha256())
        h.update(d.name.encode() + b"\0" + d.text.encode() + b"\0")
    for src, h in hashes.items():
        per[src]["sha256"] = h.hexdigest()
    total = {k: sum(r[k] for r in per.values()) for k in ("documents", "bytes", "tokens")}
    return {"python": sys.version.split()[0], "sources": per, "total": total}
