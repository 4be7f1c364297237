"""``python -m repro evaluate``: one prediction row per task x length x sample; the summary is their mean."""

import json
import math
import shutil

import pytest
from transformers import AutoTokenizer

from repro.__main__ import main
from repro.cli.common import load_cli_model
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


# -- --rope-scaling, the positions warning and --chat-template

@pytest.fixture
def loaded(monkeypatch):
    """The models ``evaluate`` loads, in order (the command's own loader, watched)."""
    models = []

    def watch(*args, **kwargs):
        models.append(load_cli_model(*args, **kwargs))
        return models[-1]

    monkeypatch.setattr("repro.cli.evaluate.load_cli_model", watch)
    return models


def _argv(model, out, lengths, *extra):
    return ["evaluate", "--model", str(model), "--tasks", "vt", "--lengths", lengths, "--samples", "1", "--out",
            str(out), "--no-progress", *extra]


@pytest.mark.parametrize("flag, expected", [
    ("yarn:2", {"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 2.0, "original_max_position_embeddings": 256}),
    ("linear:1.5", {"rope_type": "linear", "rope_theta": 10_000.0, "factor": 1.5}),
    ("dynamic:2", {"rope_type": "dynamic", "rope_theta": 10_000.0, "factor": 2.0})])
def test_rope_scaling_sets_the_loaded_config_and_is_recorded(short_model, tmp_path, loaded, capsys, flag, expected):
    out = tmp_path / "ev"
    assert main(_argv(short_model, out, "320", "--rope-scaling", flag)) == 0
    (model,) = loaded
    assert model.config.rope_parameters == expected and model.model.rotary_emb.rope_type == expected["rope_type"]
    assert model.config.max_position_embeddings == 256  # the model's own (dynamic NTK reads it as the window)
    err = capsys.readouterr().err
    notes = [line for line in err.splitlines() if line.startswith("note: --rope-scaling")]
    assert len(notes) == 1 and f"rope_type: {expected['rope_type']}" in notes[0] and "rope_theta: 10000" in notes[0]
    assert "warning:" not in err  # 320 tokens are within 256 x the factor
    assert [r["rope_scaling"] for r in read_jsonl(out / "predictions.jsonl")] == [flag]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["rope_scaling"] == flag and summary["rope_parameters"] == expected
    assert summary["max_position_embeddings"] == 256


def test_a_length_past_the_positions_warns_once_and_runs(short_model, tmp_path, loaded, capsys):
    assert main(_argv(short_model, tmp_path / "within", "192,256")) == 0
    assert "warning" not in capsys.readouterr().err
    out = tmp_path / "past"
    assert main(_argv(short_model, out, "256,320")) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "--lengths 320" in warnings[0] and "256 positions" in warnings[0]
    assert "--rope-scaling yarn:2" in warnings[0]
    assert [m.config.max_position_embeddings for m in loaded] == [256, 256]  # never raised silently
    assert loaded[1].config.rope_parameters == {"rope_type": "default", "rope_theta": 10_000.0}
    assert len(read_jsonl(out / "predictions.jsonl")) == 2  # still run: extrapolation is measured
    assert json.loads((out / "summary.json").read_text())["rope_parameters"] is None  # the model's own
    assert main(_argv(short_model, tmp_path / "scaled", "600", "--rope-scaling", "yarn:2")) == 0
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1 and "--lengths 600 is past the 512 positions --rope-scaling yarn:2" in warnings[0]


@pytest.mark.parametrize("value", ["ntk:2", "yarn:1", "yarn:x", "yarn", "linear:-2", "none:2", "dynamic:nan", "2"])
def test_a_bad_rope_scaling_is_one_error_line(short_model, tmp_path, capsys, value):
    out = tmp_path / "bad"
    assert main(_argv(short_model, out, "256", "--rope-scaling", value)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: --rope-scaling {value!r}; allowed: none, linear:F, dynamic:F")
    assert not out.exists()


CHAT = ("{% for m in messages %}<|user|>{{ m['content'] }}{% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}")
"""A minimal chat template: the user's turn after ``<|user|>``, the assistant's after ``<|assistant|>``."""


def test_chat_template_wraps_each_prompt_and_is_recorded(tiny_model_dir, tmp_path, capsys):
    chat_model = tmp_path / "chat"
    shutil.copytree(tiny_model_dir, chat_model)
    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    tok.chat_template = CHAT
    tok.save_pretrained(chat_model)
    for flag, on in (("auto", True), ("on", True), ("off", False)):
        out = tmp_path / flag
        assert main(["evaluate", "--model", str(chat_model), "--tasks", "niah_single_1", "--lengths", "256",
                     "--samples", "2", "--out", str(out), "--no-progress", "--chat-template", flag]) == 0
        summary = json.loads((out / "summary.json").read_text())
        assert (summary["chat_template"], summary["chat_template_flag"]) == ("on" if on else "off", flag)
        for r in read_jsonl(out / "predictions.jsonl"):
            task = make_task("niah_single_1")
            ex = task.generate(tok, 256, r["depth"], r["seed"])
            if on:  # the template's tokens count in the length: the example is drawn again shorter by them
                wrapped = len(tok(f"<|user|>{ex.prompt}<|assistant|>").input_ids)
                assert wrapped > 256 and r["length"] <= 256
                ex = task.generate(tok, 256 - (wrapped - len(tok(ex.prompt).input_ids)), r["depth"], r["seed"])
            prefix = ex.metadata["answer_prefix"]
            question = ex.prompt[:-len(prefix)].rstrip()
            assert r["input"] == (f"<|user|>{question}<|assistant|>{prefix.lstrip()}" if on else ex.prompt)
            assert r["chat_template"] == ("on" if on else "off") and r["length"] == len(tok(r["input"]).input_ids)
    # the session tokenizer has no template: auto is off, on is refused before anything is written
    assert main(_argv(tiny_model_dir, tmp_path / "plain", "256")) == 0
    assert json.loads((tmp_path / "plain" / "summary.json").read_text())["chat_template"] == "off"
    capsys.readouterr()
    assert main(_argv(tiny_model_dir, tmp_path / "refused", "256", "--chat-template", "on")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --chat-template on: the tokenizer of")
    assert "has no chat template" in err[0]
    assert not (tmp_path / "refused").exists()
