"""RULER question answering, ``qa_1`` (SQuAD) and ``qa_2`` (HotpotQA); Hsieh et al. (2024) §3.2.

The context is numbered documents ("Document i:\\n...") holding the gold
document(s) among distractors; the question comes after RULER's instruction
and the score is ``string_match_part`` (any reference found).

Without ``dataset_path`` this is a **substitute, not SQuAD/HotpotQA**:
generated fact documents (``metadata["substitute"]`` says so). ``qa_1`` asks
one fact of one person ("In which city was Ada Brooks born?"), ``qa_2`` needs
two documents (a person's employer, then where that company is based). With
``dataset_path`` (a local SQuAD v1/v2 JSON, a HotpotQA JSON, or JSONL of
``{"question", "answers"|"answer", "context"}`` records) the real questions
are used, question ``seed % n_questions``; distractors are other paragraphs
(same article first for SQuAD, as RULER). Nothing is downloaded.

``depth`` places the first gold document; a second gold document (qa_2) goes
to a seeded random position. The last distractor document is cut (at a
sentence for generated documents, at a word for real ones) so the length is exact.
"""

from __future__ import annotations

import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Sequence

from repro.tasks.base import Example, check_depth, register, string_match_part
from repro.tasks.layout import finish, fit_count, n_tokens, piece_costs, require
from repro.tasks.pools import check_pool, pool
from repro.tasks.vocab import word_pool

INSTRUCTION = ("Answer the question based on the given documents. "
               "Only give me the answer and do not output any other words.")
PREFIX = INSTRUCTION + "\n\nThe following are given documents.\n\n"
ANSWER_PREFIX = " Answer:"
QUESTION = "\n\n" + INSTRUCTION + "\n\nQuestion: {query}" + ANSWER_PREFIX
DOC = "Document {i}:\n{text}"
SUBSTITUTE = "generated facts, not SQuAD/HotpotQA"


# ----------------------------------------------------------------- real datasets

