"""Read and write RULER's JSONL so our examples and RULER's harness interoperate.

One example per line with the fields RULER's generators write
(``scripts/data/synthetic/*.py`` in NVIDIA/RULER), in its order:

* ``index``: the example's number;
* ``input``: the prompt up to its answer prefix;
* ``outputs``: the references;
* ``length``: tokens of the whole prompt (``input + answer_prefix``, no special
  tokens) plus the tokens to generate, as RULER counts it;
* ``length_w_model_temp``: the same with a chat template's tokens (none here);
* ``answer_prefix``: the end of the prompt the model continues (RULER's
  evaluator feeds ``input + answer_prefix``).

Ours adds ``task`` and ``metadata`` (RULER's reader ignores them), so our
examples read back identically. A row RULER wrote (no ``task``/``metadata``)
reads back as an :class:`Example` whose prompt is ``input + answer_prefix``;
its fields other than ``input`` and ``outputs`` are kept in
``metadata["ruler"]`` and written back unchanged. Its task is ``task=`` when
given, else the one the file is named after: RULER writes
``<task>/validation.jsonl`` and predictions ``<task>.jsonl``, so the file's
stem, then its folder's name, is tried against the registered tasks.

Every row is checked before it is used: a missing or mistyped field, an empty
``outputs``, a folder or an empty file is a :class:`ValueError` naming the
file, the row, the field and what is allowed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Iterable

from repro.tasks.base import Example, available_tasks, get_task
from repro.tasks.layout import n_tokens

RULER_FIELDS = ("index", "input", "outputs", "length", "length_w_model_temp", "answer_prefix")
"""The fields every RULER row holds, in RULER's order (``niah`` rows add ``token_position_answer``)."""


