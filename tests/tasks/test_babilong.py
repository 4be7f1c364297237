"""BABILong's qa1-qa5, generated: every story, read back from the prompt in order by an independent bAbI reader,
answers its question with the reference; the prompt fits the length; scoring is BABILong's substring match."""

import re

import pytest

from repro.tasks import get_task
from repro.tasks.babilong import KINDS, SUPPORTING

MOVE = r"(?:went to|journeyed to|travelled to|moved to|went back to)"
PICK = r"(?:picked up|took|grabbed|got)"
DROP = r"(?:dropped|put down|discarded|left)"
GIVE = r"(?:gave|handed|passed)"


def facts_in_order(ex) -> list[str]:
    """The hidden sentences (supporting and distractor facts) in the order they stand in the prompt."""
    spans = sorted(ex.metadata["type_spans"]["supporting"] + ex.metadata["type_spans"]["interference"])
    return [ex.prompt[s:e].strip() for s, e in spans]


def read_story(facts: list[str], question: str) -> str:
    """bAbI's answer to ``question`` from ``facts`` (in story order), worked out from the sentences alone."""
    place, holder, history = {}, {}, {}
    north = {}
    gives = []
    for f in facts:
        if m := re.fullmatch(rf"(\w+) {MOVE} the (\w+)\.", f):
            place[m[1]] = m[2]
            for o, h in holder.items():
                if h == m[1]:
                    history.setdefault(o, []).append(m[2])
        elif m := re.fullmatch(rf"(\w+) {PICK} the (\w+)\.", f):
            holder[m[2]] = m[1]
            history.setdefault(m[2], []).append(place.get(m[1]))
        elif m := re.fullmatch(rf"(\w+) {DROP} the (\w+)\.", f):
            holder.pop(m[2], None)
        elif m := re.fullmatch(rf"(\w+) {GIVE} the (\w+) to (\w+)\.", f):
            gives.append((m[1], m[2], m[3]))
            holder[m[2]] = m[3]
        elif m := re.fullmatch(r"The (\w+) is (north|south|east|west) of the (\w+)\.", f):
            north[(m[1], m[2])] = m[3]
        else:
            raise AssertionError(f"unparsed fact {f!r}")
    if m := re.fullmatch(r"Where is (\w+)\?", question):
        who = m[1]
        return place[who] if who in place else place[holder[who]]  # a person, or an object (its holder's place)
    if m := re.fullmatch(r"Where is the (\w+)\?", question):
        return place[holder[m[1]]]
    if m := re.fullmatch(r"Where was the (\w+) before the (\w+)\?", question):
        seen = [p for p in history[m[1]] if p is not None]
        return seen[seen.index(m[2]) - 1]
    if m := re.fullmatch(r"What is (\w+) of the (\w+)\?", question):
        (found,) = [a for (a, d), b in north.items() if d == m[1] and b == m[2]]
        return found
    if m := re.fullmatch(r"What is the (\w+) (\w+) of\?", question):
        return north[(m[1], m[2])]
    if m := re.fullmatch(r"Who gave the (\w+)\?", question):
        return [g for g, o, _ in gives if o == m[1]][-1]
    if m := re.fullmatch(r"Who did (\w+) give the (\w+) to\?", question):
        return [r for g, o, r in gives if g == m[1] and o == m[2]][-1]
    if m := re.fullmatch(r"What did (\w+) give to (\w+)\?", question):
        return [o for g, o, r in gives if g == m[1] and r == m[2]][-1]
    raise AssertionError(f"unparsed question {question!r}")


@pytest.mark.parametrize("kind", KINDS)
def test_every_story_answers_its_question_in_prompt_order(small_tokenizer, kind):
    task = get_task(f"babilong_qa{kind}")
    questions = set()
    for seed in range(12):
        for depth in (0.0, 0.35, 1.0):
            ex = task.generate(small_tokenizer, 512, depth, seed)
            facts = facts_in_order(ex)
            assert len(ex.metadata["type_spans"]["supporting"]) == SUPPORTING[kind]
            assert read_story(facts, ex.metadata["question"]) == ex.references[0], (facts, ex.metadata["question"])
            assert ex.metadata["n_tokens"] <= 512 and ex.prompt.endswith("\nAnswer:")
            assert ex.metadata["question"] in ex.prompt
            questions.add(re.sub(r"[A-Z]\w+|the \w+", "_", ex.metadata["question"]))
    assert len(questions) >= (2 if kind in (4, 5) else 1)  # qa4 and qa5 ask more than one kind of question


def test_the_first_supporting_fact_sits_at_the_depth(small_tokenizer):
    task = get_task("babilong_qa2")
    early = task.generate(small_tokenizer, 1024, 0.0, 3).metadata["evidence_depths"][0]
    late = task.generate(small_tokenizer, 1024, 0.9, 3).metadata["evidence_depths"][0]
    assert early < 0.1 < 0.8 < late


def test_scoring_is_babilongs_substring_match():
    task = get_task("babilong_qa1")
    assert task.score("The most recent location of Mary is Kitchen.", ["kitchen"]) == 1.0
    assert task.score("\x00kitchen\n", ["kitchen"]) == 1.0
    assert task.score("garden", ["kitchen"]) == 0.0


def test_unknown_kind_names_the_allowed():
    from repro.tasks.babilong import BabiLong

    with pytest.raises(ValueError, match=r"kind=6; allowed: 1, 2, 3, 4, 5"):
        BabiLong("babilong_qa6", 6)
