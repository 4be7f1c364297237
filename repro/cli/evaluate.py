"""``python -m repro evaluate``: the synthetic tasks on a local model, RULER-style predictions and a summary.

Outputs in ``--out``:

- ``predictions.jsonl``: one row per sample, RULER's prediction fields (as RULER's ``pred/call_api.py`` writes
  them) then ours: ``index`` (row number), ``pred`` (the model's continuation), ``input`` (the whole prompt the
  model continued, its answer prefix included, so a row can be re-scored or re-run), ``outputs`` (the references),
  ``others`` (``{}``), ``truncation`` (-1: the prompt is never cut), ``length`` (prompt tokens); then ``task``,
  ``target_length`` (the requested length), ``depth``, ``seed`` and ``score`` (RULER's string match of the task),
  ``rope_scaling`` (``--rope-scaling``'s value: ``none`` or e.g. ``yarn:2``) and ``chat_template`` (``on`` or
  ``off``, what ``--chat-template`` resolved to);
- ``summary.json`` and ``summary.md``: accuracy per task x length (the mean of the rows' ``score``), with its
  standard error ``std / sqrt(n)`` over the samples (population std; for 0/1 scores
  :func:`repro.stats.bernoulli_sd` ``/ sqrt(n)``) and ``n``; cells a task cannot fit are listed under ``skipped``.
  ``summary.json`` also records ``rope_scaling``, the ``rope_parameters`` loaded (null: the model's own),
  the model's ``max_position_embeddings``, ``chat_template`` (``on``/``off``) and ``chat_template_flag``
  (``auto``/``on``/``off``).

The model's config is loaded as it is: a length past its ``max_position_embeddings`` is run (extrapolation) with
one ``warning:`` line unless ``--rope-scaling`` scales RoPE (:mod:`repro.cli.rope_scaling`). With the chat template
on (``--chat-template``; ``auto``: when the tokenizer has one, as lm-eval's ``--apply_chat_template``), each
prompt's question goes into a user turn and its answer prefix opens the assistant's turn
(:func:`repro.evaluate.chat_prompt`), as RULER and lm-eval place a task's answer prefix after the chat template;
the template's tokens count in ``--lengths`` (the example is drawn shorter by them, as RULER counts its template's),
so a cell at the model's window stays inside it.

``--lengths`` none of whose values any task can fill is refused before anything is loaded or written.
"""

from __future__ import annotations

import argparse
from pathlib import Path


from repro.cli.chat import CHAT_MODES, chat_on
from repro.cli.common import (CLIError, add_device_args, at_most, check_out, check_tokenizer_fits, csv_of, device_args,
                              distinct, load_cli_model, load_tokenizer_from, model_dir, output_dir, positive_int)
from repro.cli.train_checks import MAX_TARGET
from repro.cli.evaluate_harness import main as harness_main
from repro.cli.evaluate_outputs import clear_summary, write_outputs
from repro.cli.rope_scaling import add_rope_scaling_arg, parse_rope_scaling, rope_plan
from repro.evaluate import make_task
from repro.evaluate import prediction_rows as predictions  # the evaluation's loop (the smol profile's stage too)
from repro.tasks import available_tasks
from repro.tasks.base import LengthTooShort
from repro.tasks.summary import markdown

MAX_SAMPLES = 100_000
"""Most ``--samples`` accepted unless ``REPRO_MAX_SAMPLES`` says otherwise: every sample is generated before the
first result is shown, so more runs for hours on the testbed models without a word."""
MAX_BATCH = 4096
"""Most ``--batch-size`` accepted unless ``REPRO_MAX_BATCH`` says otherwise."""
MAX_CELLS = 1_000_000
"""Most prompts (tasks x lengths x samples) one ``evaluate`` generates unless ``REPRO_MAX_PROMPTS`` says otherwise."""


