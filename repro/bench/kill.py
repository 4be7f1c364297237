"""Real kills: run the commands as processes, SIGKILL them at random moments, re-run them until they finish.

``python -m repro.bench.kill [--trials N] [--out DIR] [--kinds train,evaluate,notebook] [--seed S]``

Three kinds of work, each a ``python -m repro ...`` command in a process group of its own:

- ``train``: a 12-step PoSE run of a tiny random Llama through ``python -m repro train`` with a checkpoint every
  2 steps. A finished run must end with ``final/model.safetensors`` bitwise equal to an uninterrupted run's (one
  thread everywhere: ``OMP_NUM_THREADS=1``) and the same ``metrics.jsonl`` (every field but the timings).
- ``evaluate``: ``python -m repro evaluate`` on that model (two tasks, two lengths). After every kill a
  ``summary.json`` is either absent or complete and consistent with ``predictions.jsonl``; the finished run's
  predictions and summary equal an uninterrupted run's.
- ``notebook``: ``python -m repro reproduce --profile smoke --only positions`` (papermill, a kernel process).
  After every kill an executed notebook or its ``.done.json`` stamp exists only when the notebook ran to its
  end; the re-run finishes.

After every kill no JSON file under the run's folders is half-written (each parses) and every ``.jsonl`` holds
whole lines. Kill times are drawn (seeded) uniformly over the uninterrupted run's measured duration; every third
trial is instead aimed at an artifact write: from a random moment on, the run is killed as soon as a hidden
temporary checkpoint folder, notebook or file (``.ckpt-*.tmp``, ``.<name>.*.tmp``, ``.<name>.running.ipynb``) is
seen. A kill counts as
landing inside a write when such a temporary entry is left behind. Killed runs are re-run with the same command
until they exit 0 (each re-run counts as one resume).

Running, killing and scanning the processes' folders: :mod:`repro.bench.kill_process`.

Writes ``<out>/kill.json`` and ``<out>/kill.md`` (default ``runs/bench``) and prints the table.
"""

from __future__ import annotations

import argparse
import json
import random
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from pydoc_data.topics import topics
from typing import Callable

from tqdm.auto import tqdm

from repro.bench.kill_process import KillBenchError, killed_run, partial_files, run_once, temp_entries
from repro.cli.train import TOKENIZER_LAST
from repro.data.corpus import iter_synthetic
from repro.data.tokenizer import train_tokenizer
from repro.io import atomic_write_json, atomic_write_text
from repro.models import build_tiny
from repro.profiles import ModelConfig
from repro.targets import TARGETS
from repro.tasks.summary import summarize

KINDS: tuple[str, ...] = ("train", "evaluate", "notebook")
"""The kinds of work, in the order they run."""
MAX_RESUMES = 4
"""Re-runs allowed after a kill before a trial counts as not completing."""
AIM_EVERY = 3
"""Every this-many-th trial (the first included) is aimed at an artifact write instead of a random moment."""
AIM_SPAN = 0.8
"""An aimed trial watches for a write from a random moment in the first this-share of the run's duration."""
TIMING_KEYS = frozenset({"seconds", "tokens_per_s"})
"""``metrics.jsonl`` fields that measure time, left out when two runs' logs are compared."""
TRAIN_STEPS = 12
"""Optimizer steps of the training run."""
EVAL_ARGS: tuple[str, ...] = ("--tasks", "niah_single_1,vt", "--lengths", "256,512", "--samples", "6")
"""The evaluation's arguments besides the model and the output."""


# -- checks ----------------------------------------------------------------------------------------------------
def _metrics(path: Path) -> list[dict]:
    return [{k: v for k, v in json.loads(ln).items() if k not in TIMING_KEYS}
            for ln in path.read_text().splitlines() if ln]


