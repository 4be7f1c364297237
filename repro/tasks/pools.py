"""More vocabularies for the synthetic tasks, each split into disjoint ``train``/``eval`` halves.

Like :mod:`repro.tasks.vocab`, every pool is sorted and split by index parity,
so a model trained on ``train``-pool examples never sees an ``eval`` key,
name, location, object or emoji. Generated strings that are not drawn from a
list (random variable names, coded words, uuids) are split by the parity of
their CRC-32 instead (:func:`in_pool`).
"""

from __future__ import annotations

import pydoc_data.topics as topics
import random
import re
import zlib
from functools import lru_cache

POOL_NAMES = ("eval", "train")

_ADJECTIVES = """
    able amber ancient angry bitter black bold brave bright brisk broad calm careful cheap
    clever cold cosy crisp curly damp dark deep dizzy dry dull eager early easy empty fair
    fancy fast fierce flat fond fresh frozen funny gentle giant glad golden grand green
    grumpy happy hard heavy hidden hollow honest huge humble icy jolly keen kind large late
    lazy light little lively lonely loud lucky mellow merry mighty misty modern narrow neat
    nervous noble odd old pale plain polite proud quick quiet rapid rare red rich rough
    round royal rusty sad salty sharp shiny short shy silent silly simple sleepy slim slow
    small smooth soft solid sour spicy steady steep stern sticky stormy strange strong sunny
    sweet swift tall tame tender thick thin tidy tiny tough tricky vast warm weary wet
    white wide wild windy wise witty young zesty
"""

_FIRST_NAMES = """
    Aaron Abigail Adam Adrian Alice Amber Amy Andrew Anna Arthur Ava Barbara Ben Bella Brian
    Caleb Carl Carmen Chloe Clara Colin Daisy Daniel David Diana Dora Dylan Edgar Edith
    Elena Eli Emma Eric Ethan Eva Felix Fiona Frank Grace Greta Hank Hannah Harry Helen
    Henry Ian Ida Irene Isaac Ivan Jack Jacob Jade James Jane Jason John Julia Karen Kate
    Kevin Kira Laura Leo Lily Linda Lucas Lucy Luke Mabel Maria Mark Martha Mary Max Mia
    Mike Mila Nadia Nathan Nina Noah Nora Oliver Olivia Oscar Owen Paul Petra Peter Quinn
    Rachel Ralph Rosa Ruby Ryan Sam Sandra Sara Simon Sofia Sophie Stella Steve Susan Theo
    Tina Tom Uma Victor Vera Walter Wendy Xavier Yara Yusuf Zoe
"""

_SURNAMES = """
    Abbott Adams Allen Archer Baker Barnes Bell Bennett Brooks Brown Burke Carter Chapman
    Clark Cole Collins Cook Cooper Cox Crane Davis Dixon Doyle Duncan Ellis Evans Fisher
    Fleming Ford Foster Fox Gardner Gibson Gordon Graham Grant Gray Green Hall Hardy Harper
    Harris Hayes Hill Holmes Hudson Hughes Hunt Jackson James Jenkins Johnson Jones Kelly
    Kennedy King Knight Lane Lawson Lee Lewis Lloyd Marsh Martin Mason Miller Mills Moore
    Morgan Morris Murphy Myers Nash Nelson Newman Norris Owens Palmer Parker Perry Porter
    Powell Price Quinn Reed Reid Reyes Rice Roberts Rogers Ross Russell Ryan Shaw Simpson
    Smith Spencer Stone Sutton Taylor Turner Walker Wallace Ward Watson Webb Wells West
    White Wilson Wood Wright Young
"""

_CITIES = """
    Amsterdam Athens Bangkok Barcelona Berlin Bogota Boston Brisbane Brussels Budapest
    Cairo Calgary Chicago Copenhagen Dakar Denver Dublin Edinburgh Florence Geneva Glasgow
    Hamburg Hanoi Havana Helsinki Houston Istanbul Jakarta Kyoto Lagos Lima Lisbon London
    Lyon Madrid Manila Marseille Melbourne Miami Milan Montreal Moscow Mumbai Munich Nairobi
    Naples Oslo Ottawa Paris Perth Porto Prague Quebec Riga Rome Santiago Seattle Seoul
    Seville Sydney Tallinn Tokyo Toronto Turin Valencia Vancouver Venice Vienna Vilnius
    Warsaw Zurich
"""

_JOBS = """
    accountant architect baker barber biologist butcher carpenter chemist chef dentist
    designer diplomat editor electrician engineer farmer firefighter florist gardener
    geologist historian jeweller journalist judge lawyer librarian locksmith mechanic
    musician nurse optician painter pharmacist photographer pilot plumber poet potter
    professor sailor sculptor surgeon tailor teacher translator veterinarian weaver writer
"""

_INSTRUMENTS = """
    accordion banjo bassoon cello clarinet cornet drums flute guitar harp harmonica
    harpsichord oboe organ piano saxophone sitar trombone trumpet tuba ukulele viola violin
    xylophone
"""

