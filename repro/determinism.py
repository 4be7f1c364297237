"""Comparing two runs' artifacts: same seed, same bytes, except the fields that are volatile by nature.

Two from-scratch runs with the same seed, torch version, intra-op thread count and CPU capability (the fields of
:func:`repro.manifest.environment`) write byte-identical artifacts: weights, optimizer states, token arrays,
figures (PNG/PDF without software or date metadata), tables, metrics and records. What may differ is volatile:

- timings: ``seconds``, ``tokens_per_s`` and the like in metrics, summaries and records; the tables that *are*
  wall-clock or memory measurements (:data:`TIMED_TARGETS`: only their header and row labels are compared, and
  their index entry's numbers are not); throughput (``tok/s``) quoted in an index entry;
- an executed notebook's timestamps, durations and outputs (its log: progress bars, printed timings; what it
  produces is compared through the figures and tables),
- dates (the figures index's ``date``) and the run's id (its ``run``, and a notebook stamp's: one per
  ``reproduce``),
- the environment itself (``environment`` in manifests, its flat fields in ``train_summary.json``),
- the run's own folder: absolute paths are compared with the folder replaced by :data:`ROOT`, and a notebook
  stamp's ``key`` (it hashes the absolute run and figures folders) is skipped.

:func:`compare_runs` drops exactly these and compares every other byte.
"""

from __future__ import annotations

import csv
import fnmatch
import io
import json
import re
from pathlib import Path
from typing import Any, Callable, Mapping

from repro.manifest import ENVIRONMENT_KEY

TIMINGS = frozenset({"seconds", "seconds_this_call", "build_seconds", "tokens_per_s"})
"""Wall-clock fields of metrics, summaries and records."""
NOTEBOOK_TIMINGS = frozenset({"start_time", "end_time", "duration", "execution", "outputs"})
"""An executed notebook's per-cell and whole-run timestamps and durations (papermill's and the kernel's), and its
cells' outputs (progress bars, log lines and printed timings)."""
TIMED_TARGETS = ("TB-BaseSearch", "LR-Cost", "RP-Cost", "CD-Mem", "CD-Cost", "PL-Tab15")
"""Targets whose tables measure wall-clock time or memory (:mod:`repro.targets`)."""
ENVIRONMENT_FIELDS = frozenset({"threads", "torch", "cpu_capability", "cpu_model", "transformers", "numpy", "python"})
""":func:`repro.manifest.environment`'s fields, flat in a training stage's ``train_summary.json``."""

VOLATILE: Mapping[str, frozenset[str]] = {
    "*": TIMINGS | {"date", ENVIRONMENT_KEY, "_sha256"},
    "*index.json": frozenset({"run"}),
    "*.ipynb": NOTEBOOK_TIMINGS,
    "*train_summary.json": ENVIRONMENT_FIELDS,
    "*.done.json": frozenset({"key", "size", "sha256", "run"}),
    "*wall_time.json": frozenset({"run"}),
    "*artifacts.json": frozenset({"size", "sha256", "recorded"}),
}
"""File pattern (``fnmatch`` on the path relative to the run folder) -> JSON keys dropped at any depth before
comparing; every pattern that matches a file applies. Checksums of files (a record's ``_sha256``, a stage's
``artifacts.json``, a notebook stamp) change with the timings inside those files, which are compared themselves."""

_DATE = re.compile(r"\b\d{4}-\d{2}-\d{2}\b")
_RATE = re.compile(r"\d[\d.,]* tok/s")
_RUN = re.compile(r"\b\d{8}T\d{6}Z-[0-9a-f]{6}\b")
_WALL = re.compile(r", wall time [^.]*\.\d minutes( \([^)]*\))?")


def _timed_rows_md(text: str) -> str:
    """A markdown table (with caption) reduced to its header and each row's first cell."""
    rows = [ln for ln in text.splitlines() if ln.startswith("|")]
    return "\n".join([rows[0], *(ln.split("|")[1] for ln in rows[2:])]) if rows else ""


