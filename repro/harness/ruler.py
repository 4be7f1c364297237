"""lm-evaluation-harness's RULER tasks, offline: its own generators, fed our haystack and the model's tokenizer.

lm-eval's RULER builds every synthetic sample at run time (``custom_dataset``): it reads the tokenizer's name from
the task metadata and loads it with ``AutoTokenizer``, downloads Paul Graham's essays for the ``essay`` haystack and
makes 500 samples per length. :func:`dataset_builder` gives the same samples from the same generator functions
(``prepare_niah.generate_samples``, ``vt_utils``, ``cwe_utils``, ``fwe_utils``), with three changes a caller
chooses: the tokenizer object is passed in, the ``essay`` haystack is :func:`repro.harness.offline.essay_words`
(the user's essays or the suite's default prose), and ``samples`` per length instead of 500.

Its ``vt`` and ``cwe`` generators search for the haystack size in fixed steps; when even the first step does not fit
the length the search ends at zero: ``vt`` then retries in a ``while True`` loop that never ends (a small-vocabulary
tokenizer at its ~500-token solved example, or a short length) and ``cwe`` makes prompts with no words. The builders
check first (:func:`smallest_length`) and raise :class:`DoesNotFit` naming the length that would fit.
``ruler_qa_squad`` and ``ruler_qa_hotpot`` download SQuAD and HotpotQA over HTTP: offline they are refused
(:data:`DOWNLOADS` names the file; the suite's own ``qa_1``/``qa_2`` are the offline stand-ins).
"""

from __future__ import annotations

import contextlib
import itertools
import random
import sys
from typing import Any, Callable, Sequence

import numpy as np

NIAH_SETTINGS: dict[str, dict[str, Any]] = {
    "niah_single_1": dict(type_haystack="repeat", type_needle_k="words", type_needle_v="numbers"),
    "niah_single_2": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers"),
    "niah_single_3": dict(type_haystack="essay", type_needle_k="words", type_needle_v="uuids"),
    "niah_multikey_1": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers", num_needle_k=4),
    "niah_multikey_2": dict(type_haystack="needle", type_needle_k="words", type_needle_v="numbers"),
    "niah_multikey_3": dict(type_haystack="needle", type_needle_k="uuids", type_needle_v="uuids"),
    "niah_multivalue": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers", num_needle_v=4),
    "niah_multiquery": dict(type_haystack="essay", type_needle_k="words", type_needle_v="numbers", num_needle_q=4),
}
"""Each NIAH task's arguments to lm-eval's ``generate_samples``, as its ``niah_utils`` passes them (a test checks
that both give the same samples)."""
LM_EVAL_SAMPLES = 500
"""Samples per length lm-eval's RULER makes."""
SYNTHETIC = tuple(NIAH_SETTINGS) + ("ruler_vt", "ruler_cwe", "ruler_fwe")
"""The RULER tasks built here, offline."""
DOWNLOADS = {
    "ruler_qa_squad": "SQuAD 2.0's dev set (dev-v2.0.json), which lm-eval's RULER downloads over HTTP",
    "ruler_qa_hotpot": "HotpotQA's dev set (hotpot_dev_distractor_v1.json), which lm-eval's RULER downloads over HTTP",
}
"""RULER tasks whose documents are downloaded at run time: refused offline."""
VT_SOLVED_LENGTH, VT_SOLVED_STEP, VT_STEP = 500, 5, 10
"""``vt_utils.get_dataset``: the solved example is a 500-token sample grown 5 noise lines at a time; the task's
samples grow 10 at a time (``sys_vartrack_w_noise_random``'s default)."""
CWE_STEP = 10
"""``cwe``'s list grows 10 words at a time (``sys_word_pair_random``'s default)."""
DRAWS = 16
"""Seeded draws measured at the smallest haystack (random names and values change the token count a little)."""


class DoesNotFit(ValueError):
    """A RULER generator whose smallest haystack does not fit the length (lm-eval's own loop would never end)."""


def _tokens(tokenizer, text: str) -> int:
    return len(tokenizer(text).input_ids)


@contextlib.contextmanager
def kept_rng(seed: int = 0):
    """Run a block on the global ``random`` and ``numpy.random`` generators seeded with ``seed``; put them back
    where they were afterwards (a measurement must not move the draws of the samples that follow)."""
    state, np_state = random.getstate(), np.random.get_state()
    try:
        random.seed(seed)
        np.random.seed(seed)
        yield
    finally:
        random.setstate(state)
        np.random.set_state(np_state)


