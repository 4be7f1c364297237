"""RULER parity: lm-evaluation-harness's RULER prompts beside ours, split into parts and measured in tokens.

For one task (:data:`TASKS`), a tokenizer, a length and a seed, :func:`harness_prompt` builds the prompt that
lm-eval's RULER feeds a model: it seeds Python's ``random`` and ``numpy.random`` (lm-eval's generators draw from
the global generators; ``cwe`` also shuffles with a module-level ``random.Random`` that is reseeded too), calls
lm-eval's own generator with the settings its task uses (``niah_utils``, ``vt_utils.get_dataset``,
``cwe_utils.get_dataset``, ``fwe_utils.get_dataset``; one sample instead of 500) and joins the sample's ``input``
and ``gen_prefix`` with the task's ``target_delimiter`` the way lm-eval's ``build_qa_turn`` does without a chat
template. :func:`our_prompt` is ``repro.evaluate.make_task(task).generate(tokenizer, length, depth, seed)``.
:func:`split` cuts either into the same parts (a solved example, the task description, the context, the needles
or chain statements in it, the question, the answer prefix); :func:`compare` builds both and counts tokens.

:data:`DIFFERENCES` lists every difference between the two, one sentence each, with the check that observes it;
``python -m repro.harness.parity_doc`` writes the section of ``docs/evaluation_suite.md`` from them and from the token
counts measured with the suite's tiny tokenizer (:func:`tiny_tokenizer`). Call
:func:`repro.harness.offline.go_offline` before this module touches lm-eval (its RULER module downloads NLTK's
sentence splitter when it is imported); the essay haystack is :func:`repro.harness.offline.essay_words`, never
lm-eval's own (a hub dataset).
"""

from __future__ import annotations

import contextlib
import io
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Sequence

from repro.evaluate import make_task
from repro.harness.offline import essay_words
from repro.harness.run import seed_globals
from repro.harness.ruler import NIAH_SETTINGS, VT_STEP, vt_fits, vt_minimum, vt_solved
from repro.tasks.base import string_match_all as our_string_match_all

__all__ = ["vt_fits"]

NIAH_TASKS = ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2",
              "niah_multikey_3", "niah_multivalue", "niah_multiquery")
TASKS = NIAH_TASKS + ("vt", "cwe", "fwe")
"""Our task names; lm-eval's are the same for NIAH and ``ruler_vt``, ``ruler_cwe``, ``ruler_fwe`` for the rest."""
HARNESS_NAMES = {**{t: t for t in NIAH_TASKS}, "vt": "ruler_vt", "cwe": "ruler_cwe", "fwe": "ruler_fwe"}
"""lm-eval's task name for each of ours."""

HARNESS_NIAH = NIAH_SETTINGS
"""The ``generate_samples`` arguments of each function of lm-eval's ``niah_utils`` (besides the template)."""
VT_INCREMENTAL = VT_STEP
LENGTH = 1024
"""The length of the committed comparison."""
SEED = 0
DEPTH = 0.5
"""Where our first needle goes (lm-eval draws its depths)."""


# ----------------------------------------------------------------- records

@dataclass(frozen=True)
class Parts:
    """A prompt cut into the pieces both sides are compared on (each a substring of the prompt)."""

    example: str
    """A solved example before the task (``""`` when there is none)."""
    description: str
    """The task description, up to the context."""
    context: str
    """The haystack with the needles in it (the word list of ``cwe``/``fwe``)."""
    needles: tuple[str, ...]
    """The needle sentences (NIAH) or chain statements (``vt``) that answer the question, as in the context."""
    question: str
    """From the end of the context to the answer prefix."""
    answer_prefix: str
    """What the model continues: ours ends the prompt with it; lm-eval adds its ``gen_prefix`` after the
    ``target_delimiter``, both included here."""