def eval_consistency(out: Path) -> list[str]:
    """What is wrong with an evaluation folder as a reader would take it: a ``summary.json`` that exists must
    match ``predictions.jsonl`` (every cell's ``n`` and accuracy) and the command's tasks, lengths and samples."""
    summary = out / "summary.json"
    if not summary.exists():
        return []
    s = json.loads(summary.read_text())
    preds = out / "predictions.jsonl"
    if not preds.exists():
        return ["summary.json without predictions.jsonl"]
    rows = [json.loads(ln) for ln in preds.read_text().splitlines() if ln]
    problems = []
    if [r["index"] for r in rows] != list(range(len(rows))):
        problems.append("predictions.jsonl indices are not 0..n-1")
    if summarize(rows) != s.get("cells"):
        problems.append("summary.json cells do not match predictions.jsonl")
    tasks, lengths, samples = EVAL_ARGS[1].split(","), [int(n) for n in EVAL_ARGS[3].split(",")], int(EVAL_ARGS[5])
    cells = len(tasks) * len(lengths) - len(s.get("skipped", []))
    if len(rows) != cells * samples:
        problems.append(f"predictions.jsonl has {len(rows)} rows; expected {cells * samples}")
    return problems


def notebook_consistency(nb_dir: Path, name: str = "positions") -> list[str]:
    """What is wrong with the runner's folder as a reader would take it: an executed ``<name>.ipynb`` must have
    run every code cell, and a ``.done.json`` stamp needs that executed notebook."""
    problems = []
    executed, stamp = nb_dir / f"{name}.ipynb", nb_dir / f"{name}.done.json"
    if stamp.exists() and not executed.exists():
        problems.append(f"{stamp.name} without {executed.name}")
    if executed.exists():
        nb = json.loads(executed.read_text())
        code = [c for c in nb.get("cells", []) if c.get("cell_type") == "code"]
        if not code or any(c.get("execution_count") is None for c in code):
            problems.append(f"{executed.name} has cells that did not run")
        if any(o.get("output_type") == "error" for c in code for o in c.get("outputs", [])):
            problems.append(f"{executed.name} holds an error")
    return problems


# -- the kinds ---------------------------------------------------------------------------------------------------
@dataclass
class Kind:
    """One kind of work: its command for a trial folder, what a kill may leave, and what a finished run must be."""

    name: str
    command: Callable[[Path], list[str]]
    """The command of a run whose outputs go under the given trial folder."""
    folders: Callable[[Path], list[Path]]
    """Folders the run writes (watched for temporary entries, checked for half-written files)."""
    after_kill: Callable[[Path], list[str]]
    """Problems a reader would meet right after a kill (empty: none)."""
    finished: Callable[[Path, Path], list[str]]
    """Problems of a finished trial folder against the uninterrupted reference folder (empty: none)."""
    aim: tuple[str, ...] = (".",)
    """Name prefixes of the temporary entries an aimed trial kills on (its artifact writes)."""
    done: Callable[[Path], bool] = lambda d: False
    """Whether a killed run had already finished its work (its command refuses a finished folder: no re-run)."""


def make_assets(root: Path) -> dict[str, Path]:
    """A tiny random Llama with its tokenizer (``model/``) and a folder of Python's documentation (``texts/``)."""
    model, texts = root / "model", root / "texts"
    if not (model / "config.json").exists():
        tok = train_tokenizer([t for _, t in sorted(topics.items())][:120] + [d.text for d in iter_synthetic(100)],
                              1024)
        cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
        build_tiny(cfg, len(tok), 2048, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id,
                   seed=0).save_pretrained(model)
        tok.save_pretrained(model)
    texts.mkdir(parents=True, exist_ok=True)
    docs = [t for _, t in sorted(topics.items(), key=lambda kv: -len(kv[1]))]
    for i, t in enumerate(docs[:8] + docs[-4:]):
        (texts / f"doc{i}.txt").write_text(t)
    return {"model": model, "texts": texts}


