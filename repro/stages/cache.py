"""The one caching helper of every stage: versioned keys, stage folders, reuse, atomic finish, integrity (the locks:
:mod:`repro.locks`).

A stage writes under ``<run_dir>/<profile>/<stage>-<key>/`` (or one JSON file
for evaluation records), where ``key`` hashes every config field that can
change its result, the upstream stages' keys, and the stage's code version
(:data:`STAGE_VERSION`). A finished stage is reused; ``force=True`` deletes it
first; an unfinished training stage resumes from its last checkpoint (the
trainer's business). Folders and files appear atomically (built under a
temporary name, then renamed), so a killed run never leaves a half-written
result that a later run would take as finished.

Integrity. A stage computed through :func:`compute_once` ends by writing
``artifacts.json`` (:data:`MANIFEST`) into its folder, atomically and last: the size and sha256 of every
file of the folder. A JSON record of :func:`cached_json` carries the sha256 of its own content under
:data:`CHECKSUM_KEY` (one file, one atomic write). On reuse the sizes are always compared and the hashes too
unless ``REPRO_VERIFY=size`` (for huge checkpoints; hashing runs at about 1 GB/s, ~10 ms for 10 MB). A
truncated, edited or missing file is never used silently: the damaged result is deleted with a
:class:`CacheWarning` naming the file and what changed, and the stage is computed again. Where nothing can
compute it again (:func:`verify_stage`, used by the checkpoint look-up of the evaluation notebooks) a
:class:`CacheIntegrityError` names the file and stops the run.

A stage folder without a manifest (killed before its end, or finished by a version of this code from before
manifests) and a record without its checksum are computed again, a training stage resuming from its last checkpoint:
nothing recorded could tell a damaged one from a sound one.

Concurrency. Every stage computes under :func:`repro.locks.stage_lock` (a lock file beside the stage
folder or JSON record, taken over at once from a killed holder; a second process waits for the holder or
refuses: see :mod:`repro.locks`); once it holds the lock it checks again whether the stage finished
meanwhile, so no stage is computed twice (a ``force`` that was waiting reuses a result finished while it
waited). In a multi-process launch (``WORLD_SIZE`` > 1) only rank 0 locks, deletes and writes manifests;
the other ranks verify and compute along with it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Mapping

from repro.io import atomic_write_json, atomic_write_text, config_hash, file_sha256, read_json, to_jsonable
from repro.manifest import ENVIRONMENT_KEY, with_environment
from repro.profiles import Profile, get_profile
from repro.locks import file_stamp, stage_lock, verify_mode

STAGE_VERSION: dict[str, int | None] = {"corpus": 1, "base": 1, "extend": 1, "eval": 1, "analysis": 1, "replay": 1,
                                        "merge": 1, "lmloss": 2, "general": None,
                                        "attn": 1, "cdtask": 1, "cdscores": 2, "cdmem": 1, "longppl": 1,
                                        "pldata": 1, "plppl": 1}
"""Bumped when a stage's code changes what it produces (invalidates its caches). ``None``: keyed
without a version (the general-ability cache never had one; giving it one invalidates it once)."""

MANIFEST = "artifacts.json"
"""The integrity manifest a finished stage folder ends with: size and sha256 of each of its files."""
CHECKSUM_KEY = "_sha256"
"""The key of a cached JSON record holding the sha256 of the rest of the record."""


class CacheWarning(UserWarning):
    """A cached result was damaged, or has no integrity record, and is computed again."""


class CacheIntegrityError(RuntimeError):
    """A cached result is damaged and cannot be computed again from here."""


def as_profile(p: Profile | str) -> Profile:
    """A profile, given one or its name."""
    return get_profile(p) if isinstance(p, str) else p


def stage_key(stage: str, fields: Mapping[str, Any]) -> str:
    """The cache key of ``stage``: a hash of ``fields`` plus the stage's version as ``v``."""
    if stage not in STAGE_VERSION:
        raise ValueError(f"unknown stage {stage!r}; allowed: {', '.join(STAGE_VERSION)}")
    v = STAGE_VERSION[stage]
    return config_hash(dict(fields) if v is None else {**fields, "v": v})


def stage_dir(run_dir: str | Path, profile: Profile, stage: str, key: str) -> Path:
    """``<run_dir>/<profile>/<stage>-<key>``."""
    return Path(run_dir) / profile.name / f"{stage}-{key}"


def checkpoint_id(ckpt: str | Path, run_dir: str | Path) -> str:
    """How a checkpoint enters a cache key: its path relative to ``run_dir`` when it lies inside it (stage folders
    are named by their own config keys, so the same run in another folder gives the same keys and file names),
    else the path or model id as given (a user's model outside the run)."""
    try:
        return Path(ckpt).resolve().relative_to(Path(run_dir).resolve()).as_posix()
    except ValueError:
        return str(ckpt)