@dataclass(frozen=True)
class Prompt:
    """One side's prompt for one task."""

    text: str
    """What the model is fed (lm-eval: ``input``, delimiter and ``gen_prefix``; ours: the prompt)."""
    parts: Parts
    references: tuple[str, ...]
    """The answers scored against."""
    input_tokens: int
    """lm-eval: tokens of its ``input`` as its generator counts them; ours: tokens of the prompt before the
    answer prefix. Special tokens as the tokenizer adds them."""
    total_tokens: int
    """Tokens of :attr:`text`, special tokens as the tokenizer adds them."""
    context_tokens: int
    """Tokens of the context alone (no special tokens)."""
    example_tokens: int
    """Tokens of the solved example alone (no special tokens; 0 without one)."""
    reported_length: int
    """lm-eval: its sample's ``length`` (what it counted plus its generation budget); ours: :attr:`total_tokens`."""


@dataclass(frozen=True)
class Parity:
    """Both prompts for one task, length and seed."""

    task: str
    length: int
    seed: int
    harness: Prompt
    ours: Prompt
    max_gen_toks: int
    """lm-eval's ``generation_kwargs.max_gen_toks`` for the task."""

    @property
    def gen_prefix_tokens(self) -> int:
        """Tokens lm-eval adds after its ``input``: the delimiter and ``gen_prefix``."""
        return self.harness.total_tokens - self.harness.input_tokens


@dataclass(frozen=True)
class Difference:
    """One documented difference: the sentence for the docs and the check that observes it."""

    part: str
    """The :class:`Parts` field it is about, or ``"sizing"`` / ``"scoring"``."""
    text: str
    """One short sentence."""
    observed: Callable[[Parity], bool]
    """True when ``Parity`` shows the difference."""
    undo: Callable[[str], str] | None = None
    """For differences in a compared part: maps lm-eval's part onto ours (the rest must then agree)."""


# ----------------------------------------------------------------- lm-eval's side

def _ruler():
    import lm_eval.tasks.ruler as ruler  # lm-eval: optional and heavy; loads after go_offline() (module docstring)

    return Path(list(ruler.__path__)[0])


def harness_config(task: str) -> dict:
    """The task's YAML settings in lm-eval (``include`` resolved; ``!function`` tags kept as text)."""
    import yaml  # not pinned in requirements.txt: it comes with lm-eval, whose YAML this reads

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: loader.construct_scalar(node))
    name = HARNESS_NAMES[_check_task(task)]

    def load(path: Path) -> dict:
        cfg = yaml.load(path.read_text(), Loader=Loader)  # noqa: S506 - SafeLoader with one tag added
        base = load(path.parent / cfg.pop("include")) if "include" in cfg else {}
        return {**base, **cfg}

    for path in sorted(_ruler().glob("*.yaml")):
        cfg = load(path)
        if cfg.get("task") == name:
            return cfg
    raise ValueError(f"lm-eval has no RULER task {name!r}; allowed: {', '.join(HARNESS_NAMES.values())}")


def _check_task(task: str) -> str:
    if task not in TASKS:
        raise ValueError(f"task={task!r}; allowed: {', '.join(TASKS)}")
    return task