def kinds(assets: dict[str, Path]) -> dict[str, Kind]:
    """The three kinds of work on ``assets`` (:func:`make_assets`)."""
    py = sys.executable

    def train_cmd(d: Path) -> list[str]:
        return [py, "-m", "repro", "train", "--model", str(assets["model"]), "--method", "pose", "--target", "256",
                "--data", f"folder:{assets['texts']}", "--steps", str(TRAIN_STEPS), "--batch-size", "2",
                "--profile", "smoke", "--checkpoint-every", "2", "--out", str(d / "out"), "--no-progress"]

    def train_after_kill(d: Path) -> list[str]:
        final = d / "out" / "final"
        if final.exists() and not (final / "model.safetensors").exists():
            return ["final/ exists without model.safetensors"]
        return []

    def train_finished(d: Path, ref: Path) -> list[str]:
        out, want = d / "out", ref / "out"
        problems = []
        if (out / "final" / "model.safetensors").read_bytes() != (want / "final" / "model.safetensors").read_bytes():
            problems.append("final/model.safetensors differs from the uninterrupted run's")
        if _metrics(out / "metrics.jsonl") != _metrics(want / "metrics.jsonl"):
            problems.append("metrics.jsonl differs from the uninterrupted run's")
        if not (out / "final" / "tokenizer_config.json").exists():
            problems.append("final/ has no tokenizer")
        return problems

    def eval_cmd(d: Path) -> list[str]:
        return [py, "-m", "repro", "evaluate", "--model", str(assets["model"]), *EVAL_ARGS, "--out", str(d / "out"),
                "--no-progress"]

    def eval_finished(d: Path, ref: Path) -> list[str]:
        out, want = d / "out", ref / "out"
        problems = eval_consistency(out)
        if not (out / "summary.json").exists():
            problems.append("no summary.json")
        elif (out / "predictions.jsonl").read_text() != (want / "predictions.jsonl").read_text():
            problems.append("predictions.jsonl differs from the uninterrupted run's")
        elif json.loads((out / "summary.json").read_text())["cells"] != \
                json.loads((want / "summary.json").read_text())["cells"]:
            problems.append("summary.json differs from the uninterrupted run's")
        return problems

    def nb_cmd(d: Path) -> list[str]:
        return [py, "-m", "repro", "reproduce", "--profile", "smoke", "--only", "positions", "--run-dir",
                str(d / "runs"), "--figures-dir", str(d / "figures")]

    def nb_finished(d: Path, ref: Path) -> list[str]:
        nb_dir = d / "runs" / "smoke" / "notebooks"
        problems = notebook_consistency(nb_dir)
        if not (nb_dir / "positions.done.json").exists():
            problems.append("no positions.done.json")
        index = d / "figures" / "index.json"
        want = sorted(t for t, target in TARGETS.items() if target.notebook == "positions")  # what the run writes
        if not index.exists():
            problems.append("no figures/index.json")
        elif sorted(json.loads(index.read_text())) != want:
            problems.append(f"figures/index.json lists other targets than the notebook's {want}")
        return problems

    return {
        "train": Kind("train", train_cmd, lambda d: [d / "out"], train_after_kill, train_finished,
                      (".ckpt-", ".final.", ".tokenizer."),
                      lambda d: all((d / "out" / "final" / f).exists() for f in ("config.json", TOKENIZER_LAST))),
        "evaluate": Kind("evaluate", eval_cmd, lambda d: [d / "out"], lambda d: eval_consistency(d / "out"),
                         eval_finished, (".predictions.", ".summary.")),
        "notebook": Kind("notebook", nb_cmd, lambda d: [d / "runs", d / "figures"],
                         lambda d: notebook_consistency(d / "runs" / "smoke" / "notebooks"), nb_finished,
                         (".positions.", ".index.", ".INDEX.", ".LR-")),
    }


