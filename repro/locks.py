"""Stage locks, file stamps and the stage cache's settings from the environment.

Locks. :mod:`repro.stages.cache` computes every stage under :func:`stage_lock` (and the notebook runner,
:func:`repro.pipeline.reproduce`, runs every notebook under one; ``python -m repro train`` its ``--out``
folder): a ``.<name>.lock`` file beside the stage folder (or JSON record) locked with ``fcntl.flock`` (the OS
releases it when its holder dies, so a lock left by a killed run is taken over at once) and holding the holder's
pid, host, command and start time. A second process on the same stage waits (``REPRO_LOCK_TIMEOUT`` seconds,
default 6 hours, reporting the holder every few minutes) or, with ``REPRO_LOCK_WAIT=0``, refuses at once with
:class:`StageLocked` naming the holder. :func:`file_stamp` tells a process that waited for a lock whether
another one wrote the file meanwhile.

Settings. ``REPRO_VERIFY`` (:func:`verify_mode`: how a cached result is checked on reuse), ``REPRO_LOCK_WAIT``
and ``REPRO_LOCK_TIMEOUT`` (:func:`lock_settings`).
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import json
import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

VERIFY_MODES = ("hash", "size")
"""``REPRO_VERIFY``: ``hash`` (default) compares sizes and sha256 on reuse; ``size`` only sizes."""
DEFAULT_LOCK_TIMEOUT = 6 * 3600.0
"""Seconds a process waits for a stage another process computes (``REPRO_LOCK_TIMEOUT``)."""
REPORT_EVERY = 300.0
"""Seconds between the messages of a process waiting for a lock."""


class StageLocked(RuntimeError):
    """Another process holds the stage's lock (``REPRO_LOCK_WAIT=0``, or ``REPRO_LOCK_TIMEOUT`` ran out)."""


# -- settings -------------------------------------------------------------------------------------------

def verify_mode() -> str:
    """``REPRO_VERIFY`` (default ``hash``)."""
    mode = os.environ.get("REPRO_VERIFY", "hash").strip().lower() or "hash"
    if mode not in VERIFY_MODES:
        raise ValueError(f"REPRO_VERIFY={mode!r}; allowed: {', '.join(VERIFY_MODES)}")
    return mode


def lock_settings() -> tuple[bool, float]:
    """``(wait, timeout seconds)`` from ``REPRO_LOCK_WAIT`` (``1``, default, or ``0``) and ``REPRO_LOCK_TIMEOUT``."""
    wait = os.environ.get("REPRO_LOCK_WAIT", "1").strip()
    if wait not in ("0", "1"):
        raise ValueError(f"REPRO_LOCK_WAIT={wait!r}; allowed: 1 (wait for the holder) or 0 (refuse at once)")
    raw = os.environ.get("REPRO_LOCK_TIMEOUT", "").strip()
    try:
        timeout = float(raw) if raw else DEFAULT_LOCK_TIMEOUT
    except ValueError:
        timeout = -1.0
    if not timeout > 0:
        raise ValueError(f"REPRO_LOCK_TIMEOUT={raw!r}; allowed: seconds > 0 (default {DEFAULT_LOCK_TIMEOUT:.0f})")
    return wait == "1", timeout


# -- locks ----------------------------------------------------------------------------------------------

def lock_path(path: str | Path) -> Path:
    """The lock file of the stage folder or record at ``path``: ``.<name>.lock`` beside it."""
    path = Path(path)
    return path.parent / f".{path.name}.lock"


def _holder_text(info: dict | None) -> str:
    if not info:
        return "an unknown process"
    return (f"pid {info.get('pid')} on {info.get('host')} (command: {info.get('command')!s}; "
            f"since {info.get('started')})")


