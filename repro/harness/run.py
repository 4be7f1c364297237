"""Run lm-evaluation-harness on a model already loaded the suite's way; return the suite's prediction rows.

:func:`evaluate` is what ``python -m repro evaluate --harness lm-eval`` and the paper profile's general-ability
stage call; it works on any causal LM with a Hugging Face interface (the model object is handed to lm-eval's
``HFLM``, so lm-eval never loads weights itself: they were loaded from safetensors, on the device and in the dtype
the caller chose). Call :func:`repro.harness.offline.go_offline` first, before lm-eval is imported.
"""

from __future__ import annotations

import logging
import os
import random
from dataclasses import dataclass

import numpy as np

from repro.harness import offline
from repro.harness.results import rows_of
from repro.harness.tasks import build, resolve, task_manager

UNSAFE_CODE_TASKS = ("humaneval", "mbpp")
"""Benchmarks that run model-written code (lm-eval asks for an explicit confirmation, given here)."""


@dataclass(frozen=True)
class HarnessRun:
    """What one harness evaluation runs.

    Attributes:
        tasks: lm-eval task, group or tag names (and :data:`repro.harness.tasks.ALIASES`).
        lengths: prompt lengths in tokens of the tasks that have one (RULER, BABILong).
        samples: samples per task and length (RULER, BABILong: generated or read; other tasks: their first
            ``samples`` documents); None: all documents (RULER: lm-eval's 500 per length).
        seed: lm-eval's seeds (Python, numpy, torch, few-shot), which also make RULER's samples.
        batch_size: lm-eval's batch size.
        data: folder of local dataset copies (``<data>/<hub dataset id>``); None: the datasets cache only.
        essays: RULER's essay haystack: a folder or file of text, or None for the suite's default prose.
        max_length: the longest sequence lm-eval may feed (prompt and generation); None: the longest length plus
            the longest generation of the tasks, or the model's own limit when no length is given.
        chat_template: lm-eval's ``apply_chat_template``: each request in the tokenizer's chat template.
    """

    tasks: tuple[str, ...]
    lengths: tuple[int, ...] = ()
    samples: int | None = 4
    seed: int = 0
    batch_size: int = 1
    data: str | None = None
    essays: str | None = None
    max_length: int | None = None
    chat_template: bool = False


def prepare(run: HarnessRun, tokenizer):
    """Resolve ``run``'s tasks and build lm-eval's task objects (RULER's samples are made here): everything that can
    fail for want of data fails now, before a model is loaded. Returns ``(leaves, tasks)``."""
    if not run.tasks:
        raise ValueError("no harness tasks; allowed: lm-eval task names such as niah_single_1, babilong, mmlu")
    if run.samples is not None and run.samples < 1:
        raise ValueError(f"samples={run.samples!r}; allowed: an integer >= 1, or None for all documents")
    if any(n <= 0 for n in run.lengths):
        raise ValueError(f"lengths {list(run.lengths)}; allowed: positive token counts")
    tm = task_manager()
    words = offline.essay_words(run.essays)
    leaves = resolve(run.tasks, tokenizer, run.lengths, run.samples, words, run.data, tm=tm)
    needs_length = [leaf.name for leaf in leaves if leaf.kind in ("ruler", "babilong")]
    if needs_length and not run.lengths:
        raise ValueError(f"{', '.join(needs_length)} need{'s' if len(needs_length) == 1 else ''} --lengths; "
                         "allowed: token counts such as 1024,2048")
    seed_globals(run.seed)
    return leaves, build(leaves, run.data, tm=tm)


def seed_globals(seed: int) -> None:
    """The seeds lm-eval's ``simple_evaluate`` sets before it builds tasks (its RULER generators use them)."""
    import torch  # heavy: the rest of this module (and parity, which imports it) loads without torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def evaluate(model, tokenizer, run: HarnessRun, tasks: dict | None = None, progress: bool = True) -> list[dict]:
    """lm-eval's ``simple_evaluate`` on ``model`` (a loaded causal LM) for ``run``; the suite's prediction rows
    (:mod:`repro.harness.results`). ``tasks``: the objects :func:`prepare` built (built here when None)."""
    # lm-eval: optional and heavy; loads after go_offline() (module docstring)
    import lm_eval
    from lm_eval.models.huggingface import HFLM

    if tasks is None:
        _, tasks = prepare(run, tokenizer)
    max_gen = max((int((t.config.generation_kwargs or {}).get("max_gen_toks", 256)) for t in tasks.values()
                   if t.config.output_type == "generate_until"), default=0)
    max_length = run.max_length or ((max(run.lengths) + max_gen) if run.lengths else None)
    lm = HFLM(pretrained=model, tokenizer=tokenizer, batch_size=run.batch_size,
              **({"max_length": max_length} if max_length else {}))
    unsafe = any(name in UNSAFE_CODE_TASKS for name in tasks)
    first = {name: list(range(min(run.samples, len(t.eval_docs)))) for name, t in tasks.items()
             if not _sized(t) and run.samples is not None}  # tasks read from a dataset: their first documents
    out = lm_eval.simple_evaluate(model=lm, tasks=list(tasks.values()), samples=first or None,
                                  log_samples=True, apply_chat_template=run.chat_template,
                                  random_seed=run.seed, numpy_random_seed=run.seed,
                                  torch_random_seed=run.seed, fewshot_random_seed=run.seed,
                                  confirm_run_unsafe_code=unsafe, verbosity=None if progress else "ERROR")
    return rows_of(out["samples"], tokenizer, run.seed, list(tasks))


def _sized(task) -> bool:
    """A task whose dataset holds exactly ``samples`` per length (RULER's and BABILong's, built here)."""
    return callable(getattr(task.config, "custom_dataset", None))


def quiet_lm_eval_logs(progress: bool) -> None:
    """lm-eval logs every task it builds at INFO; keep warnings (and everything when ``progress``)."""
    logging.getLogger("lm_eval").setLevel(logging.INFO if progress and os.environ.get("REPRO_HARNESS_LOG")
                                          else logging.WARNING)
