"""End to end: every notebook runs in the smoke profile; caching, --only and bad input."""

import csv
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import replace

import nbformat
import pytest

from repro.__main__ import main
from repro.bench import kill
from repro.io import read_json
from repro.manifest import environment
from repro.arms import extension_arms
from repro.determinism import compare_file, run_files
from repro.figures_index import render_pages
from repro.pipeline import INJECTED_CELL_ID, NOTEBOOKS, REPO, publish_notebook, reproduce, strip_machine_paths
from repro.notebook import PROFILE_ENV, RUN_DIR_ENV, SCRATCH, figures_folder
from repro.targets import get_target

MAX_STREAMS = 40
"""Stream outputs (print and log lines, text progress bars) an executed smoke notebook may hold."""

SMOKE_FIGURES = {"TB-BaseLoss.png", "TB-ExtLoss.png", "TB-NIAH.png", "TB-NIAH.csv", "TB-NIAH.md",
                 "LR-Fig2.png", "LR-Fig2.csv", "LR-Alg1.png", "INDEX.md", "index.json",
                 "LR-Tab1.csv", "LR-Tab1.md", "RP-Tab1-2.csv", "RP-Tab1-2.md", "RP-Tab1-2.png",
                 "RP-Tab1-2-lengths.csv", "RP-Fig1a.png", "RP-Fig1a.csv", "CD-Tab2.csv", "CD-Tab2.png",
                 "RP-Tab14.csv", "RP-Tab15.csv", "RP-Tab4-5.csv", "RP-Fig2.png", "RP-Fig2.csv", "RP-Fig2-hist.csv"}
EVAL_TARGETS = ("LR-Tab1", "RP-Tab1/2", "RP-Fig1a", "CD-Tab2", "RP-Tab14", "RP-Tab15", "RP-Tab4/5")
CD_TARGETS = ("CD-TaskB", "CD-Fig3", "CD-Fig4", "CD-Fig5", "CD-Fig7", "CD-Fig8", "CD-Fig10", "CD-Fig14", "CD-Mem",
              "CD-Cost")
PL_TARGETS = ("PL-Tab3", "PL-Fig1", "PL-Fig3", "PL-Tab7", "PL-Tab15", "PL-Tab18", "PL-Tab20")


@pytest.fixture(scope="module")
def selfdistill_run(tmp_path_factory):
    """``--paper selfdistill --only training`` from an empty run folder: the stage folders it wrote (before anything
    else ran in that folder), the ids it indexed and its status. The full smoke run below reuses the folder, so the
    stages both need are trained once (which notebooks a paper runs: test_paper_selects_its_notebooks)."""
    root = tmp_path_factory.mktemp("smoke")
    status = reproduce("smoke", run_dir=root / "runs", figures_dir=root / "figures-selfdistill", log=lambda *_: None,
                       paper="selfdistill", only="training")
    stage_dirs = {p.name.rsplit("-", 1)[0] for p in (root / "runs" / "smoke").iterdir()}
    return root, status, stage_dirs, _index_ids(root / "figures-selfdistill")


@pytest.fixture(scope="module")
def smoke_run(selfdistill_run):
    root = selfdistill_run[0]
    t0 = time.perf_counter()
    status = reproduce("smoke", run_dir=root / "runs", figures_dir=root / "figures", log=lambda *_: None)
    return root, status, time.perf_counter() - t0


