"""RULER qa_1/qa_2: the labelled generated substitute, local SQuAD/HotpotQA files, scoring."""

from __future__ import annotations

import json

import pytest

from repro.tasks import get_task


@pytest.mark.parametrize("name", ["qa_1", "qa_2"])
def test_substitute(name, tokenizer):
    ex = get_task(name).generate(tokenizer, 1024, 0.5, 3)
    assert ex.metadata["substitute"].startswith("generated facts")
    assert ex.prompt.startswith("Answer the question based on the given documents.")
    assert ex.prompt.endswith(f"Question: {ex.metadata['query']} Answer:")
    gold = [ex.prompt[s:e] for s, e in ex.metadata["evidence_char_spans"]]
    assert all(g.startswith("Document ") for g in gold)
    assert ex.references[0] in gold[-1]
    nums = [int(x.split(":")[0]) for x in ex.prompt.split("Document ")[1:]]
    assert nums == list(range(1, len(nums) + 1))
    if name == "qa_1":
        who = ex.metadata["query"][len("In which city was "):-len(" born?")]
        assert ex.prompt.count(f"{who} was born in") == 1


def test_local_squad_and_hotpot(tmp_path, tokenizer):
    squad = {"data": [{"paragraphs": [
        {"context": "The Loire is the longest river in France.", "qas": [
            {"question": "What is the longest river in France?", "answers": [{"text": "The Loire"}],
             "is_impossible": False}]},
        {"context": "Paris is the capital of France.", "qas": []}]},
        {"paragraphs": [{"context": f"Filler paragraph number {i} talks about weather." , "qas": []}
                        for i in range(40)]}]}
    p = tmp_path / "squad.json"
    p.write_text(json.dumps(squad))
    ex = get_task("qa_1", dataset_path=str(p)).generate(tokenizer, 400, 0.5, 0)
    assert ex.references == ("The Loire",) and "substitute" not in ex.metadata
    assert "The Loire is the longest river in France." in ex.prompt
    hotpot = [{"question": "Where was the author of Dune born?", "answer": "Tacoma",
               "supporting_facts": [["Dune", 0], ["Frank Herbert", 0]],
               "context": [["Dune", ["Dune is a novel by Frank Herbert."]],
                           ["Frank Herbert", ["Frank Herbert was born in Tacoma."]],
                           ["Other", ["Other text."]]]}]
    h = tmp_path / "hotpot.json"
    h.write_text(json.dumps(hotpot))
    ex2 = get_task("qa_2", dataset_path=str(h)).generate(tokenizer, 300, 0.0, 0)
    assert len(ex2.metadata["evidence_char_spans"]) == 2 and "Frank Herbert\nFrank Herbert was born" in ex2.prompt
    with pytest.raises(ValueError, match="dataset_path"):
        get_task("qa_1", dataset_path=str(tmp_path / "missing.json"))


def test_scoring_string_match_part():
    task = get_task("qa_2")
    assert task.score("It is Tacoma.", ("Tacoma", "Tacoma, Washington")) == 1.0
    assert task.score("Seattle", ("Tacoma", "Tacoma, Washington")) == 0.0
    assert task.score("tacoma, washington", ("Tacoma, Washington",)) == 1.0