# -- trials ------------------------------------------------------------------------------------------------------
@dataclass
class Trial:
    """One trial: a kill, what it left, the re-runs to the end and the checks."""

    kind: str
    index: int
    aimed: bool
    """Killed when a temporary entry appeared (else at a random moment)."""
    kill_at: float
    """Planned kill time in seconds after the start (aimed: the first write seen from then on)."""
    killed: bool = False
    """Whether the kill happened (False: the run finished first)."""
    killed_at: float = 0.0
    inside_write: bool = False
    """Whether the kill left a temporary entry behind (it landed inside an artifact write)."""
    left: list[str] = field(default_factory=list)
    """The temporary entries left by the kill."""
    partial_read: list[str] = field(default_factory=list)
    """Half-written files and inconsistent results a reader would have met after the kill (empty: none)."""
    resumes: int = 0
    """Re-runs of the command until it exited 0."""
    completed: bool = False
    problems: list[str] = field(default_factory=list)
    """What the finished run got wrong against the uninterrupted one (empty: none)."""
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        """Completed, nothing partial read, equal to the uninterrupted run."""
        return self.completed and not self.partial_read and not self.problems


def run_trial(kind: Kind, folder: Path, ref: Path, index: int, aimed: bool, kill_at: float) -> Trial:
    """Kill one run of ``kind`` in ``folder`` (aimed or at ``kill_at``), check what it left, re-run it to the end
    and compare with the reference folder ``ref``."""
    t0 = time.perf_counter()
    trial = Trial(kind.name, index, aimed, kill_at)
    folder.mkdir(parents=True, exist_ok=True)
    log = folder / "log.txt"
    cmd, watch = kind.command(folder), kind.folders(folder)
    got = killed_run(cmd, folder, log, kill_at, watch, kind.aim if aimed else ())
    trial.killed, trial.killed_at = got["killed"], round(got["at"], 3)
    trial.left = temp_entries(watch)
    trial.inside_write = trial.killed and bool(trial.left)
    trial.partial_read = partial_files(watch) + kind.after_kill(folder)
    trial.completed = not trial.killed or kind.done(folder)  # finished before the kill: nothing to resume
    while not trial.completed and trial.resumes < MAX_RESUMES:
        trial.resumes += 1
        try:
            run_once(cmd, folder, log)
            trial.completed = True
        except KillBenchError as e:
            trial.problems.append(f"re-run {trial.resumes} failed: {str(e)[-600:]}")
    if trial.completed:
        trial.problems += kind.finished(folder, ref)
    trial.seconds = round(time.perf_counter() - t0, 2)
    return trial


def kill_times(duration: float, n: int, seed: int) -> list[float]:
    """``n`` kill times drawn uniformly over ``(0, duration)`` (seeded)."""
    rng = random.Random(seed)
    return [rng.uniform(0.0, duration) for _ in range(n)]


def run_kind(kind: Kind, root: Path, trials: int, seed: int, aim_every: int = AIM_EVERY,
             progress: bool = True) -> dict:
    """The uninterrupted reference run of ``kind`` then ``trials`` killed trials; the kind's row and trials."""
    t0 = time.perf_counter()
    ref = root / kind.name / "reference"
    ref.mkdir(parents=True, exist_ok=True)
    duration = run_once(kind.command(ref), ref, ref / "log.txt")
    times = kill_times(duration, trials, seed)
    rows = []
    for i in tqdm(range(trials), desc=f"kill {kind.name}", disable=not progress):
        aimed = aim_every > 0 and i % aim_every == 0
        folder = root / kind.name / f"trial-{i:02d}"
        rows.append(run_trial(kind, folder, ref, i, aimed, times[i] * (AIM_SPAN if aimed else 1.0)))
        shutil.rmtree(folder, ignore_errors=True)
    return {"kind": kind.name, "reference_seconds": round(duration, 2), "trials": [asdict(t) | {"ok": t.ok}
                                                                                   for t in rows],
            "seconds": round(time.perf_counter() - t0, 1)}


def summary_row(result: dict) -> dict:
    """One table row of a kind's result."""
    ts = result["trials"]
    return {"kind": result["kind"], "trials": len(ts), "killed": sum(t["killed"] for t in ts),
            "aimed": sum(t["aimed"] for t in ts), "inside_write": sum(t["inside_write"] for t in ts),
            "resumes": sum(t["resumes"] for t in ts), "ok": sum(t["ok"] for t in ts),
            "partial_reads": sum(bool(t["partial_read"]) for t in ts),
            "reference_seconds": result["reference_seconds"], "seconds": result["seconds"]}


