"""RULER through lm-evaluation-harness beside ours: the parts that agree, every listed difference, the tokens."""

from __future__ import annotations

import random

import pytest

from repro.harness import parity as P
from repro.harness import parity_doc as D
from repro.pipeline import REPO

LENGTH = P.LENGTH


@pytest.fixture(scope="module")
def rows(offline, small_tokenizer):
    """Both prompts of every task at 1,024 tokens with the tiny tokenizer."""
    return {t: P.compare(t, small_tokenizer, LENGTH, P.SEED) for t in P.TASKS}


@pytest.mark.parametrize("task", P.TASKS)
def test_the_compared_parts_agree_once_the_listed_differences_are_undone(rows, task):
    p = rows[task]
    assert P.mismatches(p) == {}
    for part in ("description", "question"):  # no listed difference touches these: word for word
        assert P.compared_part(p.harness, part) == P.compared_part(p.ours, part)
    if task in P.NIAH_TASKS or task == "vt":
        assert p.harness.parts.needles and p.ours.parts.needles
        assert len(p.harness.parts.needles) == len(p.ours.parts.needles) == len(p.ours.references)


@pytest.mark.parametrize("task", P.TASKS)
def test_every_listed_difference_is_observed(rows, task):
    p = rows[task]
    assert P.differences(task)
    for d in P.differences(task):
        assert d.observed(p), f"{task}: not observed: {d.text}"
        if d.undo:
            assert d.undo(getattr(p.harness.parts, d.part)) != getattr(p.harness.parts, d.part), d.text


def test_the_niah_template_text_is_word_for_word_the_same(rows):
    for task in P.NIAH_TASKS:
        h, o = rows[task].harness.parts, rows[task].ours.parts
        assert P.template(h.description) == P.template(o.description)
        assert P.template(h.answer_prefix) == P.template(o.answer_prefix)
        assert {P.template(n) for n in h.needles} == {P.template(n) for n in o.needles}
    assert P.template(rows["niah_single_3"].ours.parts.needles[0]) == \
        "One of the special magic uuids for {key} is: {uuid}."


def test_a_difference_left_off_the_list_is_caught(rows, monkeypatch):
    p = rows["vt"]
    monkeypatch.setitem(P.DIFFERENCES, ("vt",), tuple(d for d in P.DIFFERENCES[("vt",)] if "assgined" not in d.text))
    assert "answer_prefix" in P.mismatches(p)
    assert "assgined" in P.mismatches(p)["answer_prefix"][0]


def _largest_piece(tokenizer, context: str) -> int:
    """Tokens of the largest line (or, in a one-line context, word) of a context: a bound on one unit of it."""
    sep = "\n" if "\n" in context.strip() else " "
    return max(len(tokenizer(sep + x, add_special_tokens=False).input_ids) for x in context.split(sep) if x)


def test_token_counts_relate_as_each_side_sizes(rows, small_tokenizer):
    for task, p in rows.items():
        assert p.ours.total_tokens <= LENGTH
        ours_left, theirs_left = LENGTH - p.ours.total_tokens, LENGTH - p.harness.total_tokens
        # ours fills to within one haystack unit (a noise sentence, a word, a needle line, a list entry)
        assert ours_left < 2 * _largest_piece(small_tokenizer, p.ours.parts.context), task
        if task != "fwe":  # the generation budget is kept free, the answer prefix fits in it
            assert p.harness.input_tokens + p.gen_prefix_tokens <= p.harness.reported_length <= LENGTH
            assert theirs_left >= p.max_gen_toks > ours_left
        else:  # the coded text and answer prefix fill the length; generation runs past it
            assert theirs_left < p.max_gen_toks
    assert rows["vt"].harness.example_tokens > 0 and rows["cwe"].harness.example_tokens == 0
    assert rows["cwe"].ours.example_tokens > 0


def test_vt_fits_names_the_smallest_length_and_the_sampler_returns_there(offline, small_tokenizer):
    state = random.getstate()
    fits, need = P.vt_fits(small_tokenizer, LENGTH)
    assert random.getstate() == state  # measuring moves no generator
    assert fits and need <= LENGTH and P.vt_fits(small_tokenizer, need) == (True, need)
    assert P.vt_fits(small_tokenizer, need - 1) == (False, need)
    assert P.vt_fits(small_tokenizer, LENGTH, incremental=2 * P.VT_INCREMENTAL)[1] > need
    with pytest.raises(ValueError, match=rf"length={need - 1} is too short .*allowed: an integer >= {need}"):
        P.harness_sample("vt", small_tokenizer, need - 1, 0)
    with pytest.raises(ValueError, match="incremental=0; allowed: an integer >= 1"):
        P.vt_fits(small_tokenizer, LENGTH, incremental=0)


def test_the_harness_side_is_seeded_and_reads_its_task_settings(offline, small_tokenizer, rows):
    again = P.harness_prompt("niah_multikey_2", small_tokenizer, LENGTH, P.SEED)
    assert again == rows["niah_multikey_2"].harness
    assert P.harness_prompt("cwe", small_tokenizer, LENGTH, P.SEED) == rows["cwe"].harness
    assert P.harness_config("cwe")["target_delimiter"] == "\n\n"
    assert [P.harness_config(t)["generation_kwargs"]["max_gen_toks"] for t in ("vt", "cwe", "fwe")] == [30, 120, 50]
    import inspect

    from lm_eval.tasks.ruler import niah_utils

    for task, kw in P.HARNESS_NIAH.items():  # our copy of niah_utils' arguments is theirs
        src = inspect.getsource(getattr(niah_utils, task))
        assert all(f"{k}={v!r}".replace("'", '"') in src for k, v in kw.items()), task
    with pytest.raises(ValueError, match="task='qa_1'; allowed: niah_single_1, "):
        P.harness_prompt("qa_1", small_tokenizer, LENGTH, 0)


def test_the_tiny_tokenizer_is_the_tests_tokenizer(small_tokenizer):
    assert D.tiny_tokenizer().get_vocab() == small_tokenizer.get_vocab()


def test_the_docs_section_is_what_the_code_writes(rows, small_tokenizer):
    page = (REPO / D.DOC).read_text()
    assert D.page_section(page) == D.section(small_tokenizer), \
        "regenerate: python -m repro.harness.parity_doc --write " + str(D.DOC)
    for ds in P.DIFFERENCES.values():
        assert all(d.text in page for d in ds)
    assert D.with_section("# Page\n\n" + D.HEADING + "\nold\n\n## Next\nkept\n", "NEW\n") == \
        "# Page\n\nNEW\n## Next\nkept\n"