def _timed_rows_csv(text: str) -> str:
    """A CSV table reduced to its header and each row's first cell."""
    rows = list(csv.reader(io.StringIO(text)))
    return "\n".join([",".join(rows[0]) if rows else "", *(r[0] if r else "" for r in rows[1:])])


def _index_md(text: str) -> str:
    """INDEX.md without dates, run ids, the run's wall time, throughput, or the numbers of timed targets' rows."""
    timed = tuple(f"| {t} |" for t in TIMED_TARGETS)
    lines = [ln.split(" | ")[0] if ln.startswith(timed) else ln for ln in text.splitlines()]
    return _WALL.sub(", <wall time>", _RUN.sub("<run>", _RATE.sub("<rate>", _DATE.sub("<date>", "\n".join(lines)))))


def _figures_page(text: str) -> str:
    """A paper's figures page (:mod:`repro.figures_index`) without dates, run ids, throughput, or the record of a timed
    target (its section reduced to its heading)."""
    parts = text.split("\n## ")
    kept = [parts[0], *(p.split("\n", 1)[0] if p.split("\n", 1)[0] in TIMED_TARGETS else p for p in parts[1:])]
    return _RUN.sub("<run>", _RATE.sub("<rate>", _DATE.sub("<date>", "\n## ".join(kept))))


def _index_json(index: Any) -> Any:
    """index.json without the ``ours`` and ``note`` of timed targets, and with throughput masked."""
    if not isinstance(index, dict):
        return index
    out = {}
    for tid, row in index.items():
        if isinstance(row, dict):
            row = {k: (_RATE.sub("<rate>", v) if isinstance(v, str) else v) for k, v in row.items()
                   if not (tid in TIMED_TARGETS and k in ("ours", "note"))}
        out[tid] = row
    return out


FIGURES_PAGES = ("testbed.md", "longrecipe.md", "selfdistill.md", "cdt.md", "prolong.md")
"""The figures pages of a run's figures folder (:func:`repro.figures_index.page_name`)."""
TEXT_VOLATILE: Mapping[str, Callable[[str], str]] = {
    "*INDEX.md": _index_md,
    **{f"*figures*/{page}": _figures_page for page in FIGURES_PAGES},
    **{f"*{t}*.md": _timed_rows_md for t in TIMED_TARGETS},
    **{f"*{t}*.csv": _timed_rows_csv for t in TIMED_TARGETS},
}
"""File pattern -> normalisation of a text file that is not JSON: dates and timed numbers masked."""
JSON_VOLATILE: Mapping[str, Callable[[Any], Any]] = {"*index.json": _index_json}
"""File pattern -> normalisation of parsed JSON beyond dropping keys (the figures index's timed entries)."""
JSON_SUFFIXES = (".json", ".jsonl", ".ipynb")
ROOT = "<run>"
"""What a run folder's absolute path reads as in compared text."""


def _drop(obj: Any, keys: frozenset[str]) -> Any:
    if isinstance(obj, dict):
        return {k: _drop(v, keys) for k, v in obj.items() if k not in keys}
    if isinstance(obj, list):
        return [_drop(v, keys) for v in obj]
    return obj


def _json_diff(a: Any, b: Any, where: str, out: list[str], limit: int = 5) -> None:
    """Up to ``limit`` paths (``a.b[3]``) where ``a`` and ``b`` differ, with both values."""
    if len(out) >= limit:
        return
    if isinstance(a, dict) and isinstance(b, dict):
        for k in sorted(set(a) | set(b)):
            sub = f"{where}.{k}" if where else str(k)
            if k not in a or k not in b:
                out.append(f"{sub}: only in {'b' if k not in a else 'a'}")
            else:
                _json_diff(a[k], b[k], sub, out, limit)
    elif isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        for i, (x, y) in enumerate(zip(a, b)):
            _json_diff(x, y, f"{where}[{i}]", out, limit)
    elif a != b or type(a) is not type(b):
        out.append(f"{where or '<top>'}: {_short(a)} != {_short(b)}")


