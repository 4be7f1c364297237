"""Local copies of hub datasets, laid out as ``hf download --repo-type dataset`` writes them, for offline tests."""

import json

QUESTIONS = [  # (question, choices, answer index): a local copy of two MMLU-style rows and one dev row
    ("Which number is even?", ["3", "4", "5", "7"], 1),
    ("What is 2 + 3?", ["5", "6", "1", "0"], 0),
    ("Which is a prime number?", ["8", "9", "10", "11"], 3),
]


def write_local_mmlu(root):
    """A copy of the hub dataset ``cais/mmlu`` as ``hf download`` lays it out (a dataset card naming the configs,
    one folder of split files per config), with only the ``abstract_algebra`` config and a few rows."""
    folder = root / "cais" / "mmlu"
    (folder / "abstract_algebra").mkdir(parents=True)
    (folder / "README.md").write_text(
        "---\nconfigs:\n- config_name: abstract_algebra\n  data_files:\n"
        "  - split: test\n    path: abstract_algebra/test.jsonl\n"
        "  - split: dev\n    path: abstract_algebra/dev.jsonl\n---\n")
    rows = [{"question": q, "subject": "abstract_algebra", "choices": c, "answer": a} for q, c, a in QUESTIONS]
    (folder / "abstract_algebra" / "test.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows[:2]))
    (folder / "abstract_algebra" / "dev.jsonl").write_text(json.dumps(rows[2]) + "\n")
    return root


BABILONG_ROWS = [  # (input, question, target) in BABILong's fields
    ("Mary moved to the bathroom. John went to the hallway.", "Where is Mary?", "bathroom"),
    ("Daniel went back to the office. Sandra journeyed to the garden.", "Where is Sandra?", "garden"),
]


def write_local_babilong(root, config: str = "1k", split: str = "qa1"):
    """A copy of ``RMT-team/babilong-1k-samples`` with one config and one split (its README names them)."""
    folder = root / "RMT-team" / "babilong-1k-samples"
    (folder / config).mkdir(parents=True)
    (folder / "README.md").write_text(f"---\nconfigs:\n- config_name: '{config}'\n  data_files:\n"
                                      f"  - split: {split}\n    path: {config}/{split}.jsonl\n---\n")
    rows = [{"input": i, "question": q, "target": t} for i, q, t in BABILONG_ROWS]
    (folder / config / f"{split}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return root
