"""``python -m repro evaluate``: one prediction row per task x length x sample; the summary is their mean."""

import json
import math

from repro.__main__ import main
from repro.cli.evaluate import PRED_FIELDS
from repro.data.tokenizer import load_tokenizer
from repro.evaluate import make_task
from repro.io import read_jsonl


def test_evaluate_rows_and_summary_agree(tiny_model_dir, tmp_path):
    out = tmp_path / "ev"
    tasks, lengths, samples = ["niah_single_1", "niah_multikey_1"], [192, 256], 3
    argv = ["evaluate", "--model", str(tiny_model_dir), "--tasks", ",".join(tasks), "--lengths",
            ",".join(map(str, lengths)), "--samples", str(samples), "--out", str(out), "--no-progress"]
    assert main(argv) == 0
    rows = read_jsonl(out / "predictions.jsonl")
    assert len(rows) == len(tasks) * len(lengths) * samples
    assert list(rows[0]) == list(PRED_FIELDS)
    assert [r["index"] for r in rows] == list(range(len(rows)))
    assert all(abs(r["length"] - r["target_length"]) <= 8 and r["outputs"] and 0 <= r["score"] <= 1 for r in rows)
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["cells"]) == len(tasks) * len(lengths)
    for c in summary["cells"]:
        scores = [r["score"] for r in rows if r["task"] == c["task"] and r["target_length"] == c["length"]]
        assert c["n"] == samples and math.isclose(c["accuracy"], sum(scores) / len(scores))
        assert c["se"] >= 0
    table = (out / "summary.md").read_text()
    assert table.splitlines()[0] == "| task | 192 | 256 |" and "niah_multikey_1" in table
    tok = load_tokenizer(tiny_model_dir)
    for r in rows[::samples]:  # ``input`` is the whole prompt: the row's task, length, depth and seed draw it again
        assert make_task(r["task"]).generate(tok, r["target_length"], r["depth"], r["seed"]).prompt == r["input"]


def test_unknown_task_and_bad_length_name_the_value(tiny_model_dir, tmp_path, capsys):
    out = tmp_path / "bad"
    argv = ["evaluate", "--model", str(tiny_model_dir), "--tasks", "niah_single_1,needle_9", "--lengths", "256",
            "--out", str(out)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "unknown task 'needle_9'" in err and "niah_single_1" in err
    assert main(argv[:4] + ["niah_single_1", "--lengths", "256,-5", "--out", str(out)]) == 2
    assert "-5" in capsys.readouterr().err
    assert main(argv[:4] + ["niah_single_1,vt", "--lengths", "64,32", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --lengths 64,32: every length is too short")
    assert "niah_single_1 >= " in err[0] and "vt >= " in err[0] and "allowed: a length >= " in err[0]
    assert not out.exists()


def test_a_run_stopped_before_its_end_leaves_no_summary(tiny_model_dir, tmp_path, monkeypatch):
    """A previous run's summary is removed before evaluating: a run stopped after writing its predictions (as if
    killed) leaves predictions and no summary, never new predictions beside an old summary."""
    out = tmp_path / "ev"

    def argv(samples):
        return ["evaluate", "--model", str(tiny_model_dir), "--tasks", "vt", "--lengths", "256", "--samples",
                str(samples), "--out", str(out), "--no-progress"]

    assert main(argv(2)) == 0 and (out / "summary.json").exists()

    def stop(path, obj):
        raise KeyboardInterrupt("stopped")

    monkeypatch.setattr("repro.io.atomic_write_json", stop)
    assert main(argv(3)) == 130  # Ctrl-C: exit status 130 and one line
    assert not (out / "summary.json").exists() and not (out / "summary.md").exists()
    assert len(read_jsonl(out / "predictions.jsonl")) == 3