@pytest.mark.notebooks
def test_smoke_reproduce_writes_every_figure_and_the_index(smoke_run):
    root, status, _ = smoke_run
    assert set(status) == {s.name for s in NOTEBOOKS}
    assert all(s["status"] == "ran" for s in status.values())
    figs = {p.name for p in (root / "figures").iterdir()}
    assert SMOKE_FIGURES <= figs
    index = read_json(root / "figures" / "index.json")
    for tid in ("TB-BaseLoss", "TB-ExtLoss", "TB-NIAH", "TB-Base", "LR-Fig2", "LR-Alg1", "RP-Fig2", *EVAL_TARGETS,
                *CD_TARGETS, *PL_TARGETS):
        assert index[tid]["profile"] == "smoke" and index[tid]["ours"], tid
        for f in index[tid]["files"]:
            assert (root / "figures" / f).exists()
    for tid in (*EVAL_TARGETS, *CD_TARGETS, *PL_TARGETS):
        assert index[tid]["agrees"] in {"yes", "no", "partly", "tie within noise", "n/a"}, tid
    from repro.provenance import code_commit

    assert len({row["run"] for row in index.values()}) == 1  # one reproduce wrote every row ...
    assert {row["commit"] for row in index.values()} == {code_commit()}  # ... from this checkout's code
    assert "## What this run shows" in (root / "figures" / "INDEX.md").read_text()
    run = read_json(root / "figures" / "wall_time.json")  # the run's wall time, stated with its provenance
    assert {row["run"] for row in index.values()} == {run["run"]} and set(run["notebooks"]) == set(status)
    assert f"wall time {run['seconds'] / 60:.1f} minutes" in (root / "figures" / "INDEX.md").read_text()
    from repro.reports.index_check import DIRTY, check_index

    # every verdict carries the claim tests it was decided from, and says what they say (a dev checkout may be dirty)
    assert [q for q in check_index(index) if DIRTY not in q] == []
    with open(root / "figures" / "CD-Mem.csv") as f:  # one child process per row (repro.analysis.ig_memory.sweep)
        mem = list(csv.DictReader(f))
    assert [(r["method"], r["length"], r["status"]) for r in mem] == [("ours", "128", "ok"), ("naive", "128", "ok")]
    assert all(float(r["peak_mib"]) > 0 and float(r["seconds"]) > 0 and r["delta_mib"] for r in mem)
    tidy = root / "runs" / "smoke" / "eval" / "results-tidy.csv"
    assert tidy.exists() and "n/a (min length" in tidy.read_text()  # smoke lengths are too short for some tasks
    # executed notebooks are kept in the run directory, with outputs
    for s in NOTEBOOKS:
        nb = json.loads((root / "runs" / "smoke" / "notebooks" / f"{s.name}.ipynb").read_text())
        assert any(c.get("outputs") for c in nb["cells"] if c["cell_type"] == "code")
    assert not list((root / "runs" / "smoke" / "notebooks").glob(".*running*"))


@pytest.mark.notebooks
def test_second_run_is_cached_and_fast(smoke_run):
    root, _, first = smoke_run
    t0 = time.perf_counter()
    status = reproduce("smoke", run_dir=root / "runs", figures_dir=root / "figures", log=lambda *_: None)
    assert all(s["status"] == "cached" for s in status.values())
    assert time.perf_counter() - t0 < first / 10  # a cache check, not a rerun (a bound that holds under load)


@pytest.mark.notebooks
def test_only_runs_one_notebook_and_force_recomputes(smoke_run):
    root, _, _ = smoke_run
    analysis = sorted((root / "runs" / "smoke").glob("analysis-*/summary.json"))  # the notebook's cached stage
    before = {p: p.stat().st_mtime_ns for p in analysis}
    status = reproduce("smoke", only="token_analysis", force=True, run_dir=root / "runs",
                       figures_dir=root / "figures", log=lambda *_: None)
    assert status == {"token_analysis": {"status": "ran", "seconds": status["token_analysis"]["seconds"]}}
    assert before and all(p.stat().st_mtime_ns != t for p, t in before.items())  # its cached stage ran again