def _quiet(fn, *args, **kwargs):
    """Call ``fn`` with its prints and progress bars swallowed (lm-eval's vt prints every step)."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return fn(*args, **kwargs)


def _n(tokenizer, text: str) -> int:
    return len(tokenizer(text).input_ids)


def _fed(cfg: dict, text: str, gen_prefix: str) -> str:
    """lm-eval's plain-text context: the doc's text, the target delimiter where neither side has whitespace at
    the join, the ``gen_prefix`` (``ConfigurableTask.build_qa_turn``)."""
    # lm-eval: optional and heavy; loads after go_offline() (module docstring)
    from lm_eval.api.utils import Message, requires_delimiter

    delim = cfg.get("target_delimiter", " ")
    return "".join(m.to_text() for m in (Message("user", text, delim if requires_delimiter(text, gen_prefix)
                                                 else ""), Message("assistant", gen_prefix)))


def harness_sample(task: str, tokenizer, length: int, seed: int, essays: Sequence[str] | None = None) -> dict:
    """One sample of lm-eval's generator for ``task`` (its ``input``, ``outputs``, ``gen_prefix``, ...), the
    global generators seeded with ``seed`` first. ``essays``: the essay haystack (default
    :func:`repro.harness.offline.essay_words`)."""
    _check_task(task)
    if not isinstance(length, int) or length < 1:
        raise ValueError(f"length={length!r}; allowed: an integer >= 1")
    # lm-eval: optional and heavy; loads after go_offline() (module docstring)
    from lm_eval.tasks.ruler import cwe_utils, fwe_utils, niah_utils, prepare_niah, vt_utils

    if task == "vt":
        fits, need = vt_fits(tokenizer, length)
        if not fits:
            raise ValueError(f"vt: length={length} is too short for lm-eval's vt with this tokenizer (its sampler "
                             f"would loop forever); allowed: an integer >= {need}")
    seed_globals(seed)
    if task in HARNESS_NIAH:
        kw = HARNESS_NIAH[task]
        if kw["type_haystack"] == "essay":
            haystack = list(essays) if essays is not None else essay_words()
        else:
            haystack = prepare_niah.get_haystack(kw["type_haystack"])
        return _quiet(prepare_niah.generate_samples, haystack, tokenizer, max_seq_length=length,
                      template=niah_utils.TEMPLATE, num_samples=1, **kw)[0]
    if task == "vt":
        icl, example_tokens = _quiet(vt_solved, tokenizer)
        need = vt_minimum(tokenizer, VT_INCREMENTAL, False, example_tokens)
        if need > length:  # this draw's solved example is longer than the one vt_fits measured
            raise ValueError(f"vt: length={length} is too short for lm-eval's vt with this tokenizer and seed "
                             f"{seed}; allowed: an integer >= {need}")
        return _quiet(vt_utils.sys_vartrack_w_noise_random, tokenizer=tokenizer, num_samples=1,
                      max_seq_length=length, icl_example=icl)[0]
    if task == "cwe":
        cwe_utils.RNG.seed(seed)
        return _quiet(cwe_utils.sys_word_pair_random, num_samples=1, max_seq_length=length, tokenizer=tokenizer)[0]
    return _quiet(fwe_utils.sys_kwext, tokenizer=tokenizer, max_seq_length=length, num_samples=1)[0]


def harness_prompt(task: str, tokenizer, length: int, seed: int, essays: Sequence[str] | None = None) -> Prompt:
    """lm-eval's prompt for ``task`` as fed to the model, split (:func:`split`) and counted."""
    sample = harness_sample(task, tokenizer, length, seed, essays)
    text = _fed(harness_config(task), sample["input"], sample["gen_prefix"])
    return _prompt(tokenizer, task, text, text[len(sample["input"]):], sample["outputs"], sample["length"])


def _prompt(tokenizer, task: str, text: str, answer_prefix: str, references: Sequence[str],
            reported: int | None) -> Prompt:
    parts = split(task, text, answer_prefix, references)
    total = _n(tokenizer, text)
    bare = lambda s: len(tokenizer(s, add_special_tokens=False).input_ids) if s else 0  # noqa: E731
    return Prompt(text, parts, tuple(references), _n(tokenizer, text[:len(text) - len(answer_prefix)]), total,
                  bare(parts.context), bare(parts.example), total if reported is None else int(reported))


# ----------------------------------------------------------------- our side

def our_prompt(task: str, tokenizer, length: int, seed: int, depth: float = DEPTH) -> Prompt:
    """Our prompt for ``task`` (``repro.evaluate.make_task(task).generate``), split and counted."""
    ex = make_task(_check_task(task)).generate(tokenizer, length, depth, seed)
    return _prompt(tokenizer, task, ex.prompt, ex.metadata["answer_prefix"], ex.references, None)


# ----------------------------------------------------------------- splitting