def eval_path(run_dir: str | Path, profile: Profile, name: str) -> Path:
    """Where JSON evaluation records live: ``<run_dir>/<profile>/eval/<name>.json``."""
    return Path(run_dir) / profile.name / "eval" / f"{name}.json"


def _follower() -> bool:
    """A rank other than 0 of a multi-process launch (it neither locks nor deletes nor writes manifests)."""
    return os.environ.get("WORLD_SIZE", "1") not in ("", "1") and os.environ.get("RANK", "0") not in ("", "0")


# -- integrity --------------------------------------------------------------------------------------------

_HASHED: dict[tuple[str, int, int, int], str] = {}
"""sha256 of files this process hashed, by (path, size, mtime_ns, inode); only files whose mtime was over
:data:`_RACY` seconds old when hashed (a later edit within the file system's clock tick cannot hide)."""
_RACY = 2.0


def _sha256(f: Path, st: os.stat_result) -> str:
    k = (str(f), st.st_size, st.st_mtime_ns, st.st_ino)
    if k in _HASHED:
        return _HASHED[k]
    h = file_sha256(f)
    if time.time() - st.st_mtime_ns / 1e9 > _RACY:
        _HASHED[k] = h
    return h


def _artifact_files(path: Path) -> list[Path]:
    """Every file of a stage folder but its manifest and temporary leftovers (``.<name>.*.tmp``)."""
    out = []
    for f in sorted(path.rglob("*")):
        rel = f.relative_to(path)
        if rel.as_posix() == MANIFEST or any(p.startswith(".") and p.endswith(".tmp") for p in rel.parts):
            continue
        if f.is_file():
            out.append(f)
    return out


def write_manifest(path: Path, done: str) -> Path:
    """Record size and sha256 of every file of the stage folder ``path`` in ``path/artifacts.json`` (atomic,
    written last), once the stage has computed it."""
    files = {}
    for f in _artifact_files(path):
        st = f.stat()
        files[f.relative_to(path).as_posix()] = {"size": st.st_size, "sha256": _sha256(f, st)}
    rec: dict[str, Any] = {"format": 1, "done": done, "origin": "finished",
                           "recorded": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "files": files}
    return atomic_write_json(path / MANIFEST, rec)


def check_manifest(path: Path, mode: str | None = None) -> str | None:
    """What is wrong with the finished stage folder ``path`` against its manifest (the file named first),
    or None when every recorded file has its size (and, in ``hash`` mode, its sha256)."""
    mode = mode or verify_mode()
    try:
        rec = read_json(path / MANIFEST)
        files = rec["files"]
        done = rec["done"]
    except (OSError, ValueError, KeyError, TypeError) as e:
        return f"{path / MANIFEST}: unreadable manifest ({type(e).__name__}: {e})"
    if not (path / done).exists():
        return f"{path / done}: missing (the stage's finished artifact)"
    for rel, want in files.items():
        f = path / rel
        try:
            st = f.stat()
        except FileNotFoundError:
            return f"{f}: missing (recorded {want['size']} bytes)"
        if st.st_size != want["size"]:
            return f"{f}: {st.st_size} bytes, recorded {want['size']} (truncated or rewritten)"
        if mode == "hash" and _sha256(f, st) != want["sha256"]:
            return f"{f}: content changed (sha256 {_sha256(f, st)[:12]}..., recorded {want['sha256'][:12]}...)"
    return None


def _state(path: Path, done: str) -> tuple[str, str | None]:
    """``(state, problem)``: ``missing`` (no manifest: never finished, killed before its end, or finished before
    manifests were written), ``finished`` (verified) or ``damaged`` with the problem naming the file."""
    if (path / MANIFEST).exists():
        problem = check_manifest(path)
        return ("damaged", problem) if problem else ("finished", None)
    return "missing", None


def _discard(path: Path, problem: str) -> None:
    warnings.warn(f"{problem}; deleting the damaged cached stage {path} and computing it again",
                  CacheWarning, stacklevel=4)
    shutil.rmtree(path) if path.is_dir() else path.unlink(missing_ok=True)


def reuse(path: Path, done: str, force: bool) -> Path | None:
    """``path / done`` when the stage at ``path`` finished and its files check out (``done`` is the artifact
    the stage writes last: the trainer's ``final`` folder, a manifest or a summary), else None; ``force``
    deletes the stage first, and so does damage (with a :class:`CacheWarning` naming the file). No lock:
    :func:`compute_once` is the locked form."""
    if force and path.exists() and not _follower():
        shutil.rmtree(path)
    state, problem = _state(path, done)
    if state == "damaged":
        if not _follower():
            _discard(path, problem)
        return None
    return path / done if state == "finished" else None


