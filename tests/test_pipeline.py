"""End to end: every notebook runs in the smoke profile; caching, --only and bad input."""

import json
import subprocess
import sys
import time

import pytest

from repro.io import read_json
from repro.pipeline import NOTEBOOKS, REPO, reproduce
from repro.arms import extension_arms

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
    """``--paper selfdistill`` from an empty run folder: the stage folders it wrote (before anything else ran in that
    folder), the ids it indexed and its status. The full smoke run below reuses the folder, so the stages both need
    are trained once."""
    root = tmp_path_factory.mktemp("smoke")
    status = reproduce("smoke", run_dir=root / "runs", figures_dir=root / "figures-selfdistill", log=lambda *_: None,
                       paper="selfdistill")
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
    from repro.reports.index_check import DIRTY, check_index

    # every verdict carries the claim tests it was decided from, and says what they say (a dev checkout may be dirty)
    assert [q for q in check_index(index) if DIRTY not in q] == []
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
    assert time.perf_counter() - t0 < 5.0 < first


@pytest.mark.notebooks
def test_only_runs_one_notebook_and_force_recomputes(smoke_run):
    root, _, _ = smoke_run
    distances = sorted((root / "runs" / "smoke" / "eval").glob("attn-*.json"))  # the notebook's cached records
    before = {p: p.stat().st_mtime_ns for p in distances}
    status = reproduce("smoke", only="attention_distance", force=True, run_dir=root / "runs",
                       figures_dir=root / "figures", log=lambda *_: None)
    assert status == {"attention_distance": {"status": "ran", "seconds": status["attention_distance"]["seconds"]}}
    assert before and all(p.stat().st_mtime_ns != t for p, t in before.items())  # its cached stages ran again


def test_only_unknown_notebook_is_an_error(tmp_path):
    with pytest.raises(ValueError, match="--only 'nope' is not a notebook; allowed: "):
        reproduce("smoke", only="nope", run_dir=tmp_path, figures_dir=tmp_path)


def test_cli_unknown_profile_exits_2_with_message(tmp_path):
    r = subprocess.run([sys.executable, "-m", "repro", "reproduce", "--profile", "huge", "--run-dir", str(tmp_path)],
                       capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2
    assert "unknown profile 'huge'; allowed: smoke, tiny, paper" in r.stderr
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


def test_cli_unknown_paper_exits_2_with_message(tmp_path):
    r = subprocess.run([sys.executable, "-m", "repro", "reproduce", "--profile", "smoke", "--paper", "longlora",
                        "--run-dir", str(tmp_path)], capture_output=True, text=True, cwd=REPO)
    assert r.returncode == 2
    assert "paper='longlora'; allowed: all, longrecipe, selfdistill, cdt, prolong" in r.stderr
    assert not any(tmp_path.iterdir())


def _index_ids(figures) -> set[str]:
    return set(read_json(figures / "index.json"))


@pytest.mark.notebooks
def test_paper_longrecipe_writes_only_its_targets(smoke_run, tmp_path):
    root, _, _ = smoke_run  # stages cached by the full run: only the notebooks run again
    status = reproduce("smoke", run_dir=root / "runs", figures_dir=tmp_path, log=lambda *_: None, paper="longrecipe")
    assert list(status) == ["positions", "training", "token_analysis", "evaluation"]
    ids = _index_ids(tmp_path)
    assert {"LR-Fig2", "LR-Alg1", "LR-Fig3", "LR-Tab1", "LR-Tab2", "LR-Tab3", "LR-Tab4", "LR-Tab6", "LR-Cost",
            "TB-BaseLoss", "TB-ExtLoss", "TB-NIAH"} <= ids
    assert all(i.startswith(("LR-", "TB-")) for i in ids), ids


@pytest.mark.notebooks
def test_paper_selfdistill_trains_only_the_shared_testbed(selfdistill_run):
    _, status, stage_dirs, ids = selfdistill_run
    assert list(status) == ["training", "evaluation", "attention_distance"]
    # no LongRecipe arm, replay or analysis (data-flt: the FLT batches prepared before its training); FLT's
    # training-seed replicate (smoke: extend.replicate_arms = flt, 2 seeds); every self-distillation arm
    rp = [a for a in extension_arms("smoke", "selfdistill") if a.startswith("rp_")]
    assert "rp_skip@seed1" in rp and "rp_nope" in rp
    assert stage_dirs == {"corpus", "base", "data-flt", "extend-flt", "data-flt@seed1", "extend-flt@seed1", "eval",
                          "notebooks", *(f"{k}-{a}" for a in rp for k in ("data", "extend"))}
    assert {"TB-BaseLoss", "TB-ExtLoss", "TB-NIAH", "RP-Tab1/2", "RP-Fig1a", "RP-Tab14", "RP-Tab15", "RP-Fig2"} <= ids
    assert all(i.startswith(("RP-", "TB-")) for i in ids), ids


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