def _short(v: Any) -> str:
    s = json.dumps(v, sort_keys=True)
    return s if len(s) <= 80 else s[:77] + "..."


def _roots(root: Path) -> list[str]:
    """The folder's spellings, longest first (given and resolved)."""
    return sorted({str(root), str(root.resolve())}, key=len, reverse=True)


def _text(path: Path, root: Path) -> str:
    text = path.read_text(encoding="utf-8")
    for r in _roots(root):
        text = text.replace(r, ROOT)
    return text


def _parse(rel: str, text: str) -> Any:
    if rel.endswith(".jsonl"):
        return [json.loads(line) for line in text.splitlines() if line.strip()]
    return json.loads(text)


def _matching(rel: str, table: Mapping[str, Any]) -> list:
    return [v for pat, v in table.items() if fnmatch.fnmatch(rel, pat)]


def compare_file(rel: str, a: Path, b: Path, root_a: Path, root_b: Path,
                 volatile: Mapping[str, frozenset[str]] = VOLATILE) -> list[str]:
    """The differences between ``a`` and ``b`` (the same relative path ``rel`` in two runs): JSON after dropping
    the ``volatile`` keys for ``rel`` and with each run's folder replaced by :data:`ROOT`; known volatile text
    normalised (:data:`TEXT_VOLATILE`); anything else byte for byte. Empty when they match."""
    ba, bb = a.read_bytes(), b.read_bytes()
    if ba == bb:
        return []
    if rel.endswith(JSON_SUFFIXES):
        try:
            ta, tb = _text(a, root_a), _text(b, root_b)
            ja, jb = _parse(rel, ta), _parse(rel, tb)
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            return [f"{rel}: bytes differ (unreadable as JSON: {e})"]
        keys = frozenset().union(*_matching(rel, volatile))
        ja, jb = _drop(ja, keys), _drop(jb, keys)
        for norm in _matching(rel, JSON_VOLATILE):
            ja, jb = norm(ja), norm(jb)
        if ja == jb:
            return []
        found: list[str] = []
        _json_diff(ja, jb, "", found)
        return [f"{rel}: {d}" for d in found] or [f"{rel}: JSON differs"]
    norms = _matching(rel, TEXT_VOLATILE)
    if norms:
        try:
            ta, tb = _text(a, root_a), _text(b, root_b)
        except UnicodeDecodeError:
            return [f"{rel}: bytes differ"]
        for norm in norms:
            ta, tb = norm(ta), norm(tb)
        return [] if ta == tb else [f"{rel}: text differs"]
    try:
        if _text(a, root_a) == _text(b, root_b):  # the same text up to the run's own folder
            return []
    except UnicodeDecodeError:
        pass
    return [f"{rel}: bytes differ ({len(ba)} vs {len(bb)} bytes)"]


def run_files(root: str | Path) -> list[str]:
    """Every file under ``root``, as sorted paths relative to it."""
    root = Path(root)
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def compare_runs(dir_a: str | Path, dir_b: str | Path,
                 volatile: Mapping[str, frozenset[str]] = VOLATILE) -> list[str]:
    """Every difference between two runs' folders: files present in one only, then per common file what
    :func:`compare_file` reports (``volatile``: file pattern -> JSON keys to skip, default :data:`VOLATILE`).
    An empty list: the runs are the same up to their volatile fields."""
    root_a, root_b = Path(dir_a), Path(dir_b)
    for r in (root_a, root_b):
        if not r.is_dir():
            raise FileNotFoundError(f"run folder {r} does not exist; allowed: an existing folder")
    fa, fb = run_files(root_a), run_files(root_b)
    out = [f"{f}: only in a" for f in sorted(set(fa) - set(fb))]
    out += [f"{f}: only in b" for f in sorted(set(fb) - set(fa))]
    for rel in sorted(set(fa) & set(fb)):
        out += compare_file(rel, root_a / rel, root_b / rel, root_a, root_b, volatile)
    return out