@pytest.mark.slow
@pytest.mark.notebooks
def test_a_killed_positions_run_leaves_nothing_finished_and_reruns_to_the_same_bytes(smoke_run):
    """``python -m repro reproduce --only positions`` on a copy of the smoke run's folder without the notebook's stamp
    (the notebook caches nothing else), SIGKILLed at its first figure or index write (:mod:`repro.bench.kill`, a
    known point late in the run): no executed notebook or stamp reads as finished and every JSON parses; the same
    command then completes. Same seed, same bytes (:mod:`repro.determinism`): every file of the copy equals the smoke
    run's up to its volatile fields, and the figures and tables equal the smoke run's byte for byte (a training stage
    from scratch in two processes: tests/test_determinism.py)."""
    root, _, _ = smoke_run
    again = root / "again"
    shutil.copytree(root / "runs", again / "runs")
    (again / "runs" / "smoke" / "notebooks" / "positions.done.json").unlink()
    aim = (".LR-", ".index.", ".INDEX.")  # the figure files' and the index's hidden temporaries
    kind = replace(kill.kinds({})["notebook"], aim=aim,
                   folders=lambda d: [d / "runs" / "smoke" / "notebooks", d / "figures"])  # not the whole copy
    trial = kill.run_trial(kind, again, root / "no-reference", 0, True, 0.0)
    assert trial.killed and trial.ok and not trial.partial_read and trial.resumes == 1, trial
    rels = run_files(root / "runs")
    assert rels == run_files(again / "runs")
    assert [d for rel in rels for d in compare_file(rel, root / "runs" / rel, again / "runs" / rel, root, again)] == []
    figures = sorted(p.name for p in (again / "figures").iterdir() if p.suffix in (".png", ".pdf", ".csv", ".md"))
    assert "LR-Fig2.png" in figures and "LR-Fig2.csv" in figures
    pages = set(render_pages(read_json(again / "figures" / "index.json")))  # INDEX.md and the pages name their run
    assert [f for f in figures if f not in pages
            and (root / "figures" / f).read_bytes() != (again / "figures" / f).read_bytes()] == []
    nb = again / "runs" / "smoke" / "notebooks"
    assert set(read_json(nb / "positions.done.json")["environment"]) == set(environment())
    cells = json.loads((nb / "positions.ipynb").read_text())["cells"]
    assert [c["id"] for c in cells if "injected-parameters" in c["metadata"].get("tags", [])] == [INJECTED_CELL_ID]


def test_only_unknown_notebook_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="--only 'nope' is not a notebook; allowed: "):
        reproduce("smoke", only="nope", run_dir=tmp_path, figures_dir=tmp_path)


def test_cli_unknown_profile_exits_2_with_message(tmp_path, capsys):
    assert main(["reproduce", "--profile", "huge", "--run-dir", str(tmp_path)]) == 2
    assert "unknown profile 'huge'; allowed: smoke, tiny, paper" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_missing_checkpoint_is_a_clear_error(tmp_path):
    from repro.stages import checkpoint_path

    with pytest.raises(FileNotFoundError, match="checkpoint 'flt' for profile 'smoke' not found"):
        checkpoint_path("smoke", "flt", tmp_path)


def test_notebooks_are_committed_clean():
    for path in sorted((REPO / "notebooks").glob("*.ipynb")):
        nb = json.loads(path.read_text())
        assert nb["metadata"]["kernelspec"]["name"] == "python3", path
        code = [c for c in nb["cells"] if c["cell_type"] == "code"]
        assert all(not c.get("outputs") and c.get("execution_count") is None for c in code), f"{path} has outputs"
        assert "parameters" in code[0].get("metadata", {}).get("tags", []), f"{path}: first code cell not tagged"
        src = "".join(code[0]["source"])
        assert "profile: str" in src and "figures_dir: str" in src


def test_committed_figures_index_lists_existing_files():
    index_path = REPO / "figures" / "index.json"
    if not index_path.exists():
        pytest.skip("no committed figures yet")
    index = read_json(index_path)
    for tid, row in index.items():
        assert row["profile"] == "tiny", tid
        for f in row["files"]:
            assert (REPO / "figures" / f).exists(), f
    assert (REPO / "figures" / "INDEX.md").exists()


def test_paper_selects_its_notebooks():
    from repro.pipeline import _order, notebook_specs

    specs = notebook_specs(REPO / "notebooks")
    names = lambda paper: [s.name for s in _order(specs, None, paper)]  # noqa: E731
    assert names("all") == [s.name for s in NOTEBOOKS]
    assert names("longrecipe") == ["positions", "training", "token_analysis", "evaluation"]
    assert names("selfdistill") == ["training", "evaluation", "attention_distance"]
    assert names("cdt") == ["training", "evaluation", "ig_scores", "attention_distance"]
    assert names("prolong") == ["training", "evaluation"]
    with pytest.raises(ValueError, match="--only 'token_analysis' produces nothing for --paper 'cdt'; allowed with"):
        _order(specs, "token_analysis", "cdt")