@lru_cache(maxsize=4)
def load_qa_dataset(path: str) -> tuple[list[dict], list[str]]:
    """``(questions, documents)``: each question has ``query``, ``outputs``, ``gold`` (doc indices), ``near``."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"dataset_path={path!r} is not a file; allowed: a local SQuAD/HotpotQA .json or .jsonl")
    text = p.read_text(encoding="utf-8")
    records = ([json.loads(line) for line in text.splitlines() if line.strip()] if p.suffix == ".jsonl"
               else json.loads(text))
    docs: dict[str, int] = {}

    def doc(t: str) -> int:
        return docs.setdefault(t, len(docs))

    qas = []
    if isinstance(records, dict) and "data" in records:  # SQuAD
        for article in records["data"]:
            ids = [doc(par["context"]) for par in article["paragraphs"]]
            for par, i in zip(article["paragraphs"], ids):
                for qa in par["qas"]:
                    if qa.get("is_impossible") or not qa.get("answers"):
                        continue
                    qas.append({"query": qa["question"], "outputs": [a["text"] for a in qa["answers"]],
                                "gold": [i], "near": [j for j in ids if j != i]})
    else:  # HotpotQA list, or JSONL records
        for r in records:
            answers = r.get("answers", r.get("answer"))
            answers = [answers] if isinstance(answers, str) else list(answers)
            ctx = r["context"]
            if isinstance(ctx, str):
                qas.append({"query": r["question"], "outputs": answers, "gold": [doc(ctx)], "near": []})
                continue
            support = {t for t, _ in r.get("supporting_facts", [])}
            ids = {t: doc(f"{t}\n{''.join(s)}") for t, s in ctx}
            gold = [i for t, i in ids.items() if t in support] or list(ids.values())
            qas.append({"query": r["question"], "outputs": answers, "gold": gold,
                        "near": [i for i in ids.values() if i not in gold]})
    if not qas:
        raise ValueError(f"dataset_path={path!r} holds no answerable question")
    return qas, list(docs)


# ----------------------------------------------------------------- generated substitute

def _article(sentence: str) -> str:
    head, _, word = sentence.rpartition(" a ")
    return f"{head} an {word}" if word[:1] in "aeiou" else sentence


class _Facts:
    def __init__(self, rng: random.Random, key_pool: str):
        self.rng, self.kp = rng, key_pool
        self.used: set[str] = set()

    def fresh(self, make) -> str:
        for _ in range(10_000):
            x = make()
            if x not in self.used:
                self.used.add(x)
                return x
        raise ValueError("ran out of distinct names; use a shorter length")

    def person(self) -> str:
        r = self.rng
        return self.fresh(lambda: f"{r.choice(pool('first_names', self.kp))} {r.choice(pool('surnames', self.kp))}")

    def company(self) -> str:
        r = self.rng
        return self.fresh(lambda: f"{r.choice(pool('adjectives', self.kp)).title()} "
                                  f"{r.choice(word_pool(self.kp)).title()} Company")

    def person_doc(self, name: str, n: int, employer: str | None = None) -> list[str]:
        r = self.rng
        facts = [f"{name} was born in {r.choice(pool('cities', self.kp))}.",
                 _article(f"{name} works as a {r.choice(pool('jobs', self.kp))}."),
                 f"{name} plays the {r.choice(pool('instruments', self.kp))}.",
                 f"{name} works for {employer or self.company()}."]
        r.shuffle(facts)
        return facts[:n]

    def company_doc(self, name: str, n: int) -> list[str]:
        r = self.rng
        facts = [f"{name} is based in {r.choice(pool('cities', self.kp))}.",
                 f"{name} was founded by {self.person()}.",
                 f"{name} makes {r.choice(word_pool(self.kp))}s."]
        r.shuffle(facts)
        return facts[:n]


class QA:
    """RULER ``qa_1``/``qa_2``; see the module docstring.

    Args:
        hops: 1 (SQuAD-like) or 2 (HotpotQA-like) for the generated substitute.
        dataset_path: local SQuAD/HotpotQA file; ``None`` uses the generated substitute.
        key_pool: ``"eval"``/``"train"`` names, cities, jobs of the substitute.
    """

    max_new_tokens = 32  # RULER

    def __init__(self, name: str, hops: int, dataset_path: str | None = None, key_pool: str = "eval"):
        if hops not in (1, 2):
            raise ValueError(f"hops={hops!r}; allowed: 1 or 2")
        self.name, self.hops, self.key_pool = name, hops, check_pool(key_pool)
        self.dataset_path = None if dataset_path is None else str(dataset_path)
        if self.dataset_path:
            load_qa_dataset(self.dataset_path)

    # each document is a list of pieces; the last distractor may be cut after any piece
    def _content(self, rng: random.Random, seed: int):
        if self.dataset_path:
            qas, docs = load_qa_dataset(self.dataset_path)
            q = qas[seed % len(qas)]
            others = [i for i in range(len(docs)) if i not in q["gold"] and i not in q["near"]]
            rng.shuffle(others)
            gold = [docs[i].split(" ") for i in q["gold"]]
            order = q["near"] + others
            distract = (docs[i].split(" ") for i in order)
            return q["query"], list(q["outputs"]), gold, distract, " "
        f = _Facts(rng, self.key_pool)
        if self.hops == 1:
            name = f.person()
            city = rng.choice(pool("cities", self.key_pool))
            gold = [[f"{name} was born in {city}."] + [s for s in f.person_doc(name, 3) if " born in " not in s][:2]]
            rng.shuffle(gold[0])
            query, answer = f"In which city was {name} born?", city
        else:
            name, comp = f.person(), f.company()
            city = rng.choice(pool("cities", self.key_pool))
            d1 = [f"{name} works for {comp}."] + [s for s in f.person_doc(name, 4) if " works for " not in s][:1]
            d2 = [f"{comp} is based in {city}."] + [s for s in f.company_doc(comp, 3) if " based in " not in s][:1]
            rng.shuffle(d1)
            rng.shuffle(d2)
            gold = [d1, d2]
            query, answer = f"In which city is the company that {name} works for based?", city

        def distractors():
            while True:
                if self.hops == 2 and rng.random() < 0.5:
                    yield f.company_doc(f.company(), rng.randint(1, 3))
                else:
                    yield f.person_doc(f.person(), rng.randint(1, 3))
        return query, [answer], gold, distractors(), " "

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        query, answers, gold, distract_iter, joiner = self._content(rng, seed)
        question = QUESTION.format(query=query)
        gold_texts = [joiner.join(d) for d in gold]
        header = DOC.format(i=99, text="")
        fixed = 1 + n_tokens(tokenizer, PREFIX) + n_tokens(tokenizer, question) + sum(
            piece_costs(tokenizer, ["\n\n" + header + t for t in gold_texts]))
        require(length, fixed, self.name)
        gold_depths = [float(depth)] + [rng.random() for _ in gold[1:]]

        # flatten distractor pieces until the budget is surely exceeded
        pieces: list[tuple[int, str]] = []
        costs: list[int] = []
        budget = length - fixed
        for di, d in enumerate(distract_iter):
            if sum(costs) > budget:
                break
            first = len(pieces)
            pieces += [(di, p) for p in d]
            texts = [("\n\n" + header if j == first else joiner) + p for j, (_, p) in enumerate(pieces[first:], first)]
            costs += piece_costs(tokenizer, texts)

        def render(k: int):
            docs: list[list[str]] = []
            last = None
            for di, p in pieces[:k]:
                if not docs or di != last:
                    docs.append([])
                docs[-1].append(p)
                last = di
            body = [joiner.join(d) for d in docs]
            slots = sorted((round(gd * len(body)), g) for g, gd in enumerate(gold_depths))
            order: list[tuple[str, int | None]] = []
            j = 0
            for i in range(len(body) + 1):
                while j < len(slots) and slots[j][0] == i:
                    order.append((gold_texts[slots[j][1]], slots[j][1]))
                    j += 1
                if i < len(body):
                    order.append((body[i], None))
            text, spans = PREFIX, [None] * len(gold)
            for n, (t, g) in enumerate(order):
                block = DOC.format(i=n + 1, text=t)
                if n:
                    text += "\n\n"
                if g is not None:
                    spans[g] = (len(text), len(text) + len(block))
                text += block
            return text + question, spans

        k = fit_count(tokenizer, length, lambda k: render(k)[0], costs, fixed, self.name)
        prompt, spans = render(k)
        extra = {"substitute": SUBSTITUTE} if not self.dataset_path else {"dataset_path": self.dataset_path}
        return finish(self.name, tokenizer, prompt, answers, length=length, depth=depth, seed=seed, spans=spans,
                      context=(len(PREFIX), len(prompt) - len(question)), answer_prefix=ANSWER_PREFIX, query=query,
                      **extra)

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return string_match_part(prediction, references)


@register("qa_1")
def qa_1(dataset_path: str | None = None, key_pool: str = "eval") -> QA:
    """RULER ``qa_1`` (SQuAD); without ``dataset_path`` a one-hop generated substitute."""
    return QA("qa_1", 1, dataset_path, key_pool)


@register("qa_2")
def qa_2(dataset_path: str | None = None, key_pool: str = "eval") -> QA:
    """RULER ``qa_2`` (HotpotQA); without ``dataset_path`` a two-hop generated substitute."""
    return QA("qa_2", 2, dataset_path, key_pool)
