"""HELMET JSON KV: valid JSON, the key once, SubEM scoring."""

from __future__ import annotations

import json

from repro.tasks import get_task
from repro.tasks.json_kv import normalize_answer


def test_json_object_and_question(tokenizer):
    ex = get_task("json_kv").generate(tokenizer, 1500, 0.25, 5)
    head, _, rest = ex.prompt.partition("\n\nExtract the value corresponding to the specified key "
                                        "in the JSON object below.")
    assert head.startswith("JSON data:\n{")
    data = json.loads(head[len("JSON data:\n"):])
    key, value = ex.metadata["key"], ex.references[0]
    assert data[key] == value and len(data) == ex.metadata["num_kvs"]
    assert ex.prompt.count(key) == 2 and ex.prompt.count(value) == 1
    assert rest == f'\n\nKey: "{key}"\nCorresponding value:'
    s, e = ex.metadata["evidence_char_spans"][0]
    assert ex.prompt[s:e] == f'"{key}": "{value}"'


def test_substring_exact_match():
    task = get_task("json_kv")
    ref = ("3f2a0b1c-aaaa-4bbb-8ccc-0123456789ab",)
    assert task.score(' "3f2a0b1c-aaaa-4bbb-8ccc-0123456789ab"', ref) == 1.0
    assert task.score("3F2A0B1C-AAAA-4BBB-8CCC-0123456789AB", ref) == 1.0
    assert task.score("3f2a0b1c-aaaa-4bbb", ref) == 0.0
    assert normalize_answer("The  Answer!") == "answer"