def test_a_profile_that_trains_nothing_runs_only_its_notebooks_and_trains_no_arm():
    from repro.pipeline import _order, default_figures_dir, notebook_specs
    from repro.profiles import TRAIN_PROFILES, get_profile

    specs = notebook_specs(REPO / "notebooks")
    smol, tiny = get_profile("smol"), get_profile("tiny")
    assert smol.real.enabled and not tiny.real.enabled
    assert smol.model.pretrained == smol.tokenizer.pretrained == "smollm2-135m-instruct"
    as_is = ["evaluation", "ig_scores", "attention_distance"]
    assert [s.name for s in _order(specs, None, "all", smol)] == as_is
    assert [s.name for s in _order(specs, None, "cdt", smol)] == ["evaluation", "ig_scores", "attention_distance"]
    assert [s.name for s in _order(specs, None, "prolong", smol)] == ["evaluation"]
    assert [s.name for s in _order(specs, None, "all", tiny)] == [s.name for s in NOTEBOOKS]
    with pytest.raises(ValueError, match=r"--only 'training' has nothing to do for --profile 'smol' \(it trains "
                                         r"nothing\); allowed: evaluation, ig_scores, attention_distance"):
        _order(specs, "training", "all", smol)
    assert extension_arms(smol) == () and "smol" not in TRAIN_PROFILES  # train --profile smol: not a training profile
    assert default_figures_dir("smol") == REPO / "figures" / "smol"
    with pytest.raises(ValueError, match="real.enabled=True needs model.pretrained"):
        tiny.override(real={"enabled": True})
    with pytest.raises(ValueError, match=r"real.scalings entry 'yarn:1'; allowed: none, linear:F, dynamic:F or yarn:F "
                                         r"with F > 1"):
        smol.override(real={"scalings": ("none", "yarn:1")})
    with pytest.raises(ValueError, match="real.chat_template='maybe'; allowed: auto, on, off"):
        smol.override(real={"chat_template": "maybe"})


def test_cli_unknown_paper_exits_2_with_message(tmp_path, capsys):
    assert main(["reproduce", "--profile", "smoke", "--paper", "longlora", "--run-dir", str(tmp_path)]) == 2
    assert "paper='longlora'; allowed: all, longrecipe, selfdistill, cdt, prolong" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def _index_ids(figures) -> set[str]:
    return set(read_json(figures / "index.json"))


@pytest.mark.notebooks
def test_paper_selfdistill_trains_only_the_shared_testbed(selfdistill_run):
    _, status, stage_dirs, ids = selfdistill_run
    assert list(status) == ["training"]
    # no LongRecipe arm, replay or analysis (data-flt: the FLT batches prepared before its training); FLT's
    # training-seed replicate (smoke: extend.replicate_arms = flt, 2 seeds); every self-distillation arm
    rp = [a for a in extension_arms("smoke", "selfdistill") if a.startswith("rp_")]
    assert "rp_skip@seed1" in rp and "rp_nope" in rp
    assert stage_dirs == {"corpus", "base", "data-flt", "extend-flt", "data-flt@seed1", "extend-flt@seed1",
                          "notebooks", "bench", *(f"{k}-{a}" for a in rp for k in ("data", "extend"))}  # bench: RP-Cost
    assert ids == {"TB-BaseLoss", "TB-ExtLoss", "RP-Cost"}  # the training notebook's targets of the paper


