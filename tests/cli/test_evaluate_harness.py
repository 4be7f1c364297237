"""``python -m repro evaluate --harness lm-eval``: lm-eval's own tasks, offline, on a tiny checkpoint, in the suite's
outputs. Each run is a fresh process (the offline switches are read when the hub libraries are imported)."""

import json
import math
import os
import subprocess
import sys
import time

import pytest
import torch

pytest.importorskip("lm_eval")

from repro.io import read_jsonl  # noqa: E402
from tests.harness.local_data import QUESTIONS, write_local_mmlu  # noqa: E402

def repro(*argv, cache, timeout=240):
    env = {**os.environ, "REPRO_CACHE": str(cache), "PYTHONPATH": os.getcwd()}
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "repro", *argv], capture_output=True, text=True, env=env,
                       timeout=timeout)
    return p, time.perf_counter() - t0


def choice_scores(model_dir, prompt, choices):
    """Sum of log-probabilities of each `` <choice>`` after ``prompt``, with the model run by transformers."""
    from repro.data.tokenizer import load_tokenizer
    from repro.models import load_model

    tok, model = load_tokenizer(model_dir), load_model(model_dir).eval()
    out = []
    for c in choices:
        ctx, whole = tok(prompt).input_ids, tok(prompt + " " + c).input_ids
        ids = torch.tensor([whole])
        with torch.no_grad():
            logp = torch.log_softmax(model(input_ids=ids).logits[0, :-1].double(), -1)
        out.append(sum(float(logp[i - 1, whole[i]]) for i in range(len(ctx), len(whole))))
    return out


def test_harness_end_to_end_offline(tiny_model_dir, tmp_path):
    data, out = write_local_mmlu(tmp_path / "data"), tmp_path / "ev"
    p, _ = repro("evaluate", "--harness", "lm-eval", "--model", str(tiny_model_dir), "--tasks",
                       "niah_single_1,mmlu_abstract_algebra", "--lengths", "1024", "--samples", "2", "--data",
                       str(data), "--out", str(out), "--no-progress", cache=tmp_path / "cache")
    assert p.returncode == 0, p.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    rows = read_jsonl(out / "predictions.jsonl")
    assert summary["harness"]["lm_eval"] == "0.4.13"
    assert summary["harness"]["sources"]["mmlu_abstract_algebra"] == str(data / "cais" / "mmlu")
    assert {(c["task"], c["length"], c["n"]) for c in summary["cells"]} == {("niah_single_1", 1024, 2),
                                                                           ("mmlu_abstract_algebra", None, 2)}
    for c in summary["cells"]:  # the summary is the rows' mean and its standard error
        s = [r["score"] for r in rows if r["task"] == c["task"]]
        mean = sum(s) / len(s)
        assert math.isclose(c["accuracy"], mean)
        assert math.isclose(c["se"], math.sqrt(sum((x - mean) ** 2 for x in s) / len(s)) / math.sqrt(len(s)))
    niah = [r for r in rows if r["task"] == "niah_single_1"]
    for r in niah:  # RULER's prompt, needle inside, answer prefix last, within the length; RULER's string match
        assert r["outputs"][0] in r["input"] and r["input"].endswith("mentioned in the provided text is")
        assert r["length"] <= 1024
        assert r["score"] == float(r["outputs"][0].lower() in r["pred"].strip().lower())
    mmlu = [r for r in rows if r["task"] == "mmlu_abstract_algebra"]
    for (q, c, a), r in zip(QUESTIONS, mmlu):  # lm-eval's choice by log-likelihood, recomputed with transformers
        prompt = ("The following are multiple choice questions (with answers) about abstract algebra.\n\n"
                  f"{q}\nA. {c[0]}\nB. {c[1]}\nC. {c[2]}\nD. {c[3]}\nAnswer:")
        assert r["input"] == prompt
        lls = choice_scores(tiny_model_dir, prompt, "ABCD")
        assert r["score"] == float(max(range(4), key=lls.__getitem__) == a)
    assert "| niah_single_1 |" in (out / "summary.md").read_text()
