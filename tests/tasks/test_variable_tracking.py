"""RULER vt: chain format, order, scoring."""

from __future__ import annotations

import re

import pytest

from repro.tasks import get_task
from repro.tasks.base import LengthTooShort
from repro.tasks.layout import NOISE


def test_chain_in_order_and_answers(tokenizer):
    ex = get_task("vt").generate(tokenizer, 800, 0.2, 4)
    refs, value = ex.references, ex.metadata["value"]
    assert len(refs) == 5 and all(re.fullmatch(r"[A-Z]{5}", v) for v in refs)
    spans = ex.metadata["evidence_char_spans"]
    assert ex.prompt[slice(*spans[0])] == f"VAR {refs[0]} = {value}"
    for j in range(1, 5):
        assert ex.prompt[slice(*spans[j])] == f"VAR {refs[j]} = VAR {refs[j - 1]}"
    assert [s for s, _ in spans] == sorted(s for s, _ in spans)
    assert ex.prompt.count(f"= {value}") == 1
    answer = (f" Answer: According to the chain(s) of variable assignment in the text above, "
              f"5 variables are assigned the value {value}, they are: ")
    assert ex.prompt.endswith(f"in the text above.{answer}") and ex.metadata["answer_prefix"] == answer


def test_noise_blocks_and_assignments_on_their_own_lines(tokenizer):
    """RULER's layout: every noise block and every assignment is a line of its own."""
    ex = get_task("vt", num_chains=2).generate(tokenizer, 1500, 0.5, 3)
    s, e = ex.metadata["context_char_span"]
    lines = ex.prompt[s:e].split("\n")
    assert ex.prompt[s - 2:s] == "\n\n" and ex.prompt[e] == "\n"
    block = " ".join(NOISE)
    assignments = [line for line in lines if line.startswith("VAR ")]
    assert len(assignments) == 2 * 5 and all(re.fullmatch(r"VAR [A-Z]{5} = (\d{5}|VAR [A-Z]{5})", a)
                                             for a in assignments)
    noise = [line for line in lines if not line.startswith("VAR ")]
    assert noise[:-1] == [block] * (len(noise) - 1) and block.startswith(noise[-1])  # the last may be cut
    assert len(noise) > 10
    for a, b in ex.metadata["evidence_char_spans"]:
        assert ex.prompt[a - 1] == "\n" and ex.prompt[b] == "\n"


def test_scoring_and_options(tokenizer):
    task = get_task("vt")
    refs = ("AAAAA", "BBBBB", "CCCCC", "DDDDD", "EEEEE")
    assert task.score("AAAAA, BBBBB, CCCCC, DDDDD, EEEEE", refs) == 1.0
    assert task.score("AAAAA BBBBB", refs) == 0.4
    assert task.score("none", refs) == 0.0
    two = get_task("vt", num_chains=2).generate(tokenizer, 800, 0.5, 0)
    assert two.prompt.count("VAR ") == 2 * (5 + 4)
    shot = get_task("vt", fewshot=True).generate(tokenizer, 800, 0.5, 0)
    assert shot.prompt.count("Memorize and track") == 2 and shot.metadata["fewshot"]
    head, main = shot.prompt.split("\n\nMemorize and track", 1)
    names = re.findall(r"VAR ([A-Z]{3}) = ", head)
    assert len(names) == 5 and head.endswith("they are: " + " ".join(names))  # the example is solved
    assert 800 - 20 <= shot.metadata["n_tokens"] <= 800


def test_fewshot_fits_or_says_how_long(tokenizer):
    """fewshot=True at short lengths: a clear LengthTooShort naming the minimum, which then fits."""
    task = get_task("vt", fewshot=True)
    with pytest.raises(LengthTooShort, match=r"vt: length=256 is too short; allowed: an integer >= \d+ tokens "
                                             r"\(fewshot=True: the solved example takes \d+ of them\)"):
        task.generate(tokenizer, 256, 0.5, 0)
    for pool in ("eval", "train"):
        task = get_task("vt", fewshot=True, key_pool=pool)
        for seed in range(3):  # seeds draw other names: the shortest fitting length moves
            minimum = None
            for length in range(320, 400):
                try:
                    ex = task.generate(tokenizer, length, 0.5, seed)
                except LengthTooShort as err:
                    assert err.minimum > length and minimum is None
                    continue
                assert ex.metadata["n_tokens"] <= length
                minimum = minimum or length
            assert minimum is not None
