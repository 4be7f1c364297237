"""Training methods: the base-model curriculum and context extension by position transform.

``base_curriculum`` teaches the tiny model to copy, then to retrieve, at its
base window. ``flt`` (full-length training) continues at the target window
with ordinary positions; the other extension methods (PoSE, RPES, LongRecipe,
...) are the same loop with shorter samples whose ``position_ids`` come from a
named transform in :mod:`repro.positions`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from repro.data.packing import Segment, pack_rows
from repro.data.synthetic import CorpusRows, RetrievalRows, copy_segment
from repro.profiles import BaseTrainConfig
from repro.train import cosine_decay, register_method


def _rng(seed: int, step: int, salt: int = 0) -> np.random.Generator:
    return np.random.default_rng([seed, step, salt])


@register_method("base_curriculum")
class BaseCurriculum:
    """Dense copy until the copy loss drops, then retrieval at growing lengths (see DESIGN notes).

    Phase ``copy``: ``copy_rows`` rows of ``copy_row_len`` tokens. Phase ``retrieval``:
    ``tokens_per_step / L`` retrieval rows of length ``L`` plus copy rows and packed
    corpus rows; ``L`` advances through ``retrieval_lengths`` when the running
    training exact match reaches ``advance_em``; after the last length, ``final_steps`` more
    steps with the learning rate annealed to ``final_min_lr_ratio`` (:meth:`lr_scale`).
    """

    name = "base_curriculum"

    def __init__(self, cfg: BaseTrainConfig, tokenizer, corpus: CorpusRows, vocab_size: int):
        self.cfg, self.tok, self.corpus = cfg, tokenizer, corpus
        self.retrieval = RetrievalRows(tokenizer, cfg.train_tasks, context_weight=cfg.context_weight,
                                       weights=cfg.task_weights)
        self.vocab = (len(tokenizer.all_special_ids), vocab_size)
        self.state: dict[str, Any] = {"phase": "copy", "level": 0, "steps_at_level": 0, "copy_loss": 10.0,
                                      "em": 0.0, "final_left": -1}

    def max_steps(self) -> int:
        c = self.cfg
        return c.copy_max_steps + len(c.retrieval_lengths) * c.max_steps_per_length + c.final_steps

    def state_dict(self) -> dict:
        return dict(self.state)

    def load_state_dict(self, state: dict) -> None:
        self.state = dict(state)

    def length(self) -> int:
        return self.cfg.retrieval_lengths[self.state["level"]]

    def batch(self, step: int) -> dict[str, np.ndarray]:
        c = self.cfg
        rng = _rng(c.seed, step)
        pad = self.tok.pad_token_id
        if self.state["phase"] == "copy":
            segs = [copy_segment(rng, c.copy_row_len, c.copy_period, *self.vocab) for _ in range(c.copy_rows)]
            return pack_rows(segs, c.copy_row_len, pad)
        L = self.length()
        n_ret = max(c.tokens_per_step // L, 1)
        segs: list[Segment] = [self.retrieval.segment(rng, L) for _ in range(n_ret)]
        n_copy = int(round(c.copy_fraction * n_ret * L / c.copy_row_len))
        segs += [copy_segment(rng, c.copy_row_len, c.copy_period, *self.vocab) for _ in range(n_copy)]
        n_lm = int(round(c.lm_fraction * n_ret))
        segs += [_weighted(self.corpus.segment(rng, L), c.lm_weight) for _ in range(n_lm)]
        order = rng.permutation(len(segs))
        return pack_rows([segs[i] for i in order], L, pad)

    def observe(self, step: int, metrics: dict[str, float]) -> None:
        s, c = self.state, self.cfg
        s["steps_at_level"] += 1
        if s["phase"] == "copy":
            s["copy_loss"] = 0.9 * s["copy_loss"] + 0.1 * metrics["loss"] if step else metrics["loss"]
            if s["copy_loss"] < c.copy_done_loss or s["steps_at_level"] >= c.copy_max_steps:
                s.update(phase="retrieval", steps_at_level=0, em=0.0, copy_steps=step + 1)
            return
        if "train_em" in metrics:
            s["em"] = 0.9 * s["em"] + 0.1 * metrics["train_em"]
        last = s["level"] == len(c.retrieval_lengths) - 1
        if s["final_left"] > 0:
            s["final_left"] -= 1
            return
        ready = s["steps_at_level"] >= c.min_steps_per_length and s["em"] >= c.advance_em
        timeout = s["steps_at_level"] >= c.max_steps_per_length
        if ready or timeout:
            s.setdefault("advanced_at", []).append(step + 1)
            if last:
                s["final_left"] = c.final_steps
                s["reached_em"] = bool(ready)
            else:
                s.update(level=s["level"] + 1, steps_at_level=0, em=0.0)

    def finished(self, step: int) -> bool:
        return self.state["final_left"] == 0

    def lr_scale(self, step: int) -> float:
        """1 until the final steps, then a cosine decay to ``final_min_lr_ratio`` at the last one."""
        c, left = self.cfg, self.state["final_left"]
        if left <= 0 or c.final_steps <= 1:
            return 1.0
        t = (c.final_steps - left) / (c.final_steps - 1)
        return cosine_decay(t, c.final_min_lr_ratio)


def _weighted(seg: Segment, w: float) -> Segment:
    return Segment(seg.tokens, np.full(len(seg.tokens), w, dtype=np.float32), seg.positions)


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
    ("Random T"). See :mod:`repro.selection`."""

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
    ``sample_len`` tokens of whole sentences (:func:`repro.selection.select_sentences`),
    keeping the instruction, evidence, question and answer of retrieval rows; a row whose mandatory
    sentences exceed the budget falls back to a contiguous sample (``fallback_rows``), and a retrieval
    row shorter than every training task's minimum becomes a corpus row (``no_retrieval_rows``).
    """

    def __init__(self, name: str, spec: ExtensionSpec, target: int, batch_size: int, retrieval_fraction: float,
                 tokenizer, corpus: CorpusRows, seed: int, context_weight: float = 0.05,
                 train_tasks: tuple[str, ...] = ("niah_single_1",), sample_len: int | None = None,
                 anchors: np.ndarray | None = None):
        from repro.selection import SELECTION_MODES

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
        self.ends = sentence_end_table(tokenizer)
        self.is_anchor = np.zeros(len(self.ends), dtype=bool)
        if anchors is not None:
            self.is_anchor[np.asarray(anchors, dtype=np.int64)] = True
        self.transform = _transform(spec.transform, self.ends)
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
        from repro.selection import select_sentences

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
        rng = _rng(self.seed, step, 1)
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


def sentence_end_table(tokenizer) -> np.ndarray:
    """Per vocabulary id: does the token's text contain a sentence delimiter (``. ! ? \\n``)?"""
    from repro.positions import SENTENCE_DELIMITERS

    return np.array([any(d in tokenizer.decode([i]) for d in SENTENCE_DELIMITERS) for i in range(len(tokenizer))])


