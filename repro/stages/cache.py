"""The one caching helper of every stage: versioned keys, stage folders, reuse, atomic finish.

A stage writes under ``<run_dir>/<profile>/<stage>-<key>/`` (or one JSON file
for evaluation records), where ``key`` hashes every config field that can
change its result, the upstream stages' keys, and the stage's code version
(:data:`STAGE_VERSION`). A finished stage is reused; ``force=True`` deletes it
first; an unfinished training stage resumes from its last checkpoint (the
trainer's business). Folders and files appear atomically (built under a
temporary name, then renamed), so a killed run never leaves a half-written
result that a later run would take as finished.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any, Callable, Mapping

from repro.io import atomic_write_json, config_hash, read_json
from repro.manifest import ENVIRONMENT_KEY, with_environment
from repro.profiles import Profile, get_profile

STAGE_VERSION: dict[str, int | None] = {"corpus": 1, "base": 1, "extend": 1, "eval": 1, "analysis": 1, "replay": 1,
                                        "merge": 1, "lmloss": 2, "general": None,
                                        "attn": 1, "cdtask": 1, "cdscores": 2, "cdmem": 1, "longppl": 1,
                                        "pldata": 1, "plppl": 1}
"""Bumped when a stage's code changes what it produces (invalidates its caches). ``None``: keyed
without a version (the general-ability cache never had one; giving it one invalidates it once)."""


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


def reuse(path: Path, done: str, force: bool) -> Path | None:
    """``path / done`` when the stage at ``path`` finished (``done`` is the artifact written last:
    the trainer's ``final`` folder, a manifest or a summary); ``force`` deletes the stage first."""
    if force and path.exists():
        shutil.rmtree(path)
    return path / done if (path / done).exists() else None


def cached_json(path: Path, force: bool, compute: Callable[[], Mapping[str, Any]]) -> dict:
    """The JSON record at ``path``, computed by ``compute()`` and written atomically when missing
    (or when ``force``), with :func:`repro.manifest.environment` under ``environment``. Fresh and cached calls
    return the same thing: the record as read back, less that manifest field."""
    if force or not path.exists():
        atomic_write_json(path, with_environment(dict(compute())))
    rec = read_json(path)
    rec.pop(ENVIRONMENT_KEY, None)
    return rec