def _worst(counts: list[int]) -> int:
    """The largest of the measured counts plus their spread: a margin for the draws not measured."""
    return max(counts) + (max(counts) - min(counts))


def vt_minimum(tokenizer, noises: int, is_icl: bool, example_tokens: int) -> int:
    """The smallest ``max_seq_length`` at which lm-eval's vt measures ``noises`` noise lines as fitting: its first
    measurement (the input and the answer list) plus its 30 generated tokens and the solved example's tokens, the
    worst of :data:`DRAWS` seeded draws plus their spread."""
    from lm_eval.tasks.ruler import vt_utils  # lm-eval: optional and heavy; loads after go_offline()

    with kept_rng():
        counts = [_tokens(tokenizer, text + f" {answer}") for text, answer in
                  (vt_utils.generate_input_output(noises, 1, 4, is_icl=is_icl) for _ in range(DRAWS))]
    return _worst(counts) + vt_utils.CONFIG["variable_tracking"]["tokens_to_generate"] + example_tokens


def vt_solved(tokenizer) -> tuple[dict, int]:
    """lm-eval's solved vt example (``vt_utils.get_dataset``'s first call, on the global generators as they are)
    and its tokens as vt counts them. :class:`DoesNotFit` when even its smallest step does not fit
    :data:`VT_SOLVED_LENGTH` (lm-eval would loop forever at every length)."""
    from lm_eval.tasks.ruler import vt_utils  # lm-eval: optional and heavy; loads after go_offline()

    need = vt_minimum(tokenizer, VT_SOLVED_STEP, True, 0)
    if need > VT_SOLVED_LENGTH:
        raise DoesNotFit(f"ruler_vt: lm-eval's solved example needs {need} tokens with this tokenizer at its "
                         f"smallest ({VT_SOLVED_STEP} noise lines) and must fit {VT_SOLVED_LENGTH}; its generator "
                         "would never return at any length; allowed: a tokenizer that writes it in fewer tokens, "
                         "or the suite's own vt")
    with _quiet():
        icl = vt_utils.sys_vartrack_w_noise_random(tokenizer=tokenizer, num_samples=1,
                                                   max_seq_length=VT_SOLVED_LENGTH, incremental=VT_SOLVED_STEP)[0]
    return icl, _tokens(tokenizer, icl["input"] + " " + " ".join(icl["outputs"]) + "\n\n")


def vt_fits(tokenizer, max_seq_length: int, incremental: int = VT_STEP) -> tuple[bool, int]:
    """Whether lm-eval's ``ruler_vt`` can build a sample of ``max_seq_length`` tokens, and the smallest length at
    which it can. Its sampler starts at ``incremental`` noise lines and, when a sample is too long, retries in a
    ``while True`` that only shrinks down to ``incremental``: if even that many lines, the solved example and the
    30 generated tokens do not fit, it never returns. Measured with seeded draws (the global generators are left
    where they were), so the answer is the same on every call."""
    if not isinstance(incremental, int) or incremental < 1:
        raise ValueError(f"incremental={incremental!r}; allowed: an integer >= 1")
    with kept_rng():
        _, example_tokens = vt_solved(tokenizer)
    need = vt_minimum(tokenizer, incremental, False, example_tokens)
    return max_seq_length >= need, need


def cwe_minimum(tokenizer) -> int:
    """The smallest length at which lm-eval's cwe search keeps its first step (:data:`CWE_STEP` words): the solved
    example, the list and the numbered answer as its search measures them, plus its 120 generated tokens (worst of
    :data:`DRAWS` seeded draws plus their spread). Below it the list is empty."""
    from lm_eval.tasks.ruler import cwe_utils  # lm-eval: optional and heavy; loads after go_offline()

    counts = []
    with kept_rng():
        for _ in range(DRAWS):
            example, text, answer = cwe_utils.generate_input_output(CWE_STEP, 0)
            numbered = " ".join(f"{i + 1}. {w}" for i, w in enumerate(answer))
            counts.append(_tokens(tokenizer, example + "\n" + text + " " + numbered))
    return _worst(counts) + cwe_utils.CONFIG["tokens_to_generate"]


