"""RULER JSONL: rows shaped as RULER writes them, both ways; our examples read back identically."""

from __future__ import annotations

import json

import pytest

from repro.tasks import RULER_TASKS, available_tasks, get_task
from repro.tasks.layout import n_tokens
from repro.tasks.ruler_jsonl import RULER_FIELDS, read_jsonl, write_jsonl

# where RULER's generators cut ``answer_prefix`` off the prompt: the last occurrence of the first
# 10 characters of the task's answer prefix (scripts/eval/synthetic/constants.py)
RULER_CUT = {"niah": " The speci", "vt": " Answer: A", "cwe": " Answer: T", "fwe": " Answer: A", "qa": " Answer:"}


def _family(task: str) -> str:
    return "niah" if task.startswith("niah_") else "qa" if task.startswith("qa_") else task


# rows exactly as RULER's scripts write them (field order included)
RULER_ROWS = {
    "niah_single_1": {
        "index": 161, "input": "A special magic number is hidden within the following text. Make sure to memorize it. "
        "I will quiz you about the number afterwards.\nThe grass is green. The sky is blue. The sun is yellow. Here we "
        "go. There and back again.\nOne of the special magic numbers for sour-jelly is: 3321504.\nThe grass is green. "
        "The sky is blue. The sun is yellow. Here we go. There and back again.\nWhat is the special magic number for "
        "sour-jelly mentioned in the provided text?",
        "outputs": ["3321504"], "length": 230, "length_w_model_temp": 230,
        "answer_prefix": " The special magic number for sour-jelly mentioned in the provided text is",
        "token_position_answer": 41},
    "vt": {
        "index": 0, "input": "Memorize and track the chain(s) of variable assignment hidden in the following text.\n\n"
        "VAR QPWZK = 21498\nThe grass is green. The sky is blue. The sun is yellow. Here we go. There and back again."
        "\nVAR OVXLS = VAR QPWZK \nQuestion: Find all variables that are assigned the value 21498 in the text above.",
        "outputs": ["QPWZK", "OVXLS"], "length": 120, "length_w_model_temp": 120,
        "answer_prefix": " Answer: According to the chain(s) of variable assignment in the text above, 2 variables are "
        "assigned the value 21498, they are: "},
    "qa_1": {
        "index": 3, "input": "Answer the question based on the given documents. Only give me the answer and do not "
        "output any other words.\n\nThe following are given documents.\n\nDocument 1:\nParis is in France.\n\n"
        "Answer the question based on the given documents. Only give me the answer and do not output any other "
        "words.\n\nQuestion: Where is Paris?", "outputs": ["France"], "length": 90, "length_w_model_temp": 90,
        "answer_prefix": " Answer:"},
}


def test_our_rows_are_shaped_as_rulers_and_read_back(tmp_path, tokenizer):
    examples = [get_task(n).generate(tokenizer, 512, 0.5, i) for i, n in enumerate(available_tasks())]
    path = write_jsonl(tmp_path / "suite" / "validation.jsonl", examples, tokenizer)
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]
    for i, (ex, row) in enumerate(zip(examples, rows)):
        assert list(row) == list(RULER_FIELDS) + ["task", "metadata"]
        assert row["index"] == i and row["outputs"] == list(ex.references)
        assert row["input"] + row["answer_prefix"] == ex.prompt and row["answer_prefix"]
        generate = get_task(ex.task).max_new_tokens
        assert row["length"] == row["length_w_model_temp"] == n_tokens(tokenizer, ex.prompt) + generate
        assert row["length"] == ex.metadata["n_tokens"] - 1 + generate  # RULER counts no <|bos|>
        if ex.task in RULER_TASKS:  # the answer prefix is where RULER's own generator cuts it off
            cut = ex.prompt.rfind(RULER_CUT[_family(ex.task)])
            assert (row["input"], row["answer_prefix"]) == (ex.prompt[:cut], ex.prompt[cut:])
    assert read_jsonl(path) == examples
    one = write_jsonl(tmp_path / "one.jsonl", examples[:2], tokenizer, tokens_to_generate=7)
    assert [json.loads(line)["length"] for line in one.read_text().splitlines()] == [
        n_tokens(tokenizer, ex.prompt) + 7 for ex in examples[:2]]
    by_task = write_jsonl(tmp_path / "dict.jsonl", examples[:1], tokenizer, {examples[0].task: 3})
    assert json.loads(by_task.read_text())["length"] == n_tokens(tokenizer, examples[0].prompt) + 3


