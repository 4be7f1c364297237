"""Which code and which run wrote each figure: run ids, the commit, and the INDEX's at-a-glance table."""

import re
import subprocess

from repro.central_claims import CENTRAL, NOT_SHOWN, OTHER_WAY, SHOWN, shown_table, status
from repro.figures import Recorder
from repro.io import read_json
from repro.provenance import COMMIT_ENV, INTERACTIVE, RUN_ENV, code_commit, current_commit, current_run, new_run_id
from repro.targets import TARGETS


def test_run_ids_are_fresh_and_dated():
    a, b = new_run_id(), new_run_id()
    assert re.fullmatch(r"\d{8}T\d{6}Z-[0-9a-f]{6}", a) and a != b


def test_commit_of_a_checkout_and_of_a_plain_folder(tmp_path):
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "code.py").write_text("x = 1\n")
    (tmp_path / "figures").mkdir()
    (tmp_path / "figures" / "a.csv").write_text("a\n")
    git = ["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-qm", "c"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True).stdout.strip()
    assert code_commit(tmp_path) == head
    (tmp_path / "figures" / "a.csv").write_text("b\n")  # a run's own outputs do not make the code dirty
    assert code_commit(tmp_path) == head
    (tmp_path / "code.py").write_text("x = 2\n")
    assert code_commit(tmp_path) == head + "+dirty"
    assert code_commit(tmp_path / "no-such-folder") == "unknown"  # not a checkout: git cannot say


def test_recorder_rows_carry_commit_and_run(tmp_path, monkeypatch):
    monkeypatch.delenv(RUN_ENV, raising=False)
    monkeypatch.setenv(COMMIT_ENV, "abc123")
    assert current_run() == INTERACTIVE and current_commit() == "abc123"
    Recorder(tmp_path, "tiny").result("TB-NIAH", ours="x", agrees="yes")
    monkeypatch.setenv(RUN_ENV, "20261126T000000Z-000000")
    Recorder(tmp_path, "tiny").result("LR-Tab1", ours="y", agrees="no")
    index = read_json(tmp_path / "index.json")
    assert index["TB-NIAH"]["run"] == INTERACTIVE and index["LR-Tab1"]["run"] == "20261126T000000Z-000000"
    assert index["LR-Tab1"]["commit"] == "abc123"
    md = (tmp_path / "INDEX.md").read_text()
    assert "| LR-Tab1 | python -m repro reproduce | tiny | 20261126T000000Z-000000 | abc123 |" in md  # marked
    assert md.index("## What this run shows") < md.index("## Every target")



def test_a_folder_of_one_commands_rows_names_that_command_not_the_claims_table(tmp_path):
    Recorder(tmp_path, "tiny").result("TB-TimedArms", ours="x", agrees="2/5")
    md = (tmp_path / "INDEX.md").read_text()
    assert "Written by `python -m repro bench costs`" in md and "## What this run shows" not in md
    Recorder(tmp_path, "tiny").result("LR-Tab1", ours="y", agrees="no")  # a paper's row: the claims table is back
    md = (tmp_path / "INDEX.md").read_text()
    assert "Written by `python -m repro reproduce` (rows TB-TimedArms by their own commands)" in md
    assert "## What this run shows" in md

def test_central_claims_name_real_targets_and_say_what_a_run_shows():
    assert set(CENTRAL) == {"LongRecipe", "RoPE-perturbed self-distillation", "Context denoising training",
                            "ProLong"}
    for claims in CENTRAL.values():
        assert 3 <= len(claims) <= 5
        assert all(t in TARGETS for _, targets in claims for t in targets)
    assert status({"LR-Tab1": "yes"}, ("LR-Tab1",)) == SHOWN
    assert status({"LR-Tab1": "no", "LR-Tab3": "yes"}, ("LR-Tab1", "LR-Tab3")) == OTHER_WAY
    assert status({"LR-Tab1": "tie within noise"}, ("LR-Tab1",)) == f"{NOT_SHOWN} (LR-Tab1: tie within noise)"
    assert status({}, ("LR-Tab1",)) == f"{NOT_SHOWN} (LR-Tab1: not run)"
    lines = shown_table({"PL-Tab20": "partly"})
    assert len(lines) == 2 + sum(len(c) for c in CENTRAL.values())
    assert "| ProLong | Document masks help on long and short tasks | PL-Tab20 | not shown at this scale (PL-Tab20: " \
           "partly) |" in lines
