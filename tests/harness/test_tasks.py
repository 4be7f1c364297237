"""Which lm-eval tasks a ``--tasks`` list names and how each runs offline (lm-eval's own configs, data from here)."""

import pytest

pytest.importorskip("lm_eval")


@pytest.fixture(scope="module")
def tm(offline):
    from repro.harness.tasks import task_manager

    return task_manager()


def test_names_expand_to_leaf_tasks(tm):
    from repro.harness.tasks import leaf_names

    ruler = leaf_names(tm, ["ruler"])
    assert len(ruler) == 13 and ruler[:2] == ["niah_single_1", "niah_single_2"] and ruler[-1] == "ruler_qa_hotpot"
    assert leaf_names(tm, ["vt", "cwe", "ruler_vt"]) == ["ruler_vt", "ruler_cwe"]  # aliases, each leaf once
    assert len(leaf_names(tm, ["mmlu"])) == 57
    assert leaf_names(tm, ["babilong"])[:5] == [f"babilong_qa{k}" for k in range(1, 6)]
    with pytest.raises(ValueError, match=r"unknown lm-eval task 'niah_singel_1'.*close: niah_single_1"):
        leaf_names(tm, ["niah_singel_1"])


def test_babilong_lengths_name_its_configs():
    from repro.harness.tasks import babilong_config

    assert babilong_config([0, 1024, 131072]) == ["0k", "1k", "128k"]
    with pytest.raises(ValueError, match=r"BABILong length 1000; allowed: 0, 1024, 2048, .* tokens \(0k, 1k"):
        babilong_config([1000])


def test_downloads_and_missing_copies_are_refused_in_one_line(tm, small_tokenizer, tmp_path):
    from repro.harness.tasks import MissingData, resolve

    with pytest.raises(MissingData, match=r"^ruler_qa_squad needs SQuAD 2.0's dev set \(dev-v2.0.json\).*offline"):
        resolve(["qa_squad"], small_tokenizer, [1024], 2, ["w"], tm=tm)
    with pytest.raises(MissingData) as e:
        resolve(["babilong_qa1"], small_tokenizer, [1024], 2, ["w"], data=tmp_path, tm=tm)
    where = tmp_path / "RMT-team" / "babilong-1k-samples"
    assert str(e.value) == (f"babilong_qa1 needs BABILong (RMT-team/babilong-1k-samples); put a copy of the hub "
                            f"dataset RMT-team/babilong-1k-samples in {where} (hf download --repo-type dataset "
                            f"RMT-team/babilong-1k-samples --local-dir {where}); the suite's offline BABILong is "
                            "babilong_qa1..qa5 without --harness")
    assert "\n" not in str(e.value)


def test_babilong_runs_on_a_local_copy_with_lm_evals_prompt(tm, tiny_model_dir, small_tokenizer, tmp_path):
    from repro.harness.run import HarnessRun, evaluate, prepare
    from repro.models import load_model
    from tests.harness.local_data import BABILONG_ROWS, write_local_babilong

    data = write_local_babilong(tmp_path)
    run = HarnessRun(tasks=("babilong_qa1",), lengths=(1024,), samples=2, data=str(data))
    leaves, tasks = prepare(run, small_tokenizer)
    assert leaves[0].source == str(data / "RMT-team" / "babilong-1k-samples")
    task = tasks["babilong_qa1"]
    docs = list(task.eval_docs)
    assert [d["length"] for d in docs] == [1024, 1024]
    assert task.doc_to_text(docs[0]) == BABILONG_ROWS[0][0] + "\n" + BABILONG_ROWS[0][1]  # lm-eval's template
    rows = evaluate(load_model(tiny_model_dir).eval(), small_tokenizer, run, tasks, progress=False)
    assert [(r["task"], r["target_length"], r["outputs"]) for r in rows] == [
        ("babilong_qa1", 1024, ["bathroom"]), ("babilong_qa1", 1024, ["garden"])]
    for r, (text, question, _) in zip(rows, BABILONG_ROWS):  # BABILong's score: target in the stripped prediction
        assert r["score"] == float(r["outputs"][0].lower() in r["pred"].strip().lower())
        assert r["input"].startswith("I will give you context with the facts about positions")  # its description,
        assert "Charlie went to the hallway." in r["input"]  # its two solved examples (first_n few-shot), the doc
        assert r["input"].endswith(f"\n\n{text}\n{question}")


def test_a_local_copy_that_does_not_load_says_why_in_one_line(tm, small_tokenizer, tmp_path):
    from repro.harness.tasks import MissingData, build, resolve

    copy = tmp_path / "cais" / "mmlu"
    copy.mkdir(parents=True)
    (copy / "README.md").write_text("---\nconfigs:\n- config_name: other\n  data_files: other/*.jsonl\n---\n")
    leaves = resolve(["mmlu_abstract_algebra"], small_tokenizer, [], 2, ["w"], data=tmp_path, tm=tm)
    assert leaves[0].source == str(copy)
    with pytest.raises(MissingData, match=rf"^mmlu_abstract_algebra: the copy of cais/mmlu in {copy} does not "
                                          r"load \(\w+: .*\); allowed: a copy of the hub dataset repository") as e:
        build(leaves, tmp_path, tm=tm)
    assert "\n" not in str(e.value)
