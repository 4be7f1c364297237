import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.figures import Recorder, table_to_markdown  # noqa: E402
from repro.io import read_json  # noqa: E402
from repro.targets import TARGETS  # noqa: E402


def test_recorder_writes_files_and_index(tmp_path):
    rec = Recorder(tmp_path, "tiny", date="2026-01-01")
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    rec.figure(fig, "TB-NIAH")
    rec.table([{"model": "base", "acc": 0.91234}], "TB-NIAH")
    rec.result("TB-NIAH", ours="base @256: 0.91", agrees="yes")
    assert {p.name for p in tmp_path.iterdir()} >= {"TB-NIAH.png", "TB-NIAH.pdf", "TB-NIAH.csv", "TB-NIAH.md",
                                                     "INDEX.md", "index.json"}
    row = read_json(tmp_path / "index.json")["TB-NIAH"]
    assert row["files"] == ["TB-NIAH.csv", "TB-NIAH.png"] and row["ours"] == "base @256: 0.91"
    md = (tmp_path / "INDEX.md").read_text()
    assert "| [TB-NIAH](testbed.md#tb-niah) |" in md and TARGETS["TB-NIAH"].paper in md and "date 2026-01-01" in md
    assert (tmp_path / "TB-NIAH.csv").read_text() == "model,acc\nbase,0.91234\n"


def test_png_output_is_deterministic(tmp_path):
    pngs = []
    for d in ("a", "b"):
        fig, ax = plt.subplots()
        ax.plot([0, 1, 2], [1, 0, 1])
        pngs.append(Recorder(tmp_path / d, "tiny").figure(fig, "TB-BaseLoss").read_bytes())
        plt.close(fig)
    assert pngs[0] == pngs[1]


def test_unknown_id_and_bad_names(tmp_path):
    rec = Recorder(tmp_path, "tiny")
    with pytest.raises(KeyError, match="unknown target id 'XX-1'"):
        rec.result("XX-1", ours="1")
    with pytest.raises(ValueError, match="must match"):
        rec.table([{"a": 1}], "TB-NIAH", name="../evil")


def test_markdown_table():
    assert table_to_markdown([{"a": 0.123456, "b": "x|y"}], ["a", "b"]) == "| a | b |\n|---|---|\n| 0.1235 | x\\|y |\n"


def test_recorder_for_one_paper_writes_its_targets_and_the_testbed_only(tmp_path):
    rec = Recorder(tmp_path, "tiny", date="2026-01-01", paper="cdt")
    fig, ax = plt.subplots()
    assert rec.wants("CD-Tab2") and rec.wants("TB-NIAH") and not rec.wants("LR-Tab1")
    assert rec.figure(fig, "LR-Fig2") is None and rec.table([{"a": 1}], "LR-Tab1") is None
    rec.result("LR-Tab1", ours="x")
    rec.table([{"a": 1}], "CD-Tab2")
    rec.result("TB-NIAH", ours="y")
    assert set(read_json(tmp_path / "index.json")) == {"CD-Tab2", "TB-NIAH"}
    assert not (tmp_path / "LR-Fig2.png").exists() and not (tmp_path / "LR-Tab1.csv").exists()
    with pytest.raises(ValueError, match="paper='lr'; allowed: all, longrecipe"):
        Recorder(tmp_path, "tiny", paper="lr")
    with pytest.raises(KeyError, match="unknown target id 'XX-1'"):
        rec.wants("XX-1")


def test_recorder_stores_the_claim_tests_a_verdict_was_decided_from(tmp_path):
    from repro.claims import headline_of
    from repro.reports.common import Report
    from repro.reports.headline import judge

    j = judge(headline_of("CD-Fig5"), {"Pearson r (IG, grad L2)": 0.5, "0 (uncorrelated)": 0.0}, lambda a, b: 0.01)
    Recorder(tmp_path, "tiny", run="r1", commit="c1").report(Report("CD-Fig5", agrees=j.verdict, note=j.how,
                                                                    claims=j.claims))
    row = read_json(tmp_path / "index.json")["CD-Fig5"]
    assert row["agrees"] == "yes" and row["run"] == "r1" and row["commit"] == "c1"
    assert row["claims"] == [dict(c) for c in j.claims] and row["claims"][0]["outcome"] == "holds"


def test_a_showing_recorder_displays_figures_tables_and_one_verdict_line(tmp_path, monkeypatch, capsys):
    """Inside a kernel the recorder shows what it writes: the saved PNG's bytes, each table as Markdown, one line per
    verdict (id | claim | verdict | first claim's gap +- SE); outside one (the default here) it shows nothing."""
    from repro import display

    shown = []
    monkeypatch.setattr(display, "show_png", lambda data: shown.append(("png", data)))
    monkeypatch.setattr(display, "show_markdown", lambda text: shown.append(("md", text)))
    assert Recorder(tmp_path / "quiet", "smoke").show is False
    rec = Recorder(tmp_path, "smoke", show=True)
    fig, ax = plt.subplots()
    ax.plot([0, 1], [1, 0])
    png = rec.figure(fig, "TB-NIAH")
    assert shown == [("png", png.read_bytes())] and not plt.fignum_exists(fig.number)  # shown once, then closed
    rec.table([{"a": 1.5, "b": "x"}], "TB-NIAH", caption="cap")
    assert shown[1] == ("md", "**TB-NIAH**: cap\n\n| a | b |\n|---|---|\n| 1.5 | x |\n")
    capsys.readouterr()
    rec.result("LR-Tab1", ours="o", agrees="tie within noise", note="long reasoning",
               claims=[{"gap": 2.176, "se": 2.607}, {"gap": 1.0, "se": 0.9}])
    out = capsys.readouterr().out
    assert out.count("\n") == 1 and out.startswith("LR-Tab1 | ") and "long reasoning" not in out
    assert out.endswith("| tie within noise | gap +2.18 ± 2.6 (first of 2 claims)\n")
    assert display.verdict_line("TB-X", "c" * 200, "", ()) == f"TB-X | {'c' * 99}… | n/a"