CHECKS = {"train": "final weights bitwise equal + same metrics", "evaluate": "completed, no partial result read",
          "notebook": "completed, no partial result read"}
"""What ``ok`` means for each kind, in the table."""


def markdown(rows: list[dict]) -> str:
    """The results table."""
    lines = ["| kind | trials | killed | aimed at a write | kills inside a write | resumes | ok | check | "
             "partial reads | reference run (s) | wall (s) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kind']} | {r['trials']} | {r['killed']} | {r['aimed']} | {r['inside_write']} | "
                     f"{r['resumes']} | {r['ok']}/{r['trials']} | {CHECKS[r['kind']]} | {r['partial_reads']} | "
                     f"{r['reference_seconds']:.1f} | {r['seconds']:.1f} |")
    return "\n".join(lines) + "\n"


def run(trials: int = 10, out: str | Path = "runs/bench", kind_names: tuple[str, ...] = KINDS, seed: int = 0,
        work: str | Path | None = None, aim_every: int = AIM_EVERY, progress: bool = True) -> dict:
    """The benchmark: assets, then each kind's reference run and trials; writes ``kill.json`` and ``kill.md``
    under ``out`` and returns the JSON record."""
    unknown = [k for k in kind_names if k not in KINDS]
    if unknown:
        raise ValueError(f"unknown kind(s) {unknown}; allowed: {', '.join(KINDS)}")
    if trials < 1:
        raise ValueError(f"trials={trials}; allowed: >= 1")
    t0 = time.perf_counter()
    root = Path(work) if work else Path(tempfile.mkdtemp(prefix="repro-kill-"))
    try:
        assets = make_assets(root / "assets")
        every = kinds(assets)
        results = [run_kind(every[k], root, trials, seed + i, aim_every, progress) for i, k in enumerate(kind_names)]
    finally:
        if work is None:
            shutil.rmtree(root, ignore_errors=True)
    rows = [summary_row(r) for r in results]
    record = {"trials_per_kind": trials, "seed": seed, "aim_every": aim_every, "threads": 1, "rows": rows,
              "results": results, "seconds": round(time.perf_counter() - t0, 1)}
    out = Path(out)
    atomic_write_json(out / "kill.json", record)
    atomic_write_text(out / "kill.md", "# Real kills (SIGKILL) and resumes\n\n" + markdown(rows))
    return record


def main(argv: list[str] | None = None) -> int:
    """Command line: run the benchmark, print the table; exit 1 when any trial is not ok."""
    ap = argparse.ArgumentParser(prog="python -m repro.bench.kill", description=__doc__.split("\n\n")[0])
    ap.add_argument("--trials", type=int, default=10, help="killed trials per kind (default 10)")
    ap.add_argument("--out", default="runs/bench", help="where kill.json and kill.md go (default runs/bench)")
    ap.add_argument("--kinds", default=",".join(KINDS), help=f"comma-separated kinds (default {','.join(KINDS)})")
    ap.add_argument("--seed", type=int, default=0, help="seed of the kill times (default 0)")
    ap.add_argument("--work", default=None, help="keep the runs' folders here (default: a temporary folder)")
    ap.add_argument("--aim-every", type=int, default=AIM_EVERY,
                    help=f"every N-th trial is aimed at an artifact write (0: none; default {AIM_EVERY})")
    ap.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = ap.parse_args(argv)
    try:
        record = run(args.trials, args.out, tuple(k for k in args.kinds.split(",") if k), args.seed, args.work,
                     args.aim_every, not args.no_progress)
    except (ValueError, KillBenchError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(markdown(record["rows"]), end="")
    bad = [(t["kind"], t["index"], t["partial_read"] + t["problems"]) for r in record["results"]
           for t in r["trials"] if not t["ok"]]
    for kind, i, why in bad:
        print(f"not ok: {kind} trial {i}: {'; '.join(why)}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