def check_sizes(args: argparse.Namespace) -> None:
    """Every list and size-like option of ``evaluate`` within its bound and without repeats, before any work: a
    :class:`CLIError` naming the first that is not (shared by ``--harness lm-eval``)."""
    args.tasks = distinct(args.tasks, "--tasks")
    if args.lengths:
        args.lengths = distinct(args.lengths, "--lengths")
        for length in args.lengths:
            at_most(length, "--lengths", "REPRO_MAX_TARGET", MAX_TARGET)
    args.depths = distinct(args.depths, "--depths")
    at_most(args.samples, "--samples", "REPRO_MAX_SAMPLES", MAX_SAMPLES)
    at_most(args.batch_size, "--batch-size", "REPRO_MAX_BATCH", MAX_BATCH)
    at_most(len(args.tasks) * len(args.lengths or [1]) * args.samples, "--tasks x --lengths x --samples",
            "REPRO_MAX_PROMPTS", MAX_CELLS)
    if getattr(args, "cache", None) is not None:
        check_out(args.cache, "--cache")
    parse_rope_scaling(getattr(args, "rope_scaling", "none"))


PRED_FIELDS: tuple[str, ...] = ("index", "pred", "input", "outputs", "others", "truncation", "length",
                                "task", "target_length", "depth", "seed", "score", "rope_scaling", "chat_template")
"""The fields of a prediction row, in order."""


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``evaluate`` subcommand's arguments."""
    e = sub.add_parser("evaluate", help="run synthetic long-context tasks on a local model")
    e.add_argument("--model", required=True, help="local model folder")
    e.add_argument("--tasks", required=True, type=csv_of(str),
                   help="comma-separated task specs (niah_single_1, vt, niah_position:ordinal=first, ...)")
    e.add_argument("--lengths", type=csv_of(positive_int), default=None,
                   help="comma-separated prompt lengths (required, except for --harness tasks that have none)")
    e.add_argument("--samples", type=positive_int, default=4,
                   help="samples per task and length (default 4); --harness: also the first N documents of a "
                        "task read from a dataset")
    e.add_argument("--depths", type=csv_of(float), default=[0.5],
                   help="evidence depths in [0, 1]; samples are spread over them in turn (default 0.5)")
    e.add_argument("--batch-size", type=positive_int, default=8, help="generation batch size (default 8)")
    e.add_argument("--seed", type=int, default=0, help="first evaluation seed (default 0)")
    e.add_argument("--tokenizer", default=None, help="tokenizer folder or file (default: the model's)")
    e.add_argument("--out", default="runs/evaluate", help="output folder (default runs/evaluate)")
    e.add_argument("--no-progress", action="store_true", help="no progress bar")
    e.add_argument("--trust-remote-code", action="store_true",
                   help="run model code shipped in the model folder (off: only transformers' own architectures)")
    add_device_args(e, "weights' dtype: auto (bfloat16 on CUDA, float32 on the CPU), float32 or bfloat16")
    add_rope_scaling_arg(e)
    e.add_argument("--chat-template", choices=CHAT_MODES, default="auto",
                   help="wrap each prompt in the tokenizer's chat template: auto (default: on when the tokenizer has "
                        "one, as lm-eval's --apply_chat_template), on, off")
    h = e.add_argument_group("lm-evaluation-harness (--harness lm-eval)")
    h.add_argument("--harness", choices=("lm-eval",), default=None,
                   help="run lm-eval's own task definitions (RULER, BABILong, LongBench v2, MMLU, ...) instead of "
                        "the suite's tasks; offline, same outputs")
    h.add_argument("--data", default=None,
                   help="folder of local dataset copies, <data>/<hub dataset id> (e.g. <data>/RMT-team/"
                        "babilong-1k-samples); default: the datasets cache only")
    h.add_argument("--essays", default=None,
                   help="RULER's essay haystack: a folder of .txt/.md files or one file (default: the suite's "
                        "haystack prose, Python's documentation)")
    h.add_argument("--cache", default=None, help="folder for generated offline data (default $REPRO_CACHE or "
                                                 "~/.cache/repro)")
    return e


def check_tasks(specs: list[str]) -> None:
    """A :class:`CLIError` naming the first task spec that is not a registered task (or has bad arguments)."""
    for spec in specs:
        name = spec.partition(":")[0]
        if name not in available_tasks():
            raise CLIError(f"unknown task {name!r}; allowed: {', '.join(available_tasks())}")
        try:
            make_task(spec)
        except (ValueError, TypeError) as e:
            raise CLIError(str(e) if str(e).startswith("task spec") else f"task spec {spec!r}: {e}") from e