_FAMILY = {"niah": ("special magic", "\n", "\nWhat "),
           "vt": ("Memorize and track", "\n\n", "\nQuestion:"),
           "cwe": ("Below is a numbered", "\n", "\nQuestion:"),
           "fwe": ("Read the following coded", "coded words. ", "\nQuestion:")}
"""Per family: how its description starts, how it ends, how the question starts."""
NEEDLE_RE = re.compile(r"One of the special magic \w+ for \S+ is: \S+?\.(?=\s|$)")
CHAIN_RE = re.compile(r"VAR [A-Z]+ = (?:VAR [A-Z]+|\d+)")


def family(task: str) -> str:
    return "niah" if _check_task(task) in NIAH_TASKS else task


def split(task: str, text: str, answer_prefix: str, references: Sequence[str]) -> Parts:
    """Cut a prompt of ``task`` that ends with ``answer_prefix`` into :class:`Parts` (the same rule for both
    sides: the solved example is what comes before the last start of the task description)."""
    if not text.endswith(answer_prefix):
        raise ValueError(f"{task}: the prompt does not end with its answer prefix {answer_prefix!r}")
    start, desc_end, q_start = _FAMILY[family(task)]
    body = text[:len(text) - len(answer_prefix)]
    if family(task) == "niah":  # "A special magic ..." or "Some special magic ...": the line's first word
        cut = body.rfind("\n", 0, body.index(start)) + 1
    else:
        cut = body.rindex(start)
    example, rest = body[:cut], body[cut:]
    d = rest.index(desc_end) + len(desc_end)
    q = rest.rindex(q_start)
    context = rest[d:q]
    if family(task) == "niah":
        needles = tuple(m.group() for m in NEEDLE_RE.finditer(context) if any(r in m.group() for r in references))
    elif task == "vt":
        needles = tuple(m.group() for m in CHAIN_RE.finditer(context) if m.group().split()[1] in references)
    else:
        needles = ()
    return Parts(example, rest[:d], context, needles, rest[q:], answer_prefix)


_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def template(text: str) -> str:
    """``text`` with its random fields named: uuids, numbers, keys and variable names become ``{...}``."""
    text = _UUID.sub("{uuid}", text)
    text = re.sub(r"\d+", "{number}", text)
    text = re.sub(r"(?<=VAR )[A-Z]+", "{var}", text)
    text = re.sub(r"(?<= for ).+?(?= is:| mentioned in the provided text)", "{key}", text)
    return text


COMPARED = ("description", "needles", "question", "answer_prefix")
"""The parts compared word for word (random fields named by :func:`template`)."""


def compared_part(prompt: Prompt, part: str) -> str:
    """A compared part as text: the needle formats one per line (sorted, each once)."""
    value = getattr(prompt.parts, part)
    if part == "needles":
        return "\n".join(sorted({template(n) for n in value}))
    return template(value)


def compare(task: str, tokenizer, length: int = LENGTH, seed: int = SEED, essays: Sequence[str] | None = None,
            depth: float = DEPTH) -> Parity:
    """Both prompts for ``task``."""
    cfg = harness_config(task)
    return Parity(task, length, seed, harness_prompt(task, tokenizer, length, seed, essays),
                  our_prompt(task, tokenizer, length, seed, depth), int(cfg["generation_kwargs"]["max_gen_toks"]))


# ----------------------------------------------------------------- the differences

def _lines(context: str) -> list[str]:
    return [x for x in context.split("\n") if x.strip()]


def _haystack_lines(p: Parity) -> list[str]:
    """lm-eval's context lines that hold no answering needle or chain statement."""
    return [x for x in _lines(p.harness.parts.context) if not any(n in x for n in p.harness.parts.needles)]


def _steps_of(p: Parity, units: int, per_step: int) -> bool:
    """lm-eval's context is ``units`` haystack units, a whole number of steps of ``per_step``, and one more step
    (at the context's mean tokens per unit) would not have fitted beside its generation budget."""
    per_unit = p.harness.context_tokens / max(units, 1)
    return (units % per_step == 0
            and p.harness.reported_length + per_step * per_unit > p.length >= p.harness.reported_length)


