import json
import shutil

from repro.profiles import get_profile
from repro.stages.cache import checkpoint_id, write_manifest
from repro.stages.checkpoints import checkpoint_path
from repro.stages.evaluation import evaluate_checkpoint
from repro.stages.keys import base_key


def test_checkpoint_id_is_relative_inside_the_run_and_as_given_outside(tmp_path):
    run = tmp_path / "runs"
    assert checkpoint_id(run / "smoke" / "base-abc" / "final", run) == "smoke/base-abc/final"
    assert checkpoint_id(tmp_path / "runs" / "." / "smoke" / "x", str(run)) == "smoke/x"
    outside = tmp_path / "models" / "llama"
    assert checkpoint_id(outside, run) == str(outside)
    assert checkpoint_id("meta-llama/Meta-Llama-3-8B-Instruct", run) == "meta-llama/Meta-Llama-3-8B-Instruct"


def test_the_same_run_in_two_folders_writes_the_same_evaluation_files(tmp_path, tiny_llama, small_tokenizer):
    p = get_profile("smoke")
    a, b = tmp_path / "a", tmp_path / "b"
    ckpt = a / p.name / f"base-{base_key(p)}" / "final"
    tiny_llama(vocab=len(small_tokenizer)).save_pretrained(ckpt)
    small_tokenizer.save_pretrained(ckpt)
    write_manifest(ckpt.parent, "final")  # as the base stage records its files when it finishes
    shutil.copytree(a, b)
    assert checkpoint_path(p, "base", b) == b / p.name / f"base-{base_key(p)}" / "final"

    grid = {"tasks": ("niah_single_1",), "lengths": (96,), "depths": (0.5,), "samples": 2}
    ra = evaluate_checkpoint(p, "base", run_dir=a, progress=False, record=True, **grid)
    rb = evaluate_checkpoint(p, "base", run_dir=b, progress=False, record=True, **grid)
    files_a = sorted(f.name for f in (a / p.name / "eval").iterdir())
    files_b = sorted(f.name for f in (b / p.name / "eval").iterdir())
    assert files_a == files_b and len(files_a) == 1
    assert ra["results"] == rb["results"] and len(ra["results"]) == 2
    assert json.loads((a / p.name / "eval" / files_a[0]).read_text())["checkpoint"] == str(ckpt)

