"""Which lm-evaluation-harness tasks a ``--tasks`` list names, and the config each runs with, offline.

Names are lm-eval's own (tasks, groups, tags) plus a few short ones (:data:`ALIASES`: ``vt``, ``cwe``, ``fwe``,
``longbench2`` ...). Groups and tags are expanded to their leaf tasks (each leaf is reported on its own; group
averages are the reader's). Every leaf runs with lm-eval's own YAML config, changed only where data would be fetched:

- RULER's synthetic tasks get a ``custom_dataset`` from :mod:`repro.harness.ruler` (offline haystack, the model's
  tokenizer, ``samples`` per length);
- BABILong reads a local copy of ``RMT-team/babilong-1k-samples`` (lm-eval's loader downloads it);
- every task with a hub ``dataset_path`` reads ``<data>/<dataset_path>`` when that folder exists (a copy of the
  hub's dataset repository, as ``hf download --repo-type dataset <dataset_path> --local-dir
  <data>/<dataset_path>`` writes it); otherwise the datasets cache, offline.

A task whose data is in neither place stops with :class:`MissingData` before the model is loaded.
"""

from __future__ import annotations

import difflib
import functools
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from repro.harness import ruler

ALIASES = {"vt": "ruler_vt", "cwe": "ruler_cwe", "fwe": "ruler_fwe", "qa_squad": "ruler_qa_squad",
           "qa_hotpot": "ruler_qa_hotpot", "longbench_v2": "longbench2"}
"""Short names accepted besides lm-eval's own (the suite's names for the same RULER tasks)."""
BABILONG_DATASET = "RMT-team/babilong-1k-samples"
BABILONG_LENGTHS = ("0k", "1k", "2k", "4k", "8k", "16k", "32k", "64k", "128k")
"""The configs of BABILong's 1k-samples dataset: the length of the haystack each sample is hidden in."""


class MissingData(ValueError):
    """A task whose data is not on this machine: one line naming what to provide and where to put it."""


@dataclass(frozen=True)
class Leaf:
    """One lm-eval task to run.

    Attributes:
        name: lm-eval's task name.
        config: its YAML config with functions resolved (lm-eval's own, before any change).
        overrides: the fields changed here to run offline (merged over ``config``).
        kind: ``"ruler"`` (built by :mod:`repro.harness.ruler`), ``"babilong"`` or ``"data"``.
        source: where its data comes from, in words (a local folder, the datasets cache, or generated).
    """

    name: str
    config: dict = field(repr=False)
    overrides: dict = field(default_factory=dict, repr=False)
    kind: str = "data"
    source: str = ""

    @property
    def spec(self) -> dict:
        """The config dict lm-eval's task manager builds this task from."""
        return {**self.config, **self.overrides}


@functools.lru_cache(maxsize=1)
def task_manager():
    """lm-eval's task index (its bundled YAMLs; built once per process, about 6 s)."""
    from lm_eval.tasks import TaskManager  # lm-eval: optional and heavy; loads after go_offline()

    return TaskManager()


def leaf_names(tm, names: Sequence[str]) -> list[str]:
    """The leaf tasks of ``names`` (aliases resolved, groups and tags expanded), in order, each once; a name lm-eval
    does not know raises ``ValueError`` naming it and a few known ones close to it."""
    from lm_eval.tasks._index import Kind  # lm-eval: optional and heavy; loads after go_offline()

    index = tm.task_index
    out: list[str] = []

    def walk(name: str, trail: tuple[str, ...]) -> None:
        if name in trail:
            raise ValueError(f"task group {name!r} contains itself ({' -> '.join(trail + (name,))})")
        entry = index.get(name)
        if entry is None:
            close = difflib.get_close_matches(name, list(index), n=5, cutoff=0.6)
            raise ValueError(f"unknown lm-eval task {name!r}; allowed: an lm-eval task, group or tag"
                             + (f" (close: {', '.join(close)})" if close else "")
                             + f", or {', '.join(sorted(ALIASES))}")
        if entry.kind in (Kind.TASK, Kind.PY_TASK):
            if name not in out:
                out.append(name)
        elif entry.kind == Kind.GROUP:
            for member in entry.cfg.get("task", []):
                if isinstance(member, str):
                    walk(member, trail + (name,))
                elif isinstance(member, dict) and isinstance(member.get("task"), str) and len(member) == 1:
                    walk(member["task"], trail + (name,))
                else:
                    raise ValueError(f"lm-eval group {name!r} defines a task inline ({member!r}); allowed here: "
                                     "groups of named tasks; name its tasks instead")
        elif entry.kind == Kind.TAG:
            for other, e in index.items():
                if name in e.tags and e.kind in (Kind.TASK, Kind.PY_TASK) and other not in out:
                    out.append(other)
        else:
            raise ValueError(f"lm-eval entry {name!r} is neither a task nor a group; allowed: tasks, groups, tags")

    for raw in names:
        walk(ALIASES.get(raw, raw), ())
    return out


def groups_of(names: Sequence[str], tm=None) -> dict[str, list[str]]:
    """Each requested name -> its leaf tasks (``summary.json``'s ``groups``, which
    :func:`repro.general.benchmark_accuracy` pools)."""
    tm = tm or task_manager()
    return {n: leaf_names(tm, [n]) for n in names}


def babilong_config(lengths: Sequence[int]) -> list[str]:
    """BABILong's config names for ``lengths`` in tokens: 0 -> ``0k``, 1024 -> ``1k``, ... 131072 -> ``128k``."""
    out = []
    for n in lengths:
        name = f"{n // 1024}k"
        if n % 1024 or name not in BABILONG_LENGTHS:
            tokens = ", ".join(str(1024 * int(c[:-1])) for c in BABILONG_LENGTHS)
            raise ValueError(f"BABILong length {n}; allowed: {tokens} tokens ({', '.join(BABILONG_LENGTHS)})")
        out.append(name)
    return out


