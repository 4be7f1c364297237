"""Context extension by a position transform: FLT, PoSE, RPES, LongRecipe and its ablations.

``flt`` (full-length training) continues at the target window with ordinary
positions; the other extension methods are the same loop with shorter samples
whose ``position_ids`` come from a named transform in :mod:`repro.positions`
(the arm names and their specs are in :mod:`repro.methods.arms`).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from repro import positions
from repro.data.packing import Segment, pack_rows
from repro.data.selection import SELECTION_MODES, select_sentences, sentence_bounds
from repro.data.synthetic import CorpusRows, RetrievalRows
from repro.methods.registry import register_method, step_rng


@dataclass(frozen=True)
class ExtensionSpec:
    """How an extension method builds its rows."""

    transform: str = "identity"
    """Position transform name in :mod:`repro.positions` (``identity`` for FLT)."""
    sample_len: int | None = None
    """Tokens per sample; overrides ``sample_ratio`` when set."""
    params: dict = field(default_factory=dict)
    """Extra keyword arguments for the transform."""
    sample_ratio: float | None = 1.0
    """Tokens per sample as a fraction of the target (1.0: full-length training; None: the
    profile's ``longrecipe.sample_ratio``)."""
    selection: str = "none"
    """``none``: a contiguous short sample (PoSE, RPES, "w/o T"); ``anchors``: the sentences of a
    target-length sample that hold impactful tokens (LongRecipe); ``random``: random sentences
    ("Random T"). See :mod:`repro.data.selection`."""

    def resolve_len(self, target: int, profile_ratio: float) -> int:
        """Tokens per sample for a target window."""
        if self.sample_len is not None:
            return int(self.sample_len)
        ratio = profile_ratio if self.sample_ratio is None else self.sample_ratio
        return max(1, int(round(ratio * target)))


@register_method("extension")
class Extension:
    """Continue training towards ``target`` with samples of ``sample_len`` tokens.

    Each row is one sample: a retrieval example (fraction ``retrieval_fraction``)
    or corpus text. Position ids come from the spec's transform, which maps the
    sample's tokens into ``[0, target)``. With ``spec.selection`` other than
    ``none`` the sample is first drawn at the target length and then cut down to
    ``sample_len`` tokens of whole sentences (:func:`repro.data.selection.select_sentences`),
    keeping the instruction, evidence, question and answer of retrieval rows; a row whose mandatory
    sentences exceed the budget falls back to a contiguous sample (``fallback_rows``), and a retrieval
    row shorter than every training task's minimum becomes a corpus row (``no_retrieval_rows``).
    """

    def __init__(self, name: str, spec: ExtensionSpec, target: int, batch_size: int, retrieval_fraction: float,
                 tokenizer, corpus: CorpusRows, seed: int, context_weight: float = 0.05,
                 train_tasks: tuple[str, ...] = ("niah_single_1",), sample_len: int | None = None,
                 anchors: np.ndarray | None = None):
        self.name, self.spec, self.target = name, spec, target
        self.sample_len = sample_len or spec.sample_len or target
        if self.sample_len > target:
            raise ValueError(f"sample_len={self.sample_len} exceeds the target window {target}; allowed: <= target")
        if spec.selection not in ("none", *SELECTION_MODES):
            raise ValueError(f"selection={spec.selection!r}; allowed: none, {', '.join(SELECTION_MODES)}")
        if spec.selection == "anchors" and anchors is None:
            raise ValueError(f"method {name!r} selects anchor sentences: pass the anchor token ids "
                             "(repro.stages.impactful_tokens)")
        self.batch_size, self.retrieval_fraction, self.seed = batch_size, retrieval_fraction, seed
        self.tok, self.corpus = tokenizer, corpus
        self.retrieval = RetrievalRows(tokenizer, train_tasks, context_weight=context_weight)
        self.pieces = token_piece_table(tokenizer)
        self.ends = sentence_end_table(tokenizer, self.pieces)
        self.is_anchor = np.zeros(len(self.ends), dtype=bool)
        if anchors is not None:
            self.is_anchor[np.asarray(anchors, dtype=np.int64)] = True
        self.transform = _transform(spec.transform, self.ends, self.pieces)
        _check_params(name, spec)
        self.stats = {"rows": 0, "tokens": 0, "fallback_rows": 0}

    def state_dict(self) -> dict:
        return dict(self.stats)

    def load_state_dict(self, state: dict) -> None:
        self.stats.update(state)

    def finished(self, step: int) -> bool:
        return False

    def observe(self, step: int, metrics: dict) -> None:
        pass

    def _retrieval_row(self, rng: np.random.Generator, n: int) -> Segment | None:
        """A retrieval row of ``n`` tokens, or None when no training task fits ``n`` (a corpus row is used)."""
        try:
            self.retrieval.eligible(n)
        except ValueError:
            self.stats["no_retrieval_rows"] = self.stats.get("no_retrieval_rows", 0) + 1
            return None
        return self.retrieval.segment(rng, n)

    def _selected(self, rng: np.random.Generator, retrieval: bool) -> tuple[Segment, np.ndarray] | None:
        """A target-length sample cut to ``sample_len`` tokens of whole sentences (None: does not fit)."""
        if retrieval:
            try:
                seg, keep = self.retrieval.segment_with_evidence(rng, self.target)
            except ValueError:
                return None
        else:
            seg, keep = self.corpus.segment(rng, self.target, whole=True), None
        try:
            sel = select_sentences(self.ends[seg.tokens], self.sample_len, rng, self.spec.selection,
                                   anchor_mask=self.is_anchor[seg.tokens], mandatory_mask=keep)
        except ValueError:
            return None
        if not sel.index.size:
            return None
        i = sel.index
        return Segment(seg.tokens[i], seg.weights[i], None, None if seg.answer is None else seg.answer[i]), \
            sel.sentence_starts

    def batch(self, step: int) -> dict[str, np.ndarray]:
        rng = step_rng(self.seed, step, 1)
        n = self.sample_len
        segs = []
        for _ in range(self.batch_size):
            retrieval = rng.random() < self.retrieval_fraction
            picked = self._selected(rng, retrieval) if self.spec.selection != "none" else None
            if picked is not None:
                seg, starts = picked
            else:
                if self.spec.selection != "none":
                    self.stats["fallback_rows"] += 1
                seg = self._retrieval_row(rng, n) if retrieval else None
                if seg is None:
                    seg = self.corpus.segment(rng, n, whole=True)
                starts = None
            pos = self.transform(seg.tokens, self.target, rng, starts=starts, **self.spec.params)
            segs.append(Segment(seg.tokens, seg.weights, np.asarray(pos, dtype=np.int64), seg.answer))
            self.stats["rows"] += 1
            self.stats["tokens"] += len(seg.tokens)
        out = pack_rows(segs, n, self.tok.pad_token_id)
        if len(out["input_ids"]) != self.batch_size:
            raise AssertionError("one sample per row expected")
        return out


def token_piece_table(tokenizer) -> np.ndarray:
    """Per vocabulary id: the token's decoded text (an object array of ``str``)."""
    return np.array([tokenizer.decode([i]) for i in range(len(tokenizer))], dtype=object)


def sentence_end_table(tokenizer, pieces: np.ndarray | None = None) -> np.ndarray:
    """Per vocabulary id: does the token's text contain a sentence delimiter (``. ! ? \\n``)?
    ``pieces``: :func:`token_piece_table` of ``tokenizer``, where already computed."""
    pieces = token_piece_table(tokenizer) if pieces is None else pieces
    return np.array([any(d in p for d in positions.SENTENCE_DELIMITERS) for p in pieces], dtype=bool)


def _check_params(method: str, spec: ExtensionSpec) -> None:
    """A typo in a transform's parameters is a ValueError naming the allowed ones (not a TypeError
    at the first batch)."""
    allowed = positions.transform_params(spec.transform)
    bad = sorted(set(spec.params) - set(allowed))
    if bad:
        raise ValueError(f"method {method!r}: transform {spec.transform!r} got unknown parameter(s) {bad}; "
                         f"allowed: {sorted(allowed)}")


def _transform(name: str, sentence_ends: np.ndarray | None, pieces: np.ndarray | None = None):
    """A position transform ``f(tokens, target, rng, **params) -> positions`` from :mod:`repro.positions`
    (``pieces``: each vocabulary id's text, for transforms that split at token texts)."""
    fn = positions.get_transform(name)
    kind = positions.TRANSFORM_INFO[name].kind
    if kind != "positions":
        hint = ("PI trains with identity ids and RoPE linear scaling: use transform 'identity' with "
                "extend.rope_type='linear', rope_factor=target/base" if kind == "rope_scaling" else
                "views are consumed by the self-distillation loss, not by extension rows")
        raise ValueError(f"position transform {name!r} is of kind {kind!r}; "
                         f"extension rows need kind 'positions' ({hint})")

    def call(tokens: np.ndarray, target: int, rng: np.random.Generator, starts: np.ndarray | None = None,
             **params):
        if starts is None and sentence_ends is not None:
            starts = sentence_bounds(sentence_ends[tokens])[:, 0]
        sample = positions.PositionSample(n=len(tokens), token_ids=tuple(int(t) for t in tokens),
                                          sentence_starts=None if starts is None else tuple(int(x) for x in starts),
                                          token_texts=None if pieces is None else tuple(pieces[tokens]))
        return fn(sample, target, rng, **params)

    return call


# == The arms of the LongRecipe comparison: their names and their builder (repro.arms' table) ====================
# Every arm continues the base towards ``extend.target_window`` on the testbed's rows (corpus documents and retrieval
# examples, ``extend.retrieval_fraction``) with ``extend``'s optimisation and a cosine schedule; the arms differ in how
# position ids are drawn (``ExtensionSpec.transform``) and in how many tokens a sample holds
# (``longrecipe.sample_ratio`` of the target, or the ratio in an arm's name, LongRecipe Table 4). The anchor arms
# select sentences holding the impactful tokens of LongRecipe §4.1, passed in as ``ArmData.anchors``.

from repro.methods.armspec import ArmData, ArmSpec, Upstream, need_data, split_seed  # noqa: E402  (the arm section's imports sit at its head)
from repro.models import rope_parameters  # noqa: E402
from repro.profiles import Profile  # noqa: E402
from repro.train.config import TrainConfig  # noqa: E402

EXTENSION_METHODS: dict[str, ExtensionSpec] = {
    "flt": ExtensionSpec("identity", None),
    "pose": ExtensionSpec("pose", sample_ratio=None),
    "rpes": ExtensionSpec("rpes", sample_ratio=None),
    "longrecipe": ExtensionSpec("longrecipe", sample_ratio=None, selection="anchors"),
    "longrecipe_wo_t": ExtensionSpec("longrecipe", sample_ratio=None),
    "longrecipe_random_t": ExtensionSpec("longrecipe", sample_ratio=None, selection="random"),
}
"""Named extension arms (LongRecipe §5.1 and Table 3). ``pose``, ``rpes`` and the LongRecipe arms
use ``longrecipe.sample_ratio`` of the target per sample; the ratio sweep of Table 4 adds
``longrecipe_r<percent>`` (see :func:`extension_spec`)."""

RATIO_PREFIX = "longrecipe_r"
"""Prefix of the token-ratio arms (``longrecipe_r20``: LongRecipe with 20% of the target per sample)."""


def ratio_of(arm: str) -> int | None:
    """The percent of a ``longrecipe_r<percent>`` arm name, else None."""
    if arm.startswith(RATIO_PREFIX) and arm[len(RATIO_PREFIX):].isdigit():
        return int(arm[len(RATIO_PREFIX):])
    return None


def is_ratio_arm(name: str) -> bool:
    """``longrecipe_r<percent>`` with 1 <= percent <= 100 (LongRecipe Table 4)."""
    ratio = ratio_of(name)
    return ratio is not None and 1 <= ratio <= 100


def extension_spec(name: str) -> ExtensionSpec:
    """The spec of a named arm, including ``longrecipe_r<percent>`` (LongRecipe at that token ratio)."""
    if name in EXTENSION_METHODS:
        return EXTENSION_METHODS[name]
    if is_ratio_arm(name):
        return ExtensionSpec("longrecipe", sample_ratio=ratio_of(name) / 100, selection="anchors")
    raise ValueError(f"unknown extension method {name!r}; allowed: {', '.join(EXTENSION_METHODS)}, "
                     f"{RATIO_PREFIX}<percent> (1..100)")


def extension_method(p: Profile, method: str, tokenizer, corpus_rows, anchors: np.ndarray | None = None,
                     seed: int | None = None) -> Extension:
    """The :class:`Extension` of a named arm with the profile's settings (``seed`` overrides ``extend.seed``);
    ``anchors`` are needed by arms that select anchor sentences."""
    spec, e = extension_spec(method), p.extend
    return Extension(name=method, spec=spec, target=e.target_window, batch_size=e.batch_size,
                     retrieval_fraction=e.retrieval_fraction, tokenizer=tokenizer, corpus=corpus_rows,
                     seed=e.seed if seed is None else seed, context_weight=e.context_weight,
                     train_tasks=e.train_tasks, sample_len=spec.resolve_len(e.target_window, p.longrecipe.sample_ratio),
                     anchors=anchors)


def extension_cache_fields(p: Profile, arm: str) -> dict:
    """What of an extension arm's spec changes its result (defaults of later fields are left out so that earlier
    caches stay valid); the anchor arms read LongRecipe's analysis."""
    spec = extension_spec(arm)
    key = {"transform": spec.transform, "sample_len": spec.sample_len, "params": spec.params}
    default = ExtensionSpec()
    if spec.sample_ratio != default.sample_ratio or spec.selection != default.selection:
        key.update(sample_ratio=spec.sample_ratio, selection=spec.selection,
                   resolved_len=spec.resolve_len(p.extend.target_window, p.longrecipe.sample_ratio))
    if spec.selection == "anchors":
        key["anchors"] = Upstream("analysis")
    return key


def build(p: Profile, name: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """FLT, PoSE, RPES, LongRecipe and its variants: cosine over ``extend.steps`` at ``extend``'s precision; the
    RoPE of ``extend.rope_type`` / ``rope_theta`` / ``rope_factor`` when set (the paper profile's dynamic NTK from
    the base window), else the model's own."""
    arm = split_seed(name)[0]
    anchors = extension_spec(arm).selection == "anchors"
    need_data(name, "rows", data, anchors)
    e, rope = p.extend, None
    if e.rope_type != "default" or e.rope_theta is not None:
        rope = rope_parameters(e.rope_type, e.rope_theta or p.model.rope_theta, e.rope_factor, p.base.window)
    method = None if data is None else extension_method(p, arm, tokenizer, data.corpus_rows, data.anchors)
    return ArmSpec(name, method, {"rope": rope},
                   TrainConfig.from_section(e, e.steps, schedule="cosine", device=p.run.device),
                   extension_cache_fields(p, arm), steps=e.steps, needs_anchors=anchors)
