"""ProLong's settings (:class:`ProLongConfig`), its default streams and mix (:data:`PL_SOURCES`,
:data:`PL_MIX`) and the names of its arms (:data:`PL_ARM_NAMES`)."""

from __future__ import annotations

from dataclasses import dataclass


PL_SOURCES: tuple[tuple[str, str], ...] = (("code", "corpus:code"), ("books", "corpus:books"),
                                           ("short", "corpus:short"))
"""Default streams of :attr:`ProLongConfig.sources`: code, books and short data from the testbed corpus."""
PL_MIX: tuple[tuple[str, float], ...] = (("code", 0.3), ("books", 0.3), ("short", 0.4))
"""Default :attr:`ProLongConfig.mix`: ProLong's 30% code repositories, 30% books, 40% ShortMix."""
PL_ARM_NAMES: tuple[str, ...] = ("prolong", "pl_long0", "pl_long20", "pl_long40", "pl_long80", "pl_long100",
                                 "pl_nomask", "pl_rope_orig", "pl_rope_ntk", "pl_rope_ntk4", "pl_train2x")
"""Every ProLong arm: the names of :data:`repro.methods.arms.PL_ARMS`, repeated here so that profiles import nothing
above them (tests/test_profiles.py checks the two agree)."""


@dataclass(frozen=True)
class ProLongConfig:
    """ProLong (§3-§6, App. A.3, B): the data recipe, its ablations and the training-efficiency stack.

    Every ProLong arm continues the same base at the target for ``extend.steps`` steps of ``extend.batch_size`` rows
    (``extend``'s lr, schedule and precision). A ``task_share`` of the rows are the testbed's task rows (the base
    keeps the tasks the evaluation measures; ProLong itself has none); the rest come from ``sources`` in the
    proportions of ``mix`` (:mod:`repro.data.mixing`), with document masks and the RoPE base of the recipe. The
    ablation arms (:data:`repro.methods.arms.PL_ARMS`) change one thing each."""

    sources: tuple[tuple[str, str], ...] = PL_SOURCES
    """Stream name -> source spec (:mod:`repro.data.long_sources`: ``corpus:code|books|short`` from the testbed
    corpus, ``folder:<path>``, ``hf_disk:<path>``)."""
    long_streams: tuple[str, ...] = ("code", "books")
    """Streams of long data: they read only documents of at least the long threshold; the others only shorter ones."""
    mix: tuple[tuple[str, float], ...] = PL_MIX
    """Stream name -> share of the non-task rows (ProLong: code repos 30%, books 30%, ShortMix 40%). A long-share
    ablation arm keeps the ratio among the long streams and gives the rest to the short ones."""
    long_threshold: int = 0
    """Tokens from which a document is long (0: the target window; the paper counts documents of 64K and more)."""
    task_share: float = 0.5
    """Share of the rows that are the testbed's retrieval rows (``extend.train_tasks``, training key pool)."""
    doc_masks: bool = True
    """Document masks in attention (positions restart per document; ProLong B.2)."""
    rope_ntk_multiple: float = 2.0
    """The recipe's RoPE base as a multiple of the dynamic-NTK suggestion ``theta * t^(d/(d-2))`` (t = target /
    base window, d = head dimension). ProLong found 2x best (8e6 against NTK's 4e6 at 64K)."""
    arms: tuple[str, ...] = PL_ARM_NAMES
    """ProLong arms trained (``prolong`` is the recipe; the others are its ablations)."""
    replicate_arms: tuple[str, ...] = ("prolong",)
    """Arms also trained with extra training seeds (``extend.seed_replicates`` in all): their spread is the noise
    the ablations' gaps are read against."""
    train_length_factor: int = 2
    """PL-Tab7: the long-training arm trains at this multiple of the target (the same tokens per step: fewer
    rows), evaluated at the target."""
    heldout_docs: int = 16
    """Held-out long documents (stdlib test modules, cut at the target) for PL-Fig1's long-document perplexity
    (loss on each window's second half, as the paper scores the last 32K tokens of 64K documents)."""
    eval_samples: int = 16
    """Prompts per task and depth of the ablations' evaluation at the target."""
    throughput_steps: int = 4
    """PL-Tab15: timed steps per arm (interleaved rounds)."""
    throughput_workers: tuple[int, ...] = (2, 4, 8)
    """PL-Tab15: data-parallel worker counts of the reordering simulator."""