def test_a_run_into_the_committed_figures_rewrites_the_stale_paper_pages(tmp_path, monkeypatch):
    """``reproduce`` into ``figures/`` rewrites the doc pages whose results blocks no longer match the records; a
    run into any other folder leaves the docs alone."""
    from repro import pipeline
    from repro.reports import paper_pages

    page = tmp_path / "page.md"
    page.write_text("old")
    asked = []

    def stale(repo, figures):
        asked.append(figures)
        return {page: "new"}

    monkeypatch.setattr(paper_pages, "stale", stale)
    monkeypatch.setattr(pipeline, "REPO", tmp_path)
    (tmp_path / "figures").mkdir()
    assert pipeline.refresh_paper_pages(tmp_path / "elsewhere", log=lambda *_: None) == [] and not asked
    logged = []
    assert pipeline.refresh_paper_pages(tmp_path / "figures", log=logged.append) == [page]
    assert page.read_text() == "new" and asked == [tmp_path / "figures"] and "page.md" in logged[0]


def _outputs(nb, kind: str) -> list:
    return [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []) if o.output_type == kind]


@pytest.mark.notebooks
def test_executed_smoke_notebooks_show_every_figure_inline_and_stay_quiet(smoke_run):
    """The smoke reproduce's executed notebooks: at least one inline PNG per figure each one saves (by the index's
    rows of its targets), tables rendered as Markdown, at most MAX_STREAMS stream outputs, no per-load bars of
    transformers and no DeepSpeed accelerator warning; the first output says where the figures go."""
    root, _, _ = smoke_run
    index = read_json(root / "figures" / "index.json")
    for s in NOTEBOOKS:
        nb = nbformat.read(root / "runs" / "smoke" / "notebooks" / f"{s.name}.ipynb", as_version=4)
        saved = [f for tid, row in index.items() if get_target(tid).notebook == s.name
                 for f in row["files"] if f.endswith(".png")]
        shown = [o for o in _outputs(nb, "display_data") if "image/png" in o.get("data", {})]
        assert saved and len(shown) >= len(saved), (s.name, len(shown), saved)
        tables = [f for tid, row in index.items() if get_target(tid).notebook == s.name
                  for f in row["files"] if f.endswith(".csv")]
        rendered = [o for o in _outputs(nb, "display_data") if "text/markdown" in o.get("data", {})]
        assert len(rendered) >= len(tables), (s.name, len(rendered), tables)
        streams = _outputs(nb, "stream")
        assert len(streams) <= MAX_STREAMS, (s.name, len(streams))
        text = "".join(o.text for o in streams)
        assert "Loading weights" not in text and "Writing model shards" not in text, s.name
        assert "Setting accelerator to CPU" not in text, s.name
        first = next(o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", []))
        assert first.output_type == "stream" and "figures and tables go to" in first.text, (s.name, first)


@pytest.mark.slow
@pytest.mark.notebooks
def test_notebooks_run_all_under_nbval_and_leave_the_committed_figures_alone(smoke_run):
    """Every notebook as a user runs it: "Run All" in a plain kernel (nbval, no papermill), the smoke profile and
    the smoke run's folder (its stages cached) from the environment, every other parameter its default: every
    cell runs, the figures go to figures/smoke/ (ignored by git) and the committed figures/ stays as it was."""
    root, _, _ = smoke_run
    before = subprocess.run(["git", "status", "--porcelain", "figures/"], capture_output=True, text=True, cwd=REPO)
    env = {**os.environ, PROFILE_ENV: "smoke", RUN_DIR_ENV: str(root / "runs"), "PYTHONPATH": str(REPO)}
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
                        *(f"notebooks/{s.name}.ipynb" for s in NOTEBOOKS)],
                       capture_output=True, text=True, cwd=REPO, env=env)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
    after = subprocess.run(["git", "status", "--porcelain", "figures/"], capture_output=True, text=True, cwd=REPO)
    assert before.returncode == 0 and after.stdout == before.stdout
    index = read_json(REPO / "figures" / "smoke" / "index.json")  # where a smoke notebook run on its own writes
    assert {row["profile"] for row in index.values()} == {"smoke"}


def test_a_notebook_run_on_its_own_writes_to_a_scratch_folder(tmp_path):
    assert figures_folder("", "tiny", tmp_path) == tmp_path / "tiny" / SCRATCH
    assert figures_folder("", "smoke", tmp_path) == REPO / "figures" / "smoke"
    assert figures_folder(str(tmp_path / "f"), "tiny", tmp_path) == tmp_path / "f"  # reproduce passes its own