def _read_holder(lock: Path) -> dict | None:
    try:
        info = json.loads(lock.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


class _Held:
    """A lock this process holds: the open file, how many nested holders, what a dead holder left."""

    def __init__(self, fd: int, stale: dict | None):
        self.fd, self.depth, self.stale = fd, 1, stale


_HELD: dict[str, _Held] = {}
_THREAD_LOCKS: dict[str, threading.RLock] = {}
_REGISTRY = threading.Lock()


def _try_flock(lock: Path) -> tuple[int, dict | None] | None:
    """The locked file and what a dead holder left in it, or None while another process holds it."""
    while True:
        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as e:
                if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                    os.close(fd)
                    return None
                raise
            try:  # the holder before us unlinked the file on release: ours is a dead inode, open it again
                same = os.stat(lock).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if same:
                return fd, _claim(fd)
            os.close(fd)
        except BaseException:
            with contextlib.suppress(OSError):
                os.close(fd)
            raise


def _claim(fd: int) -> dict | None:
    """Write this process into the locked file ``fd``; returns what a killed holder left there (or None)."""
    with os.fdopen(os.dup(fd), "r+", encoding="utf-8") as f:
        left = f.read()
        info = {"pid": os.getpid(), "host": socket.gethostname(), "command": " ".join(sys.argv)[:500],
                "started": time.strftime("%Y-%m-%dT%H:%M:%S%z")}
        f.seek(0)
        f.truncate()
        f.write(json.dumps(info) + "\n")
        f.flush()
        os.fsync(f.fileno())
    if not left.strip():  # a holder releases by unlinking the file: content left behind means it was killed
        return None
    try:
        return json.loads(left)
    except ValueError:
        return {"pid": "?", "host": "?", "command": left.strip()[:200], "started": "?"}


@contextlib.contextmanager
def stage_lock(path: str | Path, log: Callable[[str], Any] | None = None, what: str = "stage") -> Iterator[_Held]:
    """Hold the lock of the stage at ``path`` (see the module docstring); re-entrant within a process. ``what`` names
    the thing locked in the messages (``python -m repro train`` holds its ``--out`` folder's lock as a ``run``).

    Waits for another holder (``REPRO_LOCK_WAIT``, ``REPRO_LOCK_TIMEOUT``), reporting it through ``log``
    (default: standard error); raises :class:`StageLocked` naming the holder when it may not wait longer.
    Yields the held lock; its ``stale`` is what a killed previous holder left (its pid, host, command), else None.
    """
    lock = lock_path(path)
    key = str(lock.resolve() if lock.parent.exists() else lock.absolute())
    with _REGISTRY:
        tlock = _THREAD_LOCKS.setdefault(key, threading.RLock())
    say = log or (lambda m: print(m, file=sys.stderr, flush=True))
    wait, timeout = lock_settings()
    if not tlock.acquire(blocking=wait, timeout=timeout if wait else -1):
        raise StageLocked(f"{lock}: another thread of this process computes {Path(path).name}")
    try:
        held = _HELD.get(key)
        if held is not None:  # this thread holds it already (a stage calling itself through another path)
            held.depth += 1
        else:
            lock.parent.mkdir(parents=True, exist_ok=True)
            t0, next_report, got = time.monotonic(), 0.0, None
            while (got := _try_flock(lock)) is None:
                waited = time.monotonic() - t0
                holder = _holder_text(_read_holder(lock))
                if not wait:
                    raise StageLocked(f"{what} {path} is being computed by {holder} (lock {lock}); "
                                      "REPRO_LOCK_WAIT=0 refuses to wait (unset it, or set 1, to wait)")
                if waited >= timeout:
                    raise StageLocked(f"{what} {path} is still being computed by {holder} after {waited:.0f} s "
                                      f"(REPRO_LOCK_TIMEOUT={timeout:.0f}); lock {lock}")
                if waited >= next_report:
                    say(f"waiting for {what} {path}: computed by {holder}; waited {waited:.0f} s of "
                        f"{timeout:.0f} (REPRO_LOCK_TIMEOUT)")
                    next_report += REPORT_EVERY
                time.sleep(min(0.2 + waited / 50, 2.0))
            held = _HELD[key] = _Held(*got)
            if held.stale:
                say(f"{what} {path}: took over the lock left by {_holder_text(held.stale)}, which was killed")
        try:
            yield held
        finally:
            held.depth -= 1
            if held.depth == 0:
                del _HELD[key]
                with contextlib.suppress(FileNotFoundError):
                    lock.unlink()  # while still locked: a waiter that opened it sees another inode and retries
                os.close(held.fd)
    finally:
        tlock.release()


# -- file stamps ----------------------------------------------------------------------------------------

def file_stamp(f: Path) -> tuple[int, int] | None:
    """Identity of file ``f`` (inode, mtime), None when missing: a change while a process waited for the file's lock
    means another process wrote it meanwhile."""
    try:
        st = f.stat()
    except FileNotFoundError:
        return None
    return st.st_ino, st.st_mtime_ns
