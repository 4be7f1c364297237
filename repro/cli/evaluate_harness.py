"""``python -m repro evaluate --harness lm-eval``: lm-evaluation-harness's own tasks, offline, in the suite's outputs.

The model is loaded as every command loads it (safetensors only, ``--device``/``--dtype``) and handed to lm-eval;
the tasks are lm-eval's YAML definitions (:mod:`repro.harness.tasks`), RULER's samples made by its own generators
with the offline haystack (:mod:`repro.harness.ruler`). Nothing is fetched: a task whose data is not here stops
before the model loads, with one line naming the dataset and where to put it. The outputs are those of the suite's
``evaluate`` (``predictions.jsonl``, ``summary.json``, ``summary.md``); ``summary.json`` adds ``harness`` (lm-eval's
version and where each task's data came from) and ``groups`` (the leaf tasks of each name in ``--tasks``, which
:func:`repro.general.benchmark_accuracy` pools).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from repro.cli.common import (CLIError, check_out, device_args, load_cli_model, load_tokenizer_from, model_dir,
                              output_dir)
from repro.cli.chat import chat_on
from repro.cli.evaluate_outputs import clear_summary, write_outputs
from repro.cli.rope_scaling import rope_plan
from repro.harness import offline
from repro.tasks.summary import markdown


def main(args: argparse.Namespace) -> int:
    """Resolve and build the harness tasks (every missing dataset fails here), load the model, evaluate, write."""
    if args.depths != [0.5]:
        raise CLIError("--depths is the suite's option; lm-eval's tasks place their evidence themselves; allowed: "
                       "--harness without --depths")
    path = model_dir(args.model)
    try:
        offline.go_offline(args.cache, args.essays)  # before lm-eval, datasets or nltk is imported
    except ValueError as e:
        raise CLIError(f"--essays: {e}") from e
    # imported after go_offline: lm-eval, datasets, nltk and transformers read its switches when first imported
    from repro.harness.results import harness_versions
    from repro.harness.ruler import DoesNotFit
    from repro.harness.run import HarnessRun, evaluate, prepare, quiet_lm_eval_logs
    from repro.harness.tasks import MissingData, groups_of

    quiet_lm_eval_logs(not args.no_progress)
    tok = load_tokenizer_from(args.tokenizer or path, "--tokenizer" if args.tokenizer else "--model")
    chat = chat_on(tok, args.chat_template, repr(str(args.tokenizer or path)))
    run = HarnessRun(tasks=tuple(args.tasks), lengths=tuple(args.lengths or ()), samples=args.samples,
                     seed=args.seed, batch_size=args.batch_size, data=args.data, essays=args.essays,
                     chat_template=chat)
    if args.data is not None and not Path(args.data).is_dir():
        raise CLIError(f"--data {args.data!r} is not a folder; allowed: a folder of dataset copies, "
                       "<data>/<hub dataset id>")
    try:
        leaves, tasks = prepare(run, tok)
    except (MissingData, DoesNotFit) as e:
        raise CLIError(str(e)) from e
    except ValueError as e:
        raise CLIError(f"--tasks/--lengths: {e}") from e
    check_out(args.out)
    device, dtype = device_args(args)
    longest = max(args.lengths) if args.lengths else 0
    plan = rope_plan(path, args.rope_scaling, longest, f"--lengths {longest}", args.trust_remote_code)
    # the config as it is (lm-eval is given its max_length, harness.run.evaluate), or scaled by --rope-scaling
    model = load_cli_model(path, args.trust_remote_code, rope=plan.rope, device=device, dtype=dtype).eval()
    out = output_dir(args.out)
    clear_summary(out)
    rows = [{**r, "rope_scaling": plan.scaling.label, "chat_template": "on" if chat else "off"}
            for r in evaluate(model, tok, run, tasks, progress=not args.no_progress)]
    lengths = sorted({r["target_length"] for r in rows if r["target_length"] is not None})
    columns = lengths + ([None] if any(r["target_length"] is None for r in rows) else [])
    groups = groups_of(args.tasks)
    cells = write_outputs(out, rows, {"model": str(path), "tasks": args.tasks, "lengths": args.lengths,
                                      "samples": args.samples, "seed": args.seed, "groups": groups,
                                      **plan.record(), "chat_template": "on" if chat else "off",
                                      "chat_template_flag": args.chat_template,
                                      "harness": {"name": "lm-eval", **harness_versions(),
                                                  "sources": {leaf.name: leaf.source for leaf in leaves}}},
                          columns, [])
    print(markdown(cells, columns), end="")
    print(f"{len(rows)} predictions -> {Path(out) / 'predictions.jsonl'}")
    return 0
