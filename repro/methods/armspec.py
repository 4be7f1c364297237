"""What a trained arm is: :class:`ArmSpec`, built by one builder per paper (at the end of its objective's module)
and looked up by arm name in the one table, :data:`repro.arms.ARMS`.

A builder is ``build(profile, name, tokenizer=None, data=None) -> ArmSpec``. Without data it builds everything
but the method (what a cache key, a plan or a check needs); with data it builds the method too. ``name`` may carry
a replicate suffix ``@seed<k>`` (:func:`split_seed`); the table has already moved the profile to the replicate's
seed (:func:`repro.profiles.replicate_profile`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from repro.train.config import TrainConfig

DATA_KINDS = ("rows", "streams")
"""What an arm's method reads: ``rows`` (:class:`repro.data.synthetic.CorpusRows` of one corpus) or ``streams``
(named :class:`repro.data.streams.TokenStream` objects, ProLong's sources)."""

SEED_MARK = "@seed"
"""Training-seed suffix: ``<arm>@seed<k>`` is replicate ``k >= 1`` of ``<arm>`` (the plain name is replicate 0)."""


def split_seed(name: str) -> tuple[str, int]:
    """``"flt@seed2"`` -> ``("flt", 2)``; a name without the suffix is replicate 0. Reads only the suffix."""
    stem, at, rest = name.partition("@")
    if not at:
        return name, 0
    suffix = at + rest
    k = suffix[len(SEED_MARK):]
    if not suffix.startswith(SEED_MARK) or not k.isdigit() or k.startswith("0") or not stem:
        raise ValueError(f"arm {name!r}: bad training-seed suffix {suffix!r}; allowed: {SEED_MARK}<k> with "
                         f"k >= 1 after an arm name (the plain name is replicate 0)")
    return stem, int(k)


@dataclass(frozen=True)
class ArmData:
    """The data an arm's method is built on, loaded by the caller (a cached stage or the command line)."""

    corpus_rows: Any = None
    """:class:`repro.data.synthetic.CorpusRows` (arms whose ``data`` is ``rows``)."""
    streams: Any = None
    """A stream folder (:func:`repro.data.streams.save_streams`) or :class:`repro.data.streams.TokenStream`
    objects named as ``prolong.sources`` (arms whose ``data`` is ``streams``)."""
    anchors: Any = None
    """Anchor token ids (int array) of arms that select anchor sentences (LongRecipe), else None."""


@dataclass(frozen=True)
class Upstream:
    """Stands in an arm's ``cache_fields`` for the cache key of a stage the arm reads; the pipeline fills it in
    (:mod:`repro.stages.keys`), so a builder needs no cache."""

    stage: str
    """``analysis`` (LongRecipe's impactful tokens, the anchors) or ``streams`` (ProLong's data streams)."""


@dataclass(frozen=True)
class ArmSpec:
    """Everything that trains one arm, built from a profile by the arm's builder."""

    name: str
    """The arm trained (``rp_skip``, ``flt@seed1``, ...)."""
    method: Any
    """The built :class:`repro.methods.protocol.Method` (None when built without data: for keys and plans)."""
    model: dict[str, Any]
    """Keyword arguments of :func:`repro.models.load_model`: ``rope`` (None: the model's own RoPE), and where the
    arm needs them ``max_positions`` and config ``overrides`` (e.g. attention dropout)."""
    train: TrainConfig
    """The arm's :class:`repro.train.TrainConfig` on the profile's device (``run.device``); a cached stage adds
    the curve's checkpoints and its thread count, the command line its precision and checkpoints."""
    cache_fields: dict[str, Any]
    """What of the profile beyond ``extend`` and the base the arm's weights depend on: its cache key
    (:func:`repro.stages.keys.extension_key`), with :class:`Upstream` for the stages it reads."""
    steps: int
    """Optimizer steps actually trained (an arm stopped early stops before ``train.max_steps``); the batches
    built ahead of training cover these."""
    curve_every: int = 0
    """Keep a loadable checkpoint every that many steps for a training curve (0: none)."""
    final_config: dict[str, Any] = field(default_factory=dict)
    """Config fields written into the trained model's ``config.json`` (a training-only setting switched off for
    evaluation, e.g. attention dropout)."""
    data: str = "rows"
    """What the method reads: one of :data:`DATA_KINDS`."""
    needs_anchors: bool = False
    """The arm selects anchor sentences: its method needs :attr:`ArmData.anchors`."""

    def __post_init__(self) -> None:
        if self.data not in DATA_KINDS:
            raise ValueError(f"arm {self.name!r}: data={self.data!r}; allowed: {', '.join(DATA_KINDS)}")


def need_data(name: str, kind: str, data: ArmData | None, anchors: bool = False) -> None:
    """A ValueError when ``data`` lacks what arm ``name`` reads (``kind``, and anchors when ``anchors``)."""
    if data is None:
        return
    if kind == "streams" and data.streams is None:
        raise ValueError(f"arm {name!r} reads streams; allowed: streams= a stream folder or TokenStream objects")
    if kind == "rows" and data.corpus_rows is None:
        raise ValueError(f"arm {name!r} needs corpus_rows (repro.data.synthetic.CorpusRows)")
    if anchors and data.anchors is None:
        raise ValueError(f"arm {name!r} selects anchor sentences; allowed: anchors= the analysis's token ids "
                         "(repro.stages.extension.train_extension computes them)")
