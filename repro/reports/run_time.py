"""Where a ``reproduce`` run's wall-clock went: seconds per notebook, and per paper.

Read from what the run leaves in ``<run_dir>/<profile>/``: each executed notebook's cell durations (papermill's
``metadata.papermill.duration``) and each trained arm's step seconds (``extend-<arm>-<key>/metrics.jsonl``). A code
cell belongs to the paper whose target ids (``LR-``, ``RP-``, ``CD-``, ``PL-``: :mod:`repro.papers`) its source and
its section heading name, when they name one paper; a cell of a notebook whose ids all belong to one paper belongs
to that paper; any other cell (set-up, the corpus, the base, the evaluation suite the papers share) is the shared
testbed's. The cell that trains the extension arms side by side is split in proportion to each arm's step seconds,
an arm belonging to the paper whose builder makes it (:data:`repro.arms.ARMS`; FLT, the testbed's baseline, to none).

``python -m repro.reports.run_time [RUN_DIR] [--profile tiny]`` prints both tables as markdown (README's main-job
time comes from it).
"""

from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict
from pathlib import Path
from typing import Iterator, Mapping, Sequence

from repro.arms import builder_of
from repro.methods.armspec import split_seed
from repro.io import read_jsonl
from repro.papers import PAPERS, paper_of

SHARED = "shared testbed"
"""The row of what no one paper owns: set-up, corpus, base model, FLT, the shared evaluation suite."""
TRAIN_CELL = "stages.train_arms("
"""The call that trains the extension arms side by side (the training notebook's context-extension cell)."""
TARGET_ID = re.compile(r"\b(?:" + "|".join(PAPERS.values()) + r")-[A-Za-z0-9]")
"""The start of a paper's target id (``LR-Tab1``, ``RP-Fig4``, ...)."""
TESTBED_ARMS = ("flt",)
"""Extension arms of the shared testbed (the baseline every paper compares with)."""


def papers_named(text: str) -> set[str]:
    """The papers whose target ids ``text`` names."""
    return {paper_of(m.group(0)) for m in TARGET_ID.finditer(text)}


def code_cells(nb: Mapping) -> Iterator[tuple[str, str, float]]:
    """``(section heading, source, seconds)`` of each executed code cell, the heading being the last markdown
    heading above it (papermill's injected parameters cell included, with the first section)."""
    heading = ""
    for cell in nb["cells"]:
        src = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
        if cell["cell_type"] == "markdown":
            heads = [ln for ln in src.splitlines() if ln.startswith("#")]
            heading = heads[-1] if heads else heading
        elif cell["cell_type"] == "code":
            yield heading, src, float(cell.get("metadata", {}).get("papermill", {}).get("duration") or 0.0)


def arm_paper(arm: str) -> str:
    """The paper an extension arm belongs to (its builder's module), or :data:`SHARED` for the testbed's arms."""
    if split_seed(arm)[0] in TESTBED_ARMS:
        return SHARED
    module = builder_of(arm).__module__.rsplit(".", 1)[-1]
    return {"extension": "longrecipe", "selfdistill": "selfdistill", "cdt": "cdt", "prolong": "prolong"}[module]


def arm_seconds(stage_root: Path) -> dict[str, float]:
    """Step seconds of each trained extension arm under ``stage_root`` (the newest stage folder of each arm)."""
    out: dict[str, tuple[float, float]] = {}
    for d in stage_root.glob("extend-*"):
        metrics = d / "metrics.jsonl"
        if not metrics.exists():
            continue
        arm = d.name[len("extend-"):].rsplit("-", 1)[0]
        secs = sum(row.get("seconds", 0.0) for row in read_jsonl(metrics))
        if arm not in out or d.stat().st_mtime > out[arm][0]:
            out[arm] = (d.stat().st_mtime, secs)
    return {a: s for a, (_, s) in sorted(out.items())}


def run_time(stage_root: Path) -> dict:
    """``{"notebooks": {name: seconds}, "papers": {paper or SHARED: seconds}, "total": seconds, "trained": {paper or
    SHARED: seconds}}`` of the run whose stages and executed notebooks are in ``stage_root``
    (``<run_dir>/<profile>``). A notebook's seconds are its recorded wall-clock (``<name>.done.json``, kernel start
    and saving included) where there is one, else the sum of its cells; what a notebook took beyond its cells counts
    to :data:`SHARED`, so the papers add up to the total. ``trained`` is each paper's extension arms' step seconds as
    recorded when they trained: what a run from an empty folder spends training them (summed over arms that train
    side by side), also when this run took them from the cache."""
    notebooks: dict[str, float] = {}
    papers: dict[str, float] = defaultdict(float)
    arms = arm_seconds(stage_root)
    trained = sum(arms.values())
    for path in sorted((stage_root / "notebooks").glob("*.ipynb")):
        if path.name.startswith("."):
            continue
        cells = list(code_cells(json.loads(path.read_text())))
        in_cells = sum(s for *_, s in cells)
        done = path.with_name(f"{path.stem}.done.json")
        notebooks[path.stem] = json.loads(done.read_text())["seconds"] if done.exists() else in_cells
        papers[SHARED] += max(0.0, notebooks[path.stem] - in_cells)
        named = set().union(*(papers_named(h + src) for h, src, _ in cells))
        own = named.pop() if len(named) == 1 else SHARED  # a notebook of one paper owns its set-up cells
        for heading, src, secs in cells:
            if TRAIN_CELL in src and trained > 0:
                for arm, s in arms.items():
                    papers[arm_paper(arm)] += secs * s / trained
                continue
            which = papers_named(heading + src)
            papers[which.pop() if len(which) == 1 else own] += secs
    steps: dict[str, float] = defaultdict(float)
    for arm, s in arms.items():
        steps[arm_paper(arm)] += s
    order = [*PAPERS, SHARED]
    return {"notebooks": notebooks, "papers": {k: papers[k] for k in order if k in papers},
            "total": sum(notebooks.values()), "trained": {k: steps[k] for k in order if k in steps}}


def markdown(times: Mapping) -> str:
    """The tables of :func:`run_time`, minutes to one decimal: this run per notebook and per paper, then the
    recorded training steps per paper."""
    lines = ["| notebook | minutes |", "|---|---:|"]
    lines += [f"| {n} | {s / 60:.1f} |" for n, s in times["notebooks"].items()]
    lines += ["", "| paper | minutes |", "|---|---:|"]
    lines += [f"| {n} | {s / 60:.1f} |" for n, s in times["papers"].items()]
    lines += ["", f"total: {times['total'] / 60:.1f} minutes"]
    if times.get("trained"):
        lines += ["", "| paper | extension arms' training steps, as recorded (minutes) |", "|---|---:|"]
        lines += [f"| {n} | {s / 60:.1f} |" for n, s in times["trained"].items()]
        lines += ["", f"training steps in all: {sum(times['trained'].values()) / 60:.1f} minutes"]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro.reports.run_time", description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", nargs="?", default="runs", help="the run folder of reproduce (default: runs)")
    ap.add_argument("--profile", default="tiny", help="the profile whose run to read (default: tiny)")
    args = ap.parse_args(argv)
    root = Path(args.run_dir) / args.profile
    if not (root / "notebooks").is_dir():
        ap.error(f"{root / 'notebooks'}: no executed notebooks (run python -m repro reproduce "
                 f"--profile {args.profile} --run-dir {args.run_dir} first)")
    print(markdown(run_time(root)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
