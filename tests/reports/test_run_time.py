"""Where a run's wall-clock went: cells to papers by the ids they name, the arms' training cell by step seconds."""

import json

import pytest

from repro.reports.run_time import SHARED, main, markdown, run_time


def _nb(*cells):
    """An executed notebook of ``(kind, source, seconds)`` cells."""
    return {"cells": [{"cell_type": kind, "source": src, "metadata": {"papermill": {"duration": secs}}}
                      for kind, src, secs in cells], "metadata": {}}


def _arm(root, arm, *secs):
    d = root / f"extend-{arm}-0123456789ab"
    d.mkdir()
    (d / "metrics.jsonl").write_text("".join(json.dumps({"step": i, "seconds": s}) + "\n" for i, s in enumerate(secs)))


@pytest.fixture
def run(tmp_path):
    root = tmp_path / "runs" / "tiny"
    (root / "notebooks").mkdir(parents=True)
    training = _nb(("markdown", "# Training", None), ("code", "p = get_profile(profile)", 2.0),
                   ("markdown", "## Context extension", None),
                   ("code", "paths = stages.train_arms(p, METHODS, run_dir)", 100.0),
                   ("markdown", "## RP-Cost: the step time", None), ("code", "if rec.wants('RP-Cost'):\n    x()", 10.0),
                   ("markdown", "## LR-Cost", None), ("code", "if rec.wants('LR-Cost'):\n    y()", 3.0))
    evaluation = _nb(("code", "SUITE = rec.wants('RP-Tab1/2') or rec.wants('CD-Tab2')", 1.0),  # two papers: shared
                     ("markdown", "## CD-Tab2: CE, LongCE and CDT", None), ("code", "done = evaluate(cd_names)", 5.0),
                     ("markdown", "## The suite", None), ("code", "suite = evaluate(names)", 7.0))
    positions = _nb(("code", "samples = sample(corpus)", 3.0),  # a notebook of one paper owns its other cells
                    ("markdown", "## LR-Fig2: distances", None), ("code", "rows = fig2()", 4.0))
    for name, nb in (("training", training), ("evaluation", evaluation), ("positions", positions)):
        (root / "notebooks" / f"{name}.ipynb").write_text(json.dumps(nb))
    (root / "notebooks" / "training.done.json").write_text(json.dumps({"seconds": 120.0}))  # 5 s beyond its cells
    for arm, secs in (("flt", (4.0, 6.0)), ("rp_skip", (20.0,)), ("cdt", (30.0,)), ("pose", (40.0,))):
        _arm(root, arm, *secs)
    return root


def test_cells_go_to_the_paper_they_name_and_training_by_step_seconds(run):
    t = run_time(run)
    assert t["notebooks"] == {"evaluation": 13.0, "positions": 7.0, "training": 120.0}
    # training: 100 s split 10:20:30:40 over flt (shared), rp_skip, cdt, pose (LongRecipe's extension arms)
    assert t["papers"] == pytest.approx({"longrecipe": 40.0 + 3.0 + 7.0, "selfdistill": 20.0 + 10.0, "cdt": 30.0 + 5.0,
                                         SHARED: 10.0 + 2.0 + 5.0 + 1.0 + 7.0})
    assert list(t["papers"]) == ["longrecipe", "selfdistill", "cdt", SHARED]
    assert sum(t["papers"].values()) == pytest.approx(t["total"]) == 140.0
    assert "| longrecipe | 0.8 |" in markdown(t) and "total: 2.3 minutes" in markdown(t)
    # the arms' own step seconds per paper (what training them takes from an empty folder), cached or not
    assert t["trained"] == pytest.approx({"longrecipe": 40.0, "selfdistill": 20.0, "cdt": 30.0, SHARED: 10.0})
    assert "| cdt | 0.5 |" in markdown(t).split("training steps, as recorded")[1]
    assert "training steps in all: 1.7 minutes" in markdown(t)


def test_the_command_names_a_run_without_notebooks(tmp_path, capsys, run):
    assert main([str(run.parent), "--profile", "tiny"]) == 0
    assert "| training | 2.0 |" in capsys.readouterr().out
    with pytest.raises(SystemExit):
        main([str(tmp_path), "--profile", "smoke"])
    assert f"{tmp_path / 'smoke' / 'notebooks'}: no executed notebooks" in capsys.readouterr().err
