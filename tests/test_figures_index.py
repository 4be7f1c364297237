"""The figures index as a researcher reads it (:mod:`repro.figures_index`): provenance once, compact rows with links
to each target's full record, no cell over the limit, pages held to the records by ``index_check``."""

import re

import pytest

from repro.figures import Recorder
from repro.figures_index import MAX_CELL, OTHER, anchor, render_pages
from repro.io import read_json
from repro.provenance import COMMIT_ENV, RUN_ENV
from repro.reports.index_check import check_pages, table_cells
from tests.test_committed_index import FIGURES


@pytest.fixture
def run_env(monkeypatch):
    monkeypatch.setenv(RUN_ENV, "20261128T000000Z-aaaaaa")
    monkeypatch.setenv(COMMIT_ENV, "abc123abc123")


def test_provenance_once_long_cells_cut_with_a_link_and_other_rows_marked(tmp_path, run_env, monkeypatch):
    rec = Recorder(tmp_path, "tiny", date="2026-11-28")
    long = "; ".join(f"arm{i}: final loss {i}.123, {1000 + i} tok/s" for i in range(40))
    rec.result("TB-ExtLoss", ours=long, agrees="n/a")
    rec.result("LR-Tab1", ours="LongRecipe 41.0 vs PoSE 38.8", agrees="n/a")
    monkeypatch.setenv(RUN_ENV, "20261127T000000Z-bbbbbb")  # a second run writes one row
    Recorder(tmp_path, "tiny", date="2026-11-27").result("PL-Tab7", ours="x", agrees="n/a")
    md = (tmp_path / "INDEX.md").read_text()
    assert md.count("20261128T000000Z-aaaaaa") == 1  # once, at the top
    assert "This run: profile `tiny`, run `20261128T000000Z-aaaaaa`, commit `abc123abc123`, date 2026-11-28." in md
    assert max(map(len, table_cells(md))) <= MAX_CELL
    row = next(line for line in md.splitlines() if line.startswith("| [TB-ExtLoss]"))
    assert "… [more](testbed.md#tb-extloss)" in row and long not in md
    assert f"| [PL-Tab7](prolong.md#pl-tab7) {OTHER} |" in md
    assert md.splitlines()[-1] == "| PL-Tab7 | python -m repro reproduce | tiny | 20261127T000000Z-bbbbbb | " \
                                  "abc123abc123 | 2026-11-27 |"
    page = (tmp_path / "testbed.md").read_text()
    assert long in page and "## TB-ExtLoss" in page  # whole on the figures page
    assert check_pages(tmp_path) == []


def test_every_link_of_the_index_reaches_a_file_or_a_heading(tmp_path, run_env):
    rec = Recorder(tmp_path, "tiny")
    rec.table([{"arm": "skip", "ruler": 44.4}], "RP-Tab1/2", name="RP-Tab1-2")
    rec.result("RP-Tab1/2", ours="skip 44.4", agrees="n/a")
    pages = render_pages(read_json(tmp_path / "index.json"))
    for target in re.findall(r"\]\(([^)#]+)(?:#([^)]*))?\)", pages["INDEX.md"]):
        name, frag = target
        if name.startswith("../docs/"):
            continue
        assert (tmp_path / name).exists(), name
        if frag:
            headings = {anchor(h) for h in re.findall(r"^## (.+)$", (tmp_path / name).read_text(), re.M)}
            assert frag in headings, (name, frag)


def test_a_page_edited_by_hand_is_a_problem(tmp_path, run_env):
    Recorder(tmp_path, "tiny").result("LR-Tab1", ours="y", agrees="n/a")
    assert check_pages(tmp_path) == []
    (tmp_path / "longrecipe.md").write_text((tmp_path / "longrecipe.md").read_text() + "edited\n")
    assert check_pages(tmp_path) == ["longrecipe.md: not what index.json renders (edited by hand, or stale)"]


@pytest.mark.parametrize("folder", ["", "costs"])
def test_committed_pages_are_what_their_records_render(folder):
    assert check_pages(FIGURES / folder) == []


def test_the_run_s_wall_time_is_stated_once_with_its_provenance(tmp_path, run_env, monkeypatch):
    """``reproduce`` records its wall time (:func:`repro.figures.record_run`); the index states it beside the
    provenance of the run that wrote it, never beside another run's, and ``index_check`` holds the page to it."""
    from repro.determinism import _index_md
    from repro.figures import record_run, run_record

    record_run(tmp_path, "20261128T000000Z-aaaaaa", "tiny", 60.0, {"positions": {"status": "ran", "seconds": 6.0}})
    assert run_record(tmp_path) is None  # a folder without an index gets nothing
    Recorder(tmp_path, "tiny", date="2026-11-28").result("LR-Tab1", ours="y", agrees="n/a")
    status = {"positions": {"status": "ran", "seconds": 30.0}, "training": {"status": "cached", "seconds": 0.0}}
    record_run(tmp_path, "20261128T000000Z-aaaaaa", "tiny", 1757.0, status)
    line = next(ln for ln in (tmp_path / "INDEX.md").read_text().splitlines() if ln.startswith("This run:"))
    assert line.startswith("This run: profile `tiny`, run `20261128T000000Z-aaaaaa`, commit `abc123abc123`, "
                           "date 2026-11-28, wall time 29.3 minutes (notebooks: positions 0.5, training cached). ")
    assert check_pages(tmp_path) == []
    assert "29.3" not in _index_md((tmp_path / "INDEX.md").read_text())  # volatile between same-seed runs
    monkeypatch.setenv(RUN_ENV, "20261129T000000Z-bbbbbb")  # a later run rewrites the row: the old time goes
    Recorder(tmp_path, "tiny", date="2026-11-28").result("LR-Tab1", ours="y", agrees="n/a")
    assert "wall time" not in (tmp_path / "INDEX.md").read_text() and check_pages(tmp_path) == []