@pytest.mark.parametrize("task", sorted(RULER_ROWS))
def test_rows_written_by_ruler_round_trip(tmp_path, task):
    row = RULER_ROWS[task]
    src = tmp_path / "ruler.jsonl"
    src.write_text(json.dumps(row) + "\n" + json.dumps({**row, "index": row["index"] + 1}) + "\n")
    first, second = read_jsonl(src, task=task)
    assert first.task == task and first.references == tuple(row["outputs"])
    assert first.prompt == row["input"] + row["answer_prefix"]  # what RULER's evaluator feeds the model
    assert first.metadata["answer_prefix"] == row["answer_prefix"] and first.metadata["ruler"]["index"] == row["index"]
    out = write_jsonl(tmp_path / "back.jsonl", [first, second])  # no tokenizer: RULER's own counts go back
    back = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert {k: v for k, v in back[0].items() if k not in ("task", "metadata")} == row
    assert list(back[0])[:len(row)] == list(row) and back[1]["index"] == row["index"] + 1
    assert read_jsonl(out) == [first, second]


def test_errors_name_the_problem(tmp_path, tokenizer):
    ex = get_task("niah_single_1").generate(tokenizer, 256, 0.5, 0)
    with pytest.raises(ValueError, match="needs the tokenizer; pass tokenizer="):
        write_jsonl(tmp_path / "x.jsonl", [ex])
    with pytest.raises(ValueError, match=r"tokens_to_generate=-1; allowed: an integer >= 0"):
        write_jsonl(tmp_path / "x.jsonl", [ex], tokenizer, -1)
    p = tmp_path / "bad.jsonl"
    p.write_text(json.dumps({"index": 0, "input": "x"}) + "\n")
    with pytest.raises(ValueError, match="lacks 'outputs'"):
        read_jsonl(p, task="vt")
    p.write_text(json.dumps(RULER_ROWS["vt"]) + "\n")
    with pytest.raises(ValueError, match=r"bad.jsonl:1: row has no 'task' field .*; allowed: pass task= \(one of: "):
        read_jsonl(p)


@pytest.mark.parametrize("name", ["vt.jsonl", "vt/validation.jsonl"])
def test_a_file_ruler_wrote_names_its_task(tmp_path, name):
    """RULER names its files after the task (predictions ``<task>.jsonl``, data ``<task>/validation.jsonl``): a
    row without ``task`` reads back as that task, and ``task=`` still wins."""
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(RULER_ROWS["vt"]) + "\n")
    (ex,) = read_jsonl(path)
    assert ex.task == "vt" and ex.prompt == RULER_ROWS["vt"]["input"] + RULER_ROWS["vt"]["answer_prefix"]
    assert read_jsonl(path, task="niah_single_1")[0].task == "niah_single_1"


@pytest.mark.parametrize("change, message", [
    ({"outputs": []}, r"'outputs'=\[\]; allowed: a string or a non-empty list of strings"),
    ({"length": "ten"}, r"'length'='ten'; allowed: an integer >= 0"),
    ({"index": True}, r"'index'=True; allowed: an integer >= 0"),
    ({"input": 5}, r"'input'=5; allowed: a string"),
    ({"answer_prefix": None}, r"'answer_prefix'=None; allowed: a string"),
    ({"metadata": [1]}, r"'metadata'=\[1\]; allowed: a JSON object"),
])
def test_mistyped_fields_are_refused_with_file_row_and_field(tmp_path, change, message):
    path = tmp_path / "vt.jsonl"
    path.write_text(json.dumps(RULER_ROWS["vt"]) + "\n\n" + json.dumps({**RULER_ROWS["vt"], **change}) + "\n")
    with pytest.raises(ValueError, match="vt.jsonl:3: " + message):
        read_jsonl(path)


def test_an_empty_file_or_a_folder_is_refused(tmp_path):
    (tmp_path / "vt.jsonl").write_text("\n")
    with pytest.raises(ValueError, match="holds no rows; allowed: "):
        read_jsonl(tmp_path / "vt.jsonl")
    with pytest.raises(ValueError, match="is a folder; allowed: a JSONL file"):
        read_jsonl(tmp_path)