_LOCATIONS = """
    attic balcony basement bathroom bedroom cellar classroom corridor courtyard den
    garage garden greenhouse gym hallway kitchen laboratory library lobby lounge office
    pantry parlor porch shed stable studio terrace workshop yard
"""

_OBJECTS = """
    apple ball banana basket book bottle box candle cup football glove hat jar key kite
    knife lamp letter map milk notebook orange parcel pen pencil plate radio ring rope
    scarf shoe spoon ticket torch towel umbrella wallet watch
"""

_EMOJI = ("\U0001F984 \U0001F419 \U0001F9C0 \U0001F30B \U0001F3BB \U0001F9ED \U0001F4A1 \U0001F9F2 "
          "\U0001F36F \U0001F99C \U0001F680 \U0001F308 \U0001F9E9 \U0001F341 \U0001F3B2 \U0001F40C "
          "\U0001F95D \U0001F9FF \U0001F3FA \U0001F52D")


def _split(words: str | tuple[str, ...]) -> dict[str, tuple[str, ...]]:
    items = tuple(sorted(set(words.split() if isinstance(words, str) else words)))
    return {"eval": items[0::2], "train": items[1::2]}


_POOLS: dict[str, dict[str, tuple[str, ...]]] = {
    "adjectives": _split(_ADJECTIVES),
    "first_names": _split(_FIRST_NAMES),
    "surnames": _split(_SURNAMES),
    "cities": _split(_CITIES),
    "jobs": _split(_JOBS),
    "instruments": _split(_INSTRUMENTS),
    "locations": _split(_LOCATIONS),
    "objects": _split(_OBJECTS),
    "emoji": _split(_EMOJI),
}


def check_pool(pool: str) -> str:
    if pool not in POOL_NAMES:
        raise ValueError(f"unknown pool {pool!r}; allowed: {', '.join(POOL_NAMES)}")
    return pool


def pool(kind: str, split: str) -> tuple[str, ...]:
    """``pool("locations", "eval")``: one half of a named vocabulary."""
    if kind not in _POOLS:
        raise ValueError(f"unknown vocabulary {kind!r}; allowed: {', '.join(sorted(_POOLS))}")
    return _POOLS[kind][check_pool(split)]


def in_pool(text: str, split: str) -> bool:
    """Whether a generated string (variable name, coded word) belongs to ``split``: CRC-32 parity."""
    return (zlib.crc32(text.encode()) & 1) == POOL_NAMES.index(check_pool(split))


@lru_cache(maxsize=None)
def common_words(split: str) -> tuple[str, ...]:
    """A few thousand lowercase English words (from Python's shipped documentation), one half.

    RULER's common/frequent-word tasks draw from wonderwords' noun/adjective/verb
    lists; this is an offline stand-in of similar size, also split train/eval.
    """
    text = " ".join(topics.topics[k] for k in sorted(topics.topics))
    words = sorted(set(re.findall(r"(?<![\w.])[a-z]{4,10}(?![\w.])", text)))
    return tuple(words[POOL_NAMES.index(check_pool(split))::2])


_ONSETS = tuple("bcdfghjklmnprstvwz") + ("br", "ch", "cl", "dr", "fl", "gr", "pl", "sh", "st", "tr")
_VOWELS = tuple("aeiou")
_CODAS = ("", "", "", "n", "r", "s", "l", "m", "t")
_MADE_UP: dict[str, list[str]] = {"eval": [], "train": []}
_MADE_UP_STATE: dict[str, object] = {}


def made_up_words(split: str, n: int) -> tuple[str, ...]:
    """The first ``n`` pronounceable made-up lowercase words (``"brotesa"``) of one half.

    An unbounded, seeded word list for ``cwe`` at lengths the real word list
    cannot fill (RULER falls back to a larger English word list there). One
    fixed stream of 2-3 syllable words is split by CRC-32 parity
    (:func:`in_pool`); words of :func:`common_words` are skipped, so the lists
    stay disjoint from each other and between halves.
    """
    check_pool(split)
    if not isinstance(n, int) or n < 0:
        raise ValueError(f"n={n!r}; allowed: an integer >= 0")
    if not _MADE_UP_STATE:
        _MADE_UP_STATE["rng"] = random.Random("made-up-words")
        _MADE_UP_STATE["seen"] = set(common_words("eval")) | set(common_words("train"))
    rng, seen = _MADE_UP_STATE["rng"], _MADE_UP_STATE["seen"]
    out = _MADE_UP[split]
    while len(out) < n:
        w = "".join(rng.choice(_ONSETS) + rng.choice(_VOWELS) for _ in range(rng.randint(2, 3))) + rng.choice(_CODAS)
        if w not in seen:
            seen.add(w)
            _MADE_UP["eval" if in_pool(w, "eval") else "train"].append(w)
    return tuple(out[:n])