def verify_stage(path: Path, done: str) -> Path:
    """``path / done`` of a finished stage that cannot be computed again from here; raises
    :class:`CacheIntegrityError` naming the damaged file or the missing manifest."""
    state, problem = _state(path, done)
    if state == "missing" and (path / done).exists():
        problem = f"{path / MANIFEST}: missing (a stage killed before its end, or finished before manifests)"
    elif state == "missing":
        problem = f"{path / done}: missing"
    if state != "finished":
        raise CacheIntegrityError(f"{problem}; the cached stage {path} is damaged: run the stage that makes it "
                                  "again (it is recomputed), or delete the folder")
    return path / done


@contextlib.contextmanager
def compute_once(path: Path, done: str, force: bool = False) -> Iterator[Path | None]:
    """The stage at ``path`` computed once across processes: under :func:`stage_lock`, yields ``path / done``
    when it finished (verified, see :func:`reuse`) or None, and then the body computes it; a body that ends
    normally with ``path / done`` present gets its manifest written. Use as::

        with compute_once(out, "final", force) as done:
            if done is not None:
                return done
            ...  # compute the stage into ``out``
    """
    if _follower():  # ranks > 0 of a launch compute along with rank 0, which locks and records
        yield reuse(path, done, False)
        return
    before = file_stamp(path / MANIFEST)
    with stage_lock(path):
        after = file_stamp(path / MANIFEST)
        if force and not (after is not None and after != before):  # not finished by the holder we waited for
            if path.exists():
                shutil.rmtree(path)
        state, problem = _state(path, done)
        if state == "damaged":
            _discard(path, problem)
        if state == "finished":
            yield path / done
            return
        yield None
        if (path / done).exists():
            write_manifest(path, done)


# -- JSON records --------------------------------------------------------------------------------------

def _record_sha(rec: Mapping[str, Any]) -> str:
    body = {k: v for k, v in rec.items() if k != CHECKSUM_KEY}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode("utf-8")).hexdigest()


def _read_record(path: Path) -> tuple[dict | None, str | None]:
    """``(record without its checksum, problem naming the file)``; (None, None) when missing."""
    try:
        rec = read_json(path)
    except FileNotFoundError:
        return None, None
    except (ValueError, UnicodeDecodeError) as e:
        return None, f"{path}: not valid JSON ({e}; truncated?)"
    if not isinstance(rec, dict):
        return None, f"{path}: a JSON {type(rec).__name__}, not a record"
    if CHECKSUM_KEY not in rec:
        return None, f"{path}: no {CHECKSUM_KEY} (written before records had checksums: nothing to verify it against)"
    if rec[CHECKSUM_KEY] != _record_sha(rec):
        return None, f"{path}: content changed (sha256 of the record differs from its {CHECKSUM_KEY})"
    return {k: v for k, v in rec.items() if k != CHECKSUM_KEY}, None


def write_record(path: Path, rec: Mapping[str, Any]) -> Path:
    """Write JSON record ``rec`` atomically with its checksum under :data:`CHECKSUM_KEY`."""
    body = to_jsonable(dict(rec))
    if CHECKSUM_KEY in body:
        raise ValueError(f"record for {path} has a key {CHECKSUM_KEY!r}; allowed: any other key (it holds the "
                         "record's checksum)")
    body[CHECKSUM_KEY] = _record_sha(body)
    return atomic_write_text(path, json.dumps(body, indent=2, sort_keys=True) + "\n")


def cached_json(path: Path, force: bool, compute: Callable[[], Mapping[str, Any]]) -> dict:
    """The JSON record at ``path``, computed by ``compute()`` and written atomically when missing
    (or when ``force``, or damaged: a :class:`CacheWarning` names the file), under the record's lock, with
    :func:`repro.manifest.environment` under ``environment``. Fresh and cached calls return the same thing: the
    record as read back, less its checksum and that manifest field."""
    before = file_stamp(path)
    with stage_lock(path):
        now = file_stamp(path)
        if force and not (now is not None and now != before):
            path.unlink(missing_ok=True)
        rec, problem = _read_record(path)
        if problem:
            _discard(path, problem)
        if rec is None:
            write_record(path, with_environment(dict(compute())))
            rec, problem = _read_record(path)
            if problem:
                raise CacheIntegrityError(f"{problem} right after writing it")
        rec = dict(rec)
        rec.pop(ENVIRONMENT_KEY, None)
        return rec