def _transform(name: str, sentence_ends: np.ndarray | None):
    """A position transform ``f(tokens, target, rng, **params) -> positions`` from :mod:`repro.positions`."""
    from repro import positions
    from repro.selection import sentence_bounds

    fn = positions.get_transform(name)
    kind = positions.TRANSFORM_INFO[name].kind
    if kind != "positions":
        hint = ("PI trains with identity ids and RoPE linear scaling: use transform 'identity' with "
                "extend.rope_type='linear', rope_factor=target/base" if kind == "rope_scaling" else
                "views are consumed by the self-distillation loss, not by extension rows")
        raise ValueError(f"position transform {name!r} is of kind {kind!r}; extension rows need kind 'positions' ({hint})")

    def call(tokens: np.ndarray, target: int, rng: np.random.Generator, starts: np.ndarray | None = None,
             **params):
        if starts is None and sentence_ends is not None:
            starts = sentence_bounds(sentence_ends[tokens])[:, 0]
        sample = positions.PositionSample(n=len(tokens), token_ids=tuple(int(t) for t in tokens),
                                          sentence_starts=None if starts is None else tuple(int(x) for x in starts))
        return fn(sample, target, rng, **params)

    return call


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


def extension_spec(name: str) -> ExtensionSpec:
    """The spec of a named arm, including ``longrecipe_r<percent>`` (LongRecipe at that token ratio)."""
    if name in EXTENSION_METHODS:
        return EXTENSION_METHODS[name]
    if name.startswith("longrecipe_r") and name[len("longrecipe_r"):].isdigit():
        pct = int(name[len("longrecipe_r"):])
        if 1 <= pct <= 100:
            return ExtensionSpec("longrecipe", sample_ratio=pct / 100, selection="anchors")
    raise ValueError(f"unknown extension method {name!r}; allowed: {', '.join(EXTENSION_METHODS)}, "
                     "longrecipe_r<percent> (1..100)")


def ratio_arm(ratio: float, default_ratio: float) -> str:
    """The arm name of a token ratio: ``longrecipe`` at the profile's ratio, else ``longrecipe_r<pct>``."""
    pct = int(round(ratio * 100))
    return "longrecipe" if pct == int(round(default_ratio * 100)) else f"longrecipe_r{pct}"