def task_minimum(spec: str, tok, depths: list[float], samples: int, seed: int) -> int:
    """The shortest length at which every one of the ``samples`` prompts of task ``spec`` fits (the prompts of
    :func:`predictions`: depths taken in turn, seeds from ``seed``); found by asking each for 1 token."""
    task, need = make_task(spec), 1
    for i in range(samples):
        try:
            task.generate(tok, 1, depths[i % len(depths)], seed + i)
        except LengthTooShort as err:
            need = max(need, err.minimum)
    return need


def check_lengths(specs: list[str], lengths: list[int], tok, depths: list[float], samples: int, seed: int) -> None:
    """A :class:`CLIError` when no task can fill any of ``lengths`` (the run would write zero predictions), naming
    the shortest length some task fills; cells only some tasks fit are run and the others listed as skipped."""
    needs = {}
    for spec in specs:  # the first task that fits ends the check
        needs[spec] = task_minimum(spec, tok, depths, samples, seed)
        if needs[spec] <= max(lengths):
            return
    shortest = min(needs.values())
    each = ", ".join(f"{spec} >= {n}" for spec, n in needs.items())
    raise CLIError(f"--lengths {','.join(map(str, lengths))}: every length is too short for the tasks ({each}); "
                   f"allowed: a length >= {shortest} tokens")


def main(args: argparse.Namespace) -> int:
    """Evaluate, then write the predictions and the summary (each file atomically, the summary last). A summary
    already in ``--out`` is removed first, so that a run killed before its end never leaves a previous run's
    summary beside its own predictions: ``summary.json`` exists only when it matches ``predictions.jsonl``."""
    check_sizes(args)
    if args.harness:
        return harness_main(args)
    for flag in ("data", "essays", "cache"):
        if getattr(args, flag) is not None:
            raise CLIError(f"--{flag} is an option of --harness lm-eval; allowed: --harness lm-eval with it, or "
                           "the suite's tasks without it")
    if not args.lengths:
        raise CLIError("--lengths is required for the suite's tasks; allowed: comma-separated token counts")
    check_tasks(args.tasks)
    if any(not 0.0 <= d <= 1.0 for d in args.depths):
        raise CLIError(f"--depths {args.depths}; allowed: values in [0, 1]")
    path = model_dir(args.model)
    tok = load_tokenizer_from(args.tokenizer or path, "--tokenizer" if args.tokenizer else "--model",
                              trust_remote_code=args.trust_remote_code)
    check_tokenizer_fits(tok, path, tok_flag="--tokenizer" if args.tokenizer else "--model's tokenizer")
    device, dtype = device_args(args)
    chat = chat_on(tok, args.chat_template, repr(str(args.tokenizer or path)))
    check_lengths(args.tasks, args.lengths, tok, args.depths, args.samples, args.seed)
    check_out(args.out)  # created once the model has loaded: a model that does not load leaves no folder
    plan = rope_plan(path, args.rope_scaling, max(args.lengths), f"--lengths {max(args.lengths)}",
                     args.trust_remote_code)
    model = load_cli_model(path, args.trust_remote_code, rope=plan.rope, device=device, dtype=dtype).eval()
    out = output_dir(args.out)
    clear_summary(out)  # a summary marks a finished evaluation: none until this one is
    (out / "predictions.jsonl").unlink(missing_ok=True)  # nor a previous evaluation's predictions beside ours
    rows, skipped = predictions(model, tok, args.tasks, args.lengths, args.depths, args.samples, args.seed,
                                args.batch_size, not args.no_progress, chat, plan.scaling.label)
    cells = write_outputs(out, rows, {"model": str(path), "tasks": args.tasks, "lengths": args.lengths,
                                      "depths": args.depths, "samples": args.samples, "seed": args.seed,
                                      **plan.record(), "chat_template": "on" if chat else "off",
                                      "chat_template_flag": args.chat_template},
                          args.lengths, skipped)
    print(markdown(cells, args.lengths), end="")
    if skipped:
        print("skipped (too short for the task): " + ", ".join(f"{s['task']}@{s['length']} (min {s['minimum']})"
                                                                for s in skipped))
    print(f"{len(rows)} predictions -> {Path(out) / 'predictions.jsonl'}")
    return 0