def test_executed_notebooks_are_published_without_machine_paths(tmp_path, monkeypatch):
    """Only a run into the repository's own figures/ copies its executed notebooks to figures/notebooks/, with the
    run directory, the checkout, the Python environment and the home folder replaced."""
    from repro import pipeline

    monkeypatch.setattr(pipeline, "REPO", tmp_path / "repo")
    run_dir = tmp_path / "runs"
    executed = run_dir / "tiny" / "notebooks" / "positions.ipynb"
    executed.parent.mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        f"run_dir = {str(run_dir)!r}", outputs=[nbformat.v4.new_output(
            "stream", text=f"{tmp_path / 'repo' / 'figures'}\n{sys.prefix}/lib/x.py:1: warning\n")])])
    executed.write_text(nbformat.writes(nb))
    assert publish_notebook(executed, tmp_path / "elsewhere", run_dir, log=lambda *_: None) is None
    out = publish_notebook(executed, tmp_path / "repo" / "figures", run_dir, log=lambda *_: None)
    assert out == tmp_path / "repo" / "figures" / "notebooks" / "positions.ipynb"
    text = out.read_text()
    assert str(tmp_path) not in text and sys.prefix not in text
    cell = nbformat.reads(text, as_version=4).cells[0]
    assert cell.source == "run_dir = 'runs'" and cell.outputs[0].text == "./figures\n<env>/lib/x.py:1: warning\n"
    assert strip_machine_paths("no paths", run_dir) == "no paths"


def test_progress_bars_of_an_executed_notebook_keep_their_final_line():
    """Papermill stores a widget bar's first line (0%); the executed copy gets the final one from the widget state."""
    from repro.pipeline import WIDGET_STATE, WIDGET_VIEW, final_bar_lines

    def model(name, **state):
        return {"model_name": name, "state": state}

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell("x", outputs=[nbformat.v4.new_output(
        "display_data", data={WIDGET_VIEW: {"model_id": "box"}, "text/plain": "train flt:   0%|   | 0/3"})])])
    nb.metadata["widgets"] = {WIDGET_STATE: {"state": {
        "box": model("HBoxModel", children=["IPY_MODEL_l", "IPY_MODEL_b", "IPY_MODEL_r"]),
        "l": model("HTMLModel", value="train\u2007flt:\u2007100%"), "b": model("FloatProgressModel", value=3, max=3),
        "r": model("HTMLModel", value="\u20073/3\u2007[00:01&lt;00:00]")}}}
    assert final_bar_lines(nb) == 1
    assert nb.cells[0].outputs[0].data["text/plain"] == "train flt: 100%| 3/3 [00:01<00:00]"


def test_a_cost_benchmark_is_timed_once_per_code_version(tmp_path):
    from repro.notebook import measured, measured_before
    from repro.profiles import get_profile

    p, calls = get_profile("smoke"), []

    def measure():
        calls.append(1)
        return {"seconds": [0.5, 0.25]}

    assert measured("RP-Cost", p, tmp_path, False, measure, rows=True) == {"seconds": [0.5, 0.25]}
    assert measured("RP-Cost", p, tmp_path, False, measure, rows=True) == {"seconds": [0.5, 0.25]} and calls == [1]
    measured("RP-Cost", p, tmp_path, False, measure, rows=False)  # another key: measured again
    measured("RP-Cost", p, tmp_path, True, measure, rows=True)  # force: measured again
    saved = sorted((tmp_path / "smoke" / "bench").glob("RP-Cost-*"))
    assert calls == [1, 1, 1] and len(saved) == 2 and all(f.suffix == ".json" for f in saved)  # JSON, never pickle
    # another notebook reads what was measured on this code version, and nothing where nothing was
    assert measured_before("RP-Cost", p, tmp_path, rows=True) == {"seconds": [0.5, 0.25]}
    assert measured_before("RP-Cost", p, tmp_path, rows="other") is None and calls == [1, 1, 1]
