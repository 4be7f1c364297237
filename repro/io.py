"""Atomic file writes and stable config hashing.

Every artifact the project writes goes through these helpers, so a run that is
killed half-way never leaves a half-written file behind: data is written to a
temporary file in the destination folder and renamed over the target. A full
disk (``ENOSPC``) while writing removes the temporary file or folder and raises
:class:`DiskFull` naming the destination.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import hashlib
import json
import os
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any, Iterator


class DiskFull(OSError):
    """The disk filled up (``ENOSPC``) while ``path`` was being written; nothing half-written was left there
    (the previous version, if any, is intact). The original error is the ``__cause__``."""

    def __init__(self, path: str | os.PathLike, cause: BaseException):
        self.path = Path(path)
        while isinstance(cause, DiskFull) and cause.__cause__ is not None:  # the original error, not its wrapper
            cause = cause.__cause__
        why = " ".join(str(cause).split())
        super().__init__(errno.ENOSPC, f"disk full while writing {str(self.path)!r} ({why}); nothing half-written "
                                       "was left there and its previous version, if any, is intact. Free space "
                                       "and run again; allowed: more free space")

    def __str__(self) -> str:
        return self.strerror

    def __reduce__(self):
        return OSError, (self.errno, self.strerror)


DISK_FULL_WORDS = re.compile(r"No space left on device|Disk quota exceeded|StorageFull|QuotaExceeded|"
                             rf"\bos error ({errno.ENOSPC}|{errno.EDQUOT})\b|\bcode: ({errno.ENOSPC}|{errno.EDQUOT})\b")
"""How a library that does not raise an ``OSError`` reports a full disk in its own words (safetensors'
``SafetensorError``: ``IoError(Os { code: 28, kind: StorageFull, message: "No space left on device" })``)."""


def is_disk_full(error: BaseException) -> bool:
    """True for an ``ENOSPC`` error (the disk or quota is full): an ``OSError`` of that errno, or another library's
    error that says so in its own words (:data:`DISK_FULL_WORDS`: safetensors' ``SafetensorError``), whatever
    raised it."""
    if isinstance(error, OSError) and error.errno is not None:
        return error.errno in (errno.ENOSPC, errno.EDQUOT)
    return isinstance(error, Exception) and DISK_FULL_WORDS.search(" ".join(str(error).split())) is not None


def umask() -> int:
    """The process's file-creation mask: from ``/proc/self/status`` where Linux gives it, else by setting and
    restoring it (a moment in which another thread's new file would get ``0o022``)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _tmp_path(path: Path) -> Path:
    """A temporary file beside ``path`` with the mode a plain ``open`` would give it (``0o666`` less the umask;
    ``mkstemp`` alone makes it private to its owner, and the rename would carry that over)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        os.fchmod(fd, 0o666 & ~umask())
    finally:
        os.close(fd)
    return Path(tmp)


def atomic_write_bytes(path: str | os.PathLike, data: bytes) -> Path:
    """Write ``data`` to ``path`` via a temporary file and an atomic rename."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_path(path)
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException as e:
        tmp.unlink(missing_ok=True)
        if is_disk_full(e) and not isinstance(e, DiskFull):
            raise DiskFull(path, e) from e
        raise
    return path


def atomic_write_text(path: str | os.PathLike, text: str) -> Path:
    return atomic_write_bytes(path, text.encode("utf-8"))


def to_jsonable(obj: Any) -> Any:
    """Dataclasses, paths and tuples turned into plain JSON values."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: to_jsonable(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, dict):
        return {str(k): to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_jsonable(v) for v in obj]
    if isinstance(obj, Path):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy / torch scalars
        return obj.item()
    return obj


def atomic_write_json(path: str | os.PathLike, obj: Any) -> Path:
    return atomic_write_text(path, json.dumps(to_jsonable(obj), indent=2, sort_keys=True) + "\n")


def read_json(path: str | os.PathLike) -> Any:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


@contextlib.contextmanager
def atomic_dir(path: str | os.PathLike) -> Iterator[Path]:
    """Build a directory under a temporary name; rename it into place on success.

    On any exception the temporary directory is removed and ``path`` is left
    as it was (absent, or the previous complete version).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent))
    os.chmod(tmp, 0o777 & ~umask())  # as mkdir would make it (mkdtemp's folder is private to its owner)
    try:
        yield tmp
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException as e:
        shutil.rmtree(tmp, ignore_errors=True)
        if is_disk_full(e):  # named after the folder being written (a file's DiskFull inside it is the cause)
            raise DiskFull(path, e) from e
        raise


def config_hash(obj: Any, length: int = 12) -> str:
    """A stable short hash of a (nested) config: same fields, same hash."""
    blob = json.dumps(to_jsonable(obj), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:length]


def file_sha256(path: str | os.PathLike) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def append_jsonl(path: str | os.PathLike, record: dict) -> None:
    """Append one JSON line (metrics logs are append-only by nature); a write that fails (a full disk) is cut
    back off, so the file never ends in a partial line."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    line = (json.dumps(to_jsonable(record), sort_keys=True) + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
    try:
        size = os.fstat(fd).st_size
        try:
            done = 0
            while done < len(line):
                done += os.write(fd, line[done:])
        except BaseException as e:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, size)
            if is_disk_full(e):
                raise DiskFull(path, e) from e
            raise
    finally:
        os.close(fd)


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    """The JSON objects of a log this project appended (``metrics.jsonl``, ``documents.jsonl``), one per non-blank
    line. An empty file is a log with no entry yet: ``[]``. A folder, or a line that is not a JSON object, is a
    ValueError naming the file and the line."""
    if Path(path).is_dir():
        raise ValueError(f"{str(path)!r} is a folder; allowed: a JSONL file (one JSON object per line)")
    rows = []
    with open(path, encoding="utf-8") as f:
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise ValueError(f"{path}:{i}: not JSON ({e}); allowed: one JSON object per line") from e
            if not isinstance(row, dict):
                raise ValueError(f"{path}:{i}: a JSON {type(row).__name__}; allowed: one JSON object per line")
            rows.append(row)
    return rows