def _local(data: Path | None, dataset_path: str) -> Path | None:
    if data is None or not dataset_path or os.path.isabs(dataset_path):
        return None
    p = data / dataset_path
    return p if p.is_dir() else None


def _where(data: Path | None, dataset_path: str) -> str:
    place = (data / dataset_path) if data is not None else Path("<--data>") / dataset_path
    return (f"put a copy of the hub dataset {dataset_path} in {place} "
            f"(hf download --repo-type dataset {dataset_path} --local-dir {place})")


def babilong_loader(local: Path, configs: Sequence[str], samples: int | None):
    """``custom_dataset`` for lm-eval's BABILong task: its split (``qa_split``) from the local copy, the first
    ``samples`` of every config of ``configs`` concatenated, with a ``length`` column (the config's tokens)."""

    def load(qa_split: str, **_metadata) -> dict:
        import datasets  # optional and heavy; loads after go_offline() (it reads HF_DATASETS_OFFLINE)

        parts = []
        for c in configs:
            ds = datasets.load_dataset(str(local), name=c, split=qa_split)
            ds = ds if samples is None else ds.select(range(min(samples, len(ds))))
            parts.append(ds.add_column("length", [1024 * int(c[:-1])] * len(ds)))
        return {qa_split: datasets.concatenate_datasets(parts)}

    return load


def resolve(names: Sequence[str], tokenizer, lengths: Sequence[int], samples: int | None, essays: Sequence[str],
            data: str | os.PathLike | None = None, tm=None) -> list[Leaf]:
    """The leaves of ``names`` with the overrides that run them offline; raises :class:`MissingData` (one line) for
    the first task whose data is not here and ``ValueError`` for an unknown name or a length a task cannot use."""
    from lm_eval.tasks._yaml_loader import load_yaml  # lm-eval: optional and heavy; loads after go_offline()

    tm = tm or task_manager()
    root = Path(data) if data is not None else None
    leaves = []
    for name in leaf_names(tm, names):
        entry = tm.task_index[name]
        config = load_yaml(entry.yaml_path, resolve_func=True) if entry.yaml_path else dict(entry.cfg or {})
        if name in ruler.DOWNLOADS:
            raise MissingData(f"{name} needs {ruler.DOWNLOADS[name]}; offline runs do not fetch it; allowed "
                              f"offline: {', '.join(ruler.SYNTHETIC)} (or the suite's own qa_1, qa_2)")
        if name in ruler.SYNTHETIC:
            leaves.append(Leaf(name, config, {"custom_dataset": ruler.dataset_builder(name, tokenizer, lengths,
                                                                                      samples, essays)},
                               "ruler", "generated by lm-eval's RULER code (offline haystack)"))
            continue
        if name.startswith("babilong") and "qa_split" in (config.get("dataset_kwargs") or {}):
            local = _local(root, BABILONG_DATASET)
            if local is None:
                raise MissingData(f"{name} needs BABILong ({BABILONG_DATASET}); {_where(root, BABILONG_DATASET)}; "
                                  "the suite's offline BABILong is babilong_qa1..qa5 without --harness")
            loader = babilong_loader(local, babilong_config(lengths), samples)
            leaves.append(Leaf(name, config, {"custom_dataset": loader}, "babilong", str(local)))
            continue
        path = str(config.get("dataset_path") or "")
        if config.get("custom_dataset") is not None or not path:
            raise MissingData(f"{name} builds its data with its own code (custom_dataset), which may fetch it; "
                              "allowed offline: RULER's synthetic tasks, BABILong and tasks with a dataset_path")
        local = _local(root, path)
        if local is not None:
            leaves.append(Leaf(name, config, {"dataset_path": str(local)}, "data", str(local)))
        elif os.path.isabs(path) and Path(path).exists():
            leaves.append(Leaf(name, config, {}, "data", path))
        else:
            leaves.append(Leaf(name, config, {}, "data", f"datasets cache ({path})"))
    return leaves


def build(leaves: Sequence[Leaf], data: str | os.PathLike | None = None, tm=None) -> dict[str, Any]:
    """lm-eval's task objects, ``{name: Task}``. A task whose data is not in the datasets cache (offline) raises
    :class:`MissingData` naming the dataset and where to put it."""
    tm = tm or task_manager()
    tasks = {}
    for leaf in leaves:
        try:
            built = tm.load([leaf.spec])["tasks"]
        except Exception as e:  # datasets raises several types offline; name what is missing
            path = str(leaf.config.get("dataset_path") or "")
            if "dataset_path" in leaf.overrides:  # a local copy that does not load: say why, in one line
                why = (str(e).strip().splitlines() or [type(e).__name__])[0]
                raise MissingData(f"{leaf.name}: the copy of {path} in {leaf.overrides['dataset_path']} does not "
                                  f"load ({type(e).__name__}: {why}); allowed: a copy of the hub dataset repository "
                                  f"(hf download --repo-type dataset {path} --local-dir ...)") from e
            if leaf.kind == "data" and path and not os.path.isabs(path):
                name = leaf.config.get("dataset_name")
                raise MissingData(f"{leaf.name} needs the dataset {path}" + (f" ({name})" if name else "")
                                  + f", not in the datasets cache; {_where(Path(data) if data else None, path)}") from e
            raise
        tasks.update(built)
    return tasks
