"""RULER aggregation tasks: common-words (``cwe``) and frequent-words (``fwe``) extraction.

Hsieh et al. (2024) §3.2. Both ignore ``depth`` (the evidence is spread over
the whole context; ``metadata["depth_applicable"]`` is False) and score with
``string_match_all``.

``cwe``: a numbered list "1. w 2. w ..." in which ``num_cw=10`` words appear
``freq_cw`` times and every other word ``freq_ucw`` times; the question asks
for the 10 most common. RULER uses (30, 3) from 4096 tokens and (6, 1) below;
this module adds (3, 1) below 512 tokens (the counts of RULER's own few-shot
example) and (2, 1) below 320 so the task fits a 256-token window. Words: an
offline list of ~2200 lowercase English words split train/eval (RULER:
wonderwords lists); when a length needs more words than that list holds, the
whole list is drawn instead from that list plus seeded made-up words
(:func:`repro.tasks.pools.made_up_words`; RULER falls back to a larger English
list), so the prompt always fills the length. As in RULER, one solved example
(20 words at (3, 1) below 4096 tokens, 40 words at (10, 3) from 4096, its own
words) comes first, but only from ``shot_min_length`` tokens (default
:data:`CWE_SHOT_MIN_LENGTH`): below that it would take most of the window.

``fwe``: "coded text" of random 6-letter words with Zipf(alpha=2) counts
over a vocabulary of ``length // 50`` words (at least 16); the most frequent
"word" is the noise ``...``; the answer is the next three.
"""

from __future__ import annotations

import random
import string
from typing import Sequence

from repro.tasks.base import Example, LengthTooShort, check_depth, register, string_match_all
from repro.tasks.layout import finish, piece_costs, prompt_tokens
from repro.tasks.pools import check_pool, common_words, in_pool, made_up_words

CWE_PREFIX = ("Below is a numbered list of words. In these words, some appear more often than others. "
              "Memorize the ones that appear most often.\n")
CWE_QUESTION = "\nQuestion: What are the {n} most common words in the above list?"
CWE_ANSWER = " Answer: The top {n} words that appear most often in the list are:"
CWE_SHOT_MIN_LENGTH = 1024
"""Shortest length whose ``cwe`` prompt starts with the solved example (RULER: every length). Below
4096 tokens it costs ~400 tokens with the tiny model's 2K-token vocabulary (single-digit number
tokens): below this length it would take most of the window."""
FWE_PREFIX = ("Read the following coded text and track the frequency of each coded word. "
              "Find the three most frequently appeared coded words. ")
FWE_QUESTION = ("\nQuestion: Do not provide any explanation. Please ignore the dots '....'. "
                "What are the three most frequently appeared words in the above coded text?")
FWE_ANSWER = " Answer: According to the coded text above, the three most frequently appeared words are:"


def _largest(fits, lo: int, hi: int) -> int:
    """Largest n in [lo, hi] with fits(n), assuming monotone; lo - 1 if none."""
    if not fits(lo):
        return lo - 1
    while lo < hi:
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid - 1)
    return lo


def _word_spans(prompt: str, start: int, entries: Sequence[str], targets: set[str], numbered: bool):
    spans, pos = [], start
    for i, w in enumerate(entries):
        piece = f"{i + 1}. {w}" if numbered else w
        if i:
            pos += 1
        if w in targets:
            spans.append((pos + len(piece) - len(w), pos + len(piece)))
        pos += len(piece)
    return spans


def _numbered(words: Sequence[str]) -> str:
    return " ".join(f"{i + 1}. {x}" for i, x in enumerate(words))


