"""The base model's curriculum, and LongRecipe's replay stream (the curriculum's last stage).

``base_curriculum`` teaches the tiny model to copy, then to retrieve, at its
base window (see docs/testbed.md, "The tiny testbed", for why plain retrieval training
does not learn). ``replay`` is the same data at the curriculum's last stage:
LongRecipe §4.3 replays the base model's own training distribution after extension.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from repro.data.packing import Segment, pack_rows
from repro.data.synthetic import CorpusRows, RetrievalRows, copy_segment
from repro.methods.registry import register_method, step_rng
from repro.profiles import BaseTrainConfig
from repro.schedules import cosine_decay


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

    def __init__(self, cfg: BaseTrainConfig, tokenizer, corpus: CorpusRows, vocab_size: int,
                 start: str = "copy", name: str = "base_curriculum"):
        if start not in ("copy", "last"):
            raise ValueError(f"start={start!r}; allowed: copy (the whole curriculum), last (its last retrieval stage)")
        self.cfg, self.tok, self.corpus, self.name = cfg, tokenizer, corpus, name
        self.retrieval = RetrievalRows(tokenizer, cfg.train_tasks, context_weight=cfg.context_weight,
                                       weights=cfg.task_weights)
        self.vocab = (len(tokenizer.all_special_ids), vocab_size)
        # copy_loss is a placeholder (step 0's loss replaces it). final_left has three meanings:
        # -1 = the final (annealed) steps have not started, n > 0 = n final steps left, 0 = finished.
        self.state: dict[str, Any] = {"phase": "copy", "level": 0, "steps_at_level": 0, "copy_loss": 10.0,
                                      "em": 0.0, "final_left": -1}
        if start == "last":
            self.state.update(phase="retrieval", level=len(cfg.retrieval_lengths) - 1)

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
        rng = step_rng(c.seed, step)
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
            # running averages with weight 0.9 (about a 10-step window): one lucky batch cannot end
            # a phase, and the average still reacts within tens of steps
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


@register_method("replay")
def replay(cfg: BaseTrainConfig, tokenizer, corpus: CorpusRows, vocab_size: int) -> BaseCurriculum:
    """LongRecipe §4.3's pretraining-data replay stream: the base curriculum started at its last
    retrieval stage (retrieval, copy and corpus rows at the base window), named ``replay``."""
    return BaseCurriculum(cfg, tokenizer, corpus, vocab_size, start="last", name="replay")