def _jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {k: _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    return x


def _spans_back(key: str, x: Any) -> Any:
    """Span lists (keys ending in ``spans``, also nested in dicts) come back as lists of tuples."""
    if isinstance(x, dict):
        return {k: _spans_back(key if key.endswith("spans") else k, v) for k, v in x.items()}
    if key.endswith("spans") and isinstance(x, list):
        return [tuple(s) if isinstance(s, list) else s for s in x]
    if key.endswith("_span") and isinstance(x, list):
        return tuple(x)
    if key == "freq" and isinstance(x, list):
        return tuple(x)
    return x


def _split_prompt(example: Example) -> tuple[str, str]:
    prefix = example.metadata.get("answer_prefix", "")
    if not isinstance(prefix, str) or not example.prompt.endswith(prefix):
        raise ValueError(f"{example.task}: metadata['answer_prefix']={prefix!r} does not end the prompt; "
                         "allowed: a suffix of the prompt")
    return example.prompt[:len(example.prompt) - len(prefix)], prefix


def to_record(example: Example, index: int, tokenizer=None, tokens_to_generate: int | None = None) -> dict:
    """One row: RULER's fields, then ``task`` and ``metadata``.

    A row read from RULER keeps its own ``index``, ``length`` and other fields.
    Otherwise ``length`` is the prompt's token count under ``tokenizer``
    (special tokens left out, as RULER's tokenizers count) plus
    ``tokens_to_generate`` (default: the task's ``max_new_tokens``).
    """
    text, prefix = _split_prompt(example)
    ruler = example.metadata.get("ruler")
    if ruler is not None:  # read from a RULER file: its fields go back as they were
        fields = {k: v for k, v in ruler.items() if k not in ("input", "outputs")}
    else:
        if tokenizer is None:
            raise ValueError(f"{example.task}: counting RULER's 'length' needs the tokenizer; pass tokenizer=")
        if tokens_to_generate is None:
            tokens_to_generate = get_task(example.task).max_new_tokens
        if not isinstance(tokens_to_generate, int) or tokens_to_generate < 0:
            raise ValueError(f"tokens_to_generate={tokens_to_generate!r}; allowed: an integer >= 0")
        length = n_tokens(tokenizer, example.prompt) + tokens_to_generate
        fields = {"index": index, "length": length, "length_w_model_temp": length, "answer_prefix": prefix}
    fields.update(input=text, outputs=list(example.references))
    row = {k: fields.pop(k) for k in RULER_FIELDS if k in fields}
    row.update(fields)
    row.update(task=example.task, metadata=_jsonable(example.metadata))
    return row


def write_jsonl(path: str | Path, examples: Iterable[Example], tokenizer=None,
                tokens_to_generate: int | dict[str, int] | None = None) -> Path:
    """Write examples, one JSON object per line (UTF-8, non-ASCII kept); returns the path.

    ``tokenizer`` counts each prompt for RULER's ``length`` (needed unless every
    example was read from a RULER file); ``tokens_to_generate`` is one count for
    all tasks, a dict by task name, or ``None`` for each task's ``max_new_tokens``.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for i, ex in enumerate(examples):
            gen = tokens_to_generate.get(ex.task) if isinstance(tokens_to_generate, dict) else tokens_to_generate
            f.write(json.dumps(to_record(ex, i, tokenizer, gen), ensure_ascii=False) + "\n")
    return path


INT_FIELDS = ("index", "length", "length_w_model_temp")
"""RULER's integer fields (checked when a row holds them)."""


def _short(value: Any, limit: int = 60) -> str:
    """``repr`` of ``value`` cut to ``limit`` characters: a huge key or value echoed whole would bury the error."""
    return _cut(repr(value), limit)


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how long it was."""
    return text if len(text) <= limit else f"{text[:limit - 3]}... ({len(text):,} characters)"


def _check_fields(record: dict) -> None:
    """A ValueError naming the first field of ``record`` RULER's evaluator could not use, and what is allowed."""
    for field in ("input", "outputs"):
        if field not in record:
            raise ValueError(f"RULER record lacks {field!r}; has: {_cut(', '.join(sorted(record)), 120)}; "
                             "allowed: records with 'input' and 'outputs'")
    for field in ("input", "answer_prefix", "task"):
        if field in record and not isinstance(record[field], str):
            raise ValueError(f"{field!r}={_short(record[field])}; allowed: a string")
    outputs = record["outputs"]
    if not (isinstance(outputs, str) or isinstance(outputs, list) and outputs
            and all(isinstance(o, str) for o in outputs)):
        raise ValueError(f"'outputs'={_short(outputs)}; allowed: a string or a non-empty list of strings")
    for field in INT_FIELDS:
        value = record.get(field, 0)
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(f"{field!r}={_short(value)}; allowed: an integer >= 0")
    if not isinstance(record.get("metadata", {}), dict):
        raise ValueError(f"'metadata'={_short(record['metadata'])}; allowed: a JSON object")
    if "task" in record and record["task"].partition(":")[0] not in available_tasks():
        raise ValueError(f"'task'={_short(record['task'])} is not a registered task; allowed: one of "
                         f"{', '.join(available_tasks())}")


def from_record(record: dict, task: str | None = None) -> Example:
    """An :class:`Example` from one row, ours or RULER's (prompt: ``input + answer_prefix``); ``task`` names the
    task of a row without a ``task`` field. A ValueError names a missing or mistyped field."""
    _check_fields(record)
    name = record.get("task", task)
    if name is None:
        raise ValueError("record has no 'task' field; allowed: pass task= (one of: "
                         f"{', '.join(available_tasks())})")
    prefix = record.get("answer_prefix", "")
    meta = record.get("metadata")
    if meta is None:
        meta = {"answer_prefix": prefix,
                "ruler": {k: v for k, v in record.items() if k not in ("input", "outputs", "task", "metadata")}}
    else:
        meta = {k: _spans_back(k, v) for k, v in meta.items()}
    outputs = record["outputs"]
    return Example(name, record["input"] + prefix, tuple([outputs] if isinstance(outputs, str) else outputs), meta)


def task_of_file(path: str | Path) -> str | None:
    """The registered task ``path`` is named after, as RULER names its files: the stem (predictions,
    ``niah_single_1.jsonl``), else the folder (data, ``niah_single_1/validation.jsonl``); None when neither is."""
    path = Path(path)
    names = available_tasks()
    return next((n for n in (path.stem, path.parent.name) if n in names), None)


def _rows(path: Path) -> list[tuple[int, dict]]:
    """``(row number, JSON object)`` of each non-blank line; a ValueError for a folder, an empty file or a line
    that is not a JSON object."""
    if path.is_dir():
        raise ValueError(f"{str(path)!r} is a folder; allowed: a JSONL file (one JSON object per line)")
    with open(path, encoding="utf-8") as f:
        lines = [(i, line) for i, line in enumerate(f, 1) if line.strip()]
    if not lines:
        raise ValueError(f"{str(path)!r} holds no rows; allowed: a JSONL file with at least one JSON object")
    rows = []
    for i, line in lines:
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError(f"got {type(record).__name__}")
        except (ValueError, RecursionError) as e:
            why = "nested too deeply" if isinstance(e, RecursionError) else str(e)[:200]
            raise ValueError(f"{path}:{i}: not a JSON object ({why}); allowed: one JSON object per line") from e
        rows.append((i, record))
    return rows


def read_jsonl(path: str | Path, task: str | None = None) -> list[Example]:
    """Read a RULER JSONL file (ours or RULER's own). A row without a ``task`` field gets ``task``, else the task
    the file is named after (:func:`task_of_file`); a ValueError names the file, the row and the bad field."""
    path = Path(path)
    rows = _rows(path)
    for i, record in rows:  # every field first: a row's own fault is named before the file's name is asked
        try:
            _check_fields(record)
        except ValueError as e:
            raise ValueError(f"{path}:{i}: {e}") from e
    if task is None and any("task" not in r for _, r in rows):
        task = task_of_file(path)
        if task is None:
            i = next(i for i, r in rows if "task" not in r)
            raise ValueError(f"{path}:{i}: row has no 'task' field and the file is not named after a task; "
                             f"allowed: pass task= (one of: {', '.join(available_tasks())}) or name the file "
                             "<task>.jsonl")
    out = []
    for i, record in rows:
        try:
            out.append(from_record(record, task))
        except ValueError as e:
            raise ValueError(f"{path}:{i}: {e}") from e
    return out