@register("cwe")
class CommonWords:
    """RULER ``cwe`` (``freq_cw=30, freq_ucw=3, num_cw=10``, with RULER's short-length tiers).

    Args:
        freq_cw, freq_ucw: repeats of common/uncommon words; ``None`` picks RULER's tier by length.
        num_cw: number of common words asked for.
        key_pool: ``"eval"``/``"train"`` word vocabularies.
        shot_min_length: shortest length that gets RULER's solved example (0: every length, as RULER).
    """

    name = "cwe"
    max_new_tokens = 120  # RULER

    def __init__(self, freq_cw: int | None = None, freq_ucw: int | None = None, num_cw: int = 10,
                 key_pool: str = "eval", shot_min_length: int = CWE_SHOT_MIN_LENGTH):
        if (freq_cw is None) != (freq_ucw is None):
            raise ValueError("freq_cw and freq_ucw: give both or neither")
        if freq_cw is not None and not (isinstance(freq_cw, int) and isinstance(freq_ucw, int)
                                        and freq_cw > freq_ucw >= 1):
            raise ValueError(f"freq_cw={freq_cw!r}, freq_ucw={freq_ucw!r}; "
                             "allowed: integers with freq_cw > freq_ucw >= 1")
        if not isinstance(num_cw, int) or not 1 <= num_cw <= 50:
            raise ValueError(f"num_cw={num_cw!r}; allowed: an integer in [1, 50]")
        if not isinstance(shot_min_length, int) or shot_min_length < 0:
            raise ValueError(f"shot_min_length={shot_min_length!r}; allowed: an integer >= 0")
        self.freq = None if freq_cw is None else (freq_cw, freq_ucw)
        self.num_cw = num_cw
        self.key_pool = check_pool(key_pool)
        self.words = common_words(self.key_pool)
        self.shot_min_length = shot_min_length

    def frequencies(self, length: int) -> tuple[int, int]:
        if self.freq:
            return self.freq
        return (30, 3) if length >= 4096 else (6, 1) if length >= 512 else (3, 1) if length >= 320 else (2, 1)

    def _shot(self, words: Sequence[str], length: int, seed: int) -> str:
        """RULER's solved example: a whole prompt on ``words``, its numbered answer, a newline."""
        fc, fu = (3, 1) if length < 4096 else (10, 3)
        common = list(words[:self.num_cw])
        lst = common * fc + list(words[self.num_cw:]) * fu
        random.Random(f"{self.name}:shot:{seed}").shuffle(lst)
        return (CWE_PREFIX + _numbered(lst) + CWE_QUESTION.format(n=self.num_cw)
                + CWE_ANSWER.format(n=self.num_cw) + " " + _numbered(common) + "\n")

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        fc, fu = self.frequencies(length)
        answer_prefix = CWE_ANSWER.format(n=self.num_cw)
        question = CWE_QUESTION.format(n=self.num_cw) + answer_prefix
        n_shot = 0 if length < self.shot_min_length else 20 if length < 4096 else 40
        reserve = n_shot + fu  # words kept out of the list: the example's, and the filler's spare

        def draw(pool: Sequence[str], salt: str):
            order = random.Random(f"{self.name}:{seed}{salt}").sample(pool, len(pool))
            shot = self._shot(order[len(order) - n_shot:], length, seed) if n_shot else ""
            return order, shot

        def entries(order, w: int, extra: int = 0) -> list[str]:
            lst = order[:self.num_cw] * fc + order[self.num_cw:w] * fu + order[w:w + extra]
            random.Random(f"{self.name}:{seed}:{w}:{extra}").shuffle(lst)
            return lst

        def render(shot: str, lst: list[str]) -> str:
            return shot + CWE_PREFIX + _numbered(lst) + question

        def fits(order, shot, w: int) -> bool:
            return prompt_tokens(tokenizer, render(shot, entries(order, w))) <= length

        lo = self.num_cw + 1
        order, shot = draw(self.words, "")
        hi = len(order) - reserve
        while fits(order, shot, hi):  # the words cannot fill the length: draw from a larger list
            full = prompt_tokens(tokenizer, render(shot, entries(order, hi)))
            per_word = max((full - prompt_tokens(tokenizer, render(shot, entries(order, lo)))) / (hi - lo), 1.0)
            more = max(int((length - full) / per_word * 1.5), len(order) - len(self.words)) + 64
            order, shot = draw(self.words + made_up_words(self.key_pool, len(order) - len(self.words) + more),
                               ":large")
            hi = len(order) - reserve
        w = _largest(lambda w: fits(order, shot, w), lo, hi)
        if w < lo:
            need = prompt_tokens(tokenizer, render(shot, entries(order, lo)))
            note = f" (with the solved example, prepended from {self.shot_min_length} tokens)" if shot else ""
            raise LengthTooShort(f"{self.name}: length={length} is too short; allowed: an integer >= {need} tokens"
                                 f"{note}", need)
        extra = 0
        while extra < fu - 1 and prompt_tokens(tokenizer, render(shot, entries(order, w, extra + 1))) <= length:
            extra += 1
        common = order[:self.num_cw]
        lst = entries(order, w, extra)
        prompt = render(shot, lst)
        start = len(shot) + len(CWE_PREFIX)
        spans = _word_spans(prompt, start, lst, set(common), numbered=True)
        return finish(self.name, tokenizer, prompt, common, length=length, depth=depth, seed=seed, spans=spans,
                      context=(start, len(prompt) - len(question)), answer_prefix=answer_prefix,
                      depth_applicable=False, freq=(fc, fu), num_words=w + extra, fewshot=bool(shot),
                      made_up_words=len(order) > len(self.words))

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return string_match_all(prediction, references)