def _reserves(p: Parity) -> bool:
    """lm-eval leaves its generation budget free; ours fills (one more budget would not fit beside it)."""
    return (p.harness.reported_length <= p.length and p.harness.total_tokens + p.max_gen_toks <= p.length
            < p.ours.total_tokens + p.max_gen_toks and p.ours.total_tokens <= p.length)


def _prefix_uncounted(p: Parity) -> bool:
    return p.harness.reported_length - p.max_gen_toks == p.harness.input_tokens < p.harness.total_tokens


def _essay(p: Parity) -> bool:
    """lm-eval's essay words (needles taken out) are the essays' first words: 500 per step, or one per needle."""
    words = NEEDLE_RE.sub(" ", p.harness.parts.context).split()
    needles = len(NEEDLE_RE.findall(p.harness.parts.context))
    return (words == essay_words()[:len(words)] and (len(words) % 500 == 0 or len(words) == needles)
            and _reserves(p))


def _shared_lines(p: Parity) -> bool:
    def mixed(ctx: str) -> bool:
        return any(CHAIN_RE.search(x) and NOISE_START in x for x in _lines(ctx))

    h = p.harness.parts.context
    return (mixed(h) and "\n " in h and re.search(r"VAR [A-Z]+ = VAR [A-Z]+  \S", h) is not None
            and not mixed(p.ours.parts.context) and all(x in p.ours.parts.context.split("\n")
                                                         for x in p.ours.parts.needles))


def _vt_steps(p: Parity) -> bool:
    return _steps_of(p, sum(NOISE_START in x for x in _lines(p.harness.parts.context)), VT_INCREMENTAL)


def _score(preds: Sequence[str], refs: Sequence[str]) -> tuple[list[float], list[float]]:
    """lm-eval's scores (``process_results``: ``postprocess_pred`` then ``string_match_all``) and ours."""
    # lm-eval: optional and heavy; loads after go_offline() (module docstring)
    from lm_eval.tasks.ruler.common_utils import postprocess_pred, string_match_all

    return ([string_match_all(postprocess_pred([x]), [list(refs)]) for x in preds],
            [our_string_match_all(x, refs) for x in preds])


def _postprocessed(p: Parity) -> bool:
    """lm-eval cleans the prediction first, and the scores agree on predictions around our answers."""
    # lm-eval: optional and heavy; loads after go_offline() (module docstring)
    from lm_eval.tasks.ruler.common_utils import postprocess_pred

    refs = p.ours.references
    preds = [" " + ", ".join(refs) + "\t\n", "\x00" + refs[0], "none", refs[-1].upper() + "\x1b"]
    theirs, ours = _score(preds, refs)
    return postprocess_pred(preds) != preds and theirs == ours and len(set(ours)) > 1


def _empty_cwe(p: Parity) -> bool:
    if p.harness.references or p.harness.parts.context.strip():
        return False
    try:
        _score(["x"], [])
    except ZeroDivisionError:
        return True
    return False


NOISE_START = "The grass is green."
NIAH_LINES = ("niah_single_1", "niah_multikey_2", "niah_multikey_3")
"""The NIAH tasks on a haystack of lines (noise blocks, distractor needles)."""
NIAH_ESSAY = tuple(t for t in NIAH_TASKS if t not in NIAH_LINES)