def smallest_length(task: str, tokenizer) -> int:
    """The shortest length lm-eval's ``ruler_vt`` or ``ruler_cwe`` generator can fill: below it its search ends at
    zero noises or words, and ``vt`` then retries forever while ``cwe`` asks for the 10 most common words of an
    empty list (lm-eval's scoring divides by zero)."""
    if task == "ruler_vt":
        return vt_fits(tokenizer, 0)[1]
    if task == "ruler_cwe":
        return cwe_minimum(tokenizer)
    raise ValueError(f"task={task!r}; allowed: ruler_vt or ruler_cwe (the generators whose search can end at zero)")


def _check_fits(task: str, tokenizer, length: int) -> None:
    need = smallest_length(task, tokenizer)
    if need > length:
        raise DoesNotFit(f"{task}: length {length} is shorter than lm-eval's smallest {task} prompt with this "
                         f"tokenizer ({need} tokens with its answer and the tokens it generates); its generator "
                         f"would {'never return' if task == 'ruler_vt' else 'make prompts with no words'}; "
                         f"allowed: a length >= {need}")


@contextlib.contextmanager
def _quiet():
    """lm-eval's ``vt`` prints every step of its length search to stdout: send it to stderr (stdout is ours)."""
    with contextlib.redirect_stdout(sys.stderr):
        yield


def samples_at(task: str, tokenizer, length: int, samples: int, essays: Sequence[str]) -> list[dict]:
    """``samples`` of lm-eval's RULER ``task`` at ``length`` tokens, made by its own generator (global ``random``
    and ``numpy.random`` state, which lm-eval seeds before it builds tasks)."""
    if task in NIAH_SETTINGS:
        # lm-eval: optional and heavy; loads after go_offline()
        from lm_eval.tasks.ruler import niah_utils, prepare_niah

        settings = NIAH_SETTINGS[task]
        kind = settings["type_haystack"]
        haystack = list(essays) if kind == "essay" else prepare_niah.get_haystack(type_haystack=kind)
        return prepare_niah.generate_samples(haystack, max_seq_length=length, template=niah_utils.TEMPLATE,
                                             num_samples=samples, TOKENIZER=tokenizer, **settings)
    if task == "ruler_vt":
        from lm_eval.tasks.ruler import vt_utils  # lm-eval: optional and heavy; loads after go_offline()

        _check_fits(task, tokenizer, length)
        solved, _ = vt_solved(tokenizer)
        with _quiet():
            return vt_utils.sys_vartrack_w_noise_random(tokenizer=tokenizer, num_samples=samples,
                                                        max_seq_length=length, icl_example=solved)
    if task == "ruler_cwe":
        from lm_eval.tasks.ruler import cwe_utils  # lm-eval: optional and heavy; loads after go_offline()

        _check_fits(task, tokenizer, length)
        with _quiet():
            return cwe_utils.sys_word_pair_random(num_samples=samples, max_seq_length=length, tokenizer=tokenizer)
    if task == "ruler_fwe":
        from lm_eval.tasks.ruler import fwe_utils  # lm-eval: optional and heavy; loads after go_offline()

        with _quiet():
            return fwe_utils.sys_kwext(tokenizer=tokenizer, max_seq_length=length, num_samples=samples)
    if task in DOWNLOADS:
        raise ValueError(f"{task} needs {DOWNLOADS[task]}; offline runs cannot fetch it; allowed offline: "
                         f"{', '.join(SYNTHETIC)} (or the suite's own qa_1/qa_2)")
    raise ValueError(f"task={task!r}; allowed: {', '.join(SYNTHETIC)}")


def dataset_builder(task: str, tokenizer, lengths: Sequence[int], samples: int | None,
                    essays: Sequence[str]) -> Callable[..., dict]:
    """A ``custom_dataset`` for lm-eval's task config: ``samples`` per length (None: lm-eval's
    :data:`LM_EVAL_SAMPLES`), every length in turn, as lm-eval's RULER returns them (``{"test": Dataset}``); it
    ignores the metadata lm-eval passes."""
    samples = LM_EVAL_SAMPLES if samples is None else samples
    if task not in SYNTHETIC and task not in DOWNLOADS:
        raise ValueError(f"task={task!r}; allowed: {', '.join(SYNTHETIC)}")
    if task in DOWNLOADS:
        samples_at(task, tokenizer, 0, 0, essays)  # refused now, before any model is loaded

    def build(**_metadata) -> dict:
        import datasets  # optional and heavy; loads after go_offline() (it reads HF_DATASETS_OFFLINE)

        rows = list(itertools.chain.from_iterable(samples_at(task, tokenizer, n, samples, essays) for n in lengths))
        return {"test": datasets.Dataset.from_list(rows, split=datasets.Split.TEST)}

    return build