@register("fwe")
class FrequentWords:
    """RULER ``fwe`` (``alpha=2.0``, coded words of 6 letters, vocabulary ``length // 50``).

    Args:
        alpha: Zipf exponent of the word counts.
        key_pool: ``"eval"``/``"train"``: coded words split by CRC-32 parity.
    """

    name = "fwe"
    max_new_tokens = 50  # RULER

    def __init__(self, alpha: float = 2.0, key_pool: str = "eval", coded_wordlen: int = 6):
        if not alpha > 1.0:
            raise ValueError(f"alpha={alpha!r}; allowed: a float > 1")
        if not isinstance(coded_wordlen, int) or not 3 <= coded_wordlen <= 12:
            raise ValueError(f"coded_wordlen={coded_wordlen!r}; allowed: an integer in [3, 12]")
        self.alpha, self.key_pool, self.wordlen = alpha, check_pool(key_pool), coded_wordlen
        self.zeta = sum(k ** -alpha for k in range(1, 100_000))

    def generate(self, tokenizer, length: int, depth: float, seed: int) -> Example:
        check_depth(depth, self.name)
        rng = random.Random(f"{self.name}:{seed}")
        size = max(length // 50, 16)
        vocab: list[str] = []
        while len(vocab) < size:
            w = "".join(rng.choices(string.ascii_lowercase, k=self.wordlen))
            if w not in vocab and in_pool(w, self.key_pool):
                vocab.append(w)
        vocab[0] = "..."
        answer = vocab[1:4]

        def counts(n: int) -> list[int]:
            return [int(n * k ** -self.alpha / self.zeta) for k in range(1, size + 1)]

        def text(n: int, extra: int = 0) -> list[str]:
            c = counts(n)
            lst = [w for w, m in zip(vocab, c) for _ in range(m)] + [w for w, m in zip(vocab, c) if m == 0][:extra]
            random.Random(f"{self.name}:{seed}:{n}:{extra}").shuffle(lst)
            return lst

        def render(lst: list[str]) -> str:
            return FWE_PREFIX + " ".join(lst) + FWE_QUESTION + FWE_ANSWER

        def valid(n: int) -> bool:  # the three answers strictly outnumber every other coded word
            c = counts(n)
            return c[3] >= 2 and c[3] > c[4]

        n_min = next(n for n in range(1, 10_000) if valid(n))
        fits = lambda n: prompt_tokens(tokenizer, render(text(n))) <= length  # noqa: E731
        n = _largest(fits, n_min, max(n_min, length * 2))
        if n < n_min:
            need = prompt_tokens(tokenizer, render(text(n_min)))
            raise LengthTooShort(f"{self.name}: length={length} is too short; "
                                 f"allowed: an integer >= {need} tokens", need)
        zero_words = [w for w, m in zip(vocab, counts(n)) if m == 0]
        room = length - prompt_tokens(tokenizer, render(text(n)))
        extra, used = 0, 0
        for cost in piece_costs(tokenizer, [" " + w for w in zero_words]):
            if used + cost > room:
                break
            used, extra = used + cost, extra + 1
        while extra > 0 and prompt_tokens(tokenizer, render(text(n, extra))) > length:
            extra -= 1
        lst = text(n, extra)
        prompt = render(lst)
        spans = _word_spans(prompt, len(FWE_PREFIX), lst, set(answer), numbered=False)
        return finish(self.name, tokenizer, prompt, answer, length=length, depth=depth, seed=seed, spans=spans,
                      context=(len(FWE_PREFIX), len(prompt) - len(FWE_QUESTION + FWE_ANSWER)),
                      answer_prefix=FWE_ANSWER, depth_applicable=False, num_words=len(lst))

    def score(self, prediction: str, references: Sequence[str]) -> float:
        return string_match_all(prediction, references)