DIFFERENCES: dict[tuple[str, ...], tuple[Difference, ...]] = {
    TASKS[:-1]: (
        Difference("sizing", "lm-eval keeps its generation budget (`max_gen_toks`) free inside the length; ours "
                   "fills the length with the prompt.", _reserves),
    ),
    NIAH_TASKS: (
        Difference("sizing", "lm-eval does not count its answer prefix (`gen_prefix`); ours counts it.",
                   _prefix_uncounted),
    ),
    NIAH_LINES: (
        Difference("context", "lm-eval grows the haystack of lines (noise blocks or distractor needles) 5 lines at "
                   "a time below 4,096 tokens; ours adds one sentence or needle at a time.",
                   lambda p: _steps_of(p, len(_haystack_lines(p)), 5)),
    ),
    NIAH_ESSAY: (
        Difference("context", "lm-eval grows the essay 500 words at a time from the essays' first word and, when "
                   "500 words do not fit, keeps one word per needle; ours fills word by word from a seeded offset.",
                   _essay),
    ),
    ("vt",): (
        Difference("answer_prefix", "lm-eval writes RULER's misspelling \"assgined\".",
                   lambda p: "assgined" in p.harness.parts.answer_prefix,
                   lambda s: s.replace("assgined", "assigned")),
        Difference("answer_prefix", "lm-eval strips the answer prefix's trailing space.",
                   lambda p: not p.harness.parts.answer_prefix.endswith(" "), lambda s: s + " "),
        Difference("example", "lm-eval always prepends a solved example (3-letter names, its answer after two "
                   "spaces) and four newlines; ours only with `fewshot=True` (off by default).",
                   lambda p: ("they are:  " in p.harness.parts.example and p.harness.parts.example.endswith(
                       "\n\n\n\n") and not p.ours.parts.example)),
        Difference("context", "lm-eval starts each assignment on a line it shares with a noise block (two spaces "
                   "after a chained one) and every line after the first with a space; ours gives every "
                   "assignment a line of its own.", _shared_lines),
        Difference("context", "lm-eval ends the context with a blank line before the question.",
                   lambda p: p.harness.parts.context.endswith("\n") and not p.ours.parts.context.endswith("\n")),
        Difference("sizing", "lm-eval grows the noise 10 lines at a time, counting its solved example.", _vt_steps),
    ),
    ("cwe",): (
        Difference("answer_prefix", "lm-eval's `target_delimiter` for cwe puts a blank line, not a space, before "
                   "the answer prefix.", lambda p: p.harness.parts.answer_prefix.startswith("\n\n"),
                   lambda s: " " + s[2:] if s.startswith("\n\n") else s),
        Difference("example", "lm-eval counts a solved example when it sizes the list but does not feed it (the "
                   "prompt is the sample's `input` alone); ours prepends one from 1,024 tokens.",
                   lambda p: not p.harness.parts.example and bool(p.ours.parts.example)),
        Difference("context", "lm-eval grows the list 10 words at a time; when 10 words and its unfed example do "
                   "not fit, it emits an empty list with no answers, which its `string_match_all` cannot score "
                   "(division by zero).", _empty_cwe),
    ),
    ("fwe",): (
        Difference("sizing", "lm-eval fits the coded text and answer prefix to the whole length, leaving nothing "
                   "for its 50 generated tokens.",
                   lambda p: p.harness.total_tokens <= p.length < p.harness.total_tokens + p.max_gen_toks),
    ),
    TASKS: (
        Difference("scoring", "lm-eval scores `postprocess_pred(prediction)` (stripped, control characters made "
                   "newlines); ours the raw continuation; with `string_match_all` both give the same scores.",
                   _postprocessed),
    ),
}
"""Task(s) -> the differences between lm-eval's RULER and ours: the single source of the docs."""


def differences(task: str) -> tuple[Difference, ...]:
    """The differences listed for ``task``."""
    return tuple(d for tasks, ds in DIFFERENCES.items() if _check_task(task) in tasks for d in ds)


def mismatches(p: Parity) -> dict[str, tuple[str, str]]:
    """The compared parts (:data:`COMPARED`) that still differ once the listed differences are undone:
    ``{part: (lm-eval's, ours)}``, empty when the list is complete."""
    out = {}
    for part in COMPARED:
        theirs = getattr(p.harness.parts, part)
        for d in differences(p.task):
            if d.part == part and d.undo:
                theirs = d.undo(theirs)
        a = "\n".join(sorted({template(n) for n in theirs})) if part == "needles" else template(theirs)
        b = compared_part(p.ours, part)
        if a != b:
            out[part] = (a, b)
    return out


# ----------------------------------------------------------------- the docs section
