"""FLOPs of one training step of each method, counted from the model's shape and the step's own rows: the bound a
measured step-time ratio is held against (RP-Cost, CD-Cost).

Per token the weight matmuls of the body cost ``B`` forward (q, k, v, o and the three MLP matrices of every
layer: ``2 x`` their parameters), the LM head ``H`` (``2 h V``, only where logits are computed), and causal
attention's score and value matmuls ``4 L n_h d_h (t + 1)`` for the query at position ``t`` (it sees ``t + 1``
keys); summed over a row of ``T`` tokens that is ``A``. A backward costs twice its forward (the input gradient and
the weight gradient of every matmul; attention's four matmuls against two); an activation-only backward (weights
frozen) costs one forward for the weight matmuls and the head, two for attention. Elementwise work (norms,
activations, softmax over the vocabulary, the optimizer) and gradient checkpointing's recomputation are not counted.

So per row (:func:`arm_flops`):

- the CE step (Standard, and PoSE's or LongRecipe's rows, whose positions change no FLOP): ``3 (T B + A + T H)``;
- CDT: the CE step plus the detection's forward and activation-only backward, ``5 T B + 6 A + 5 T H`` in all;
  the authors' trainer's full detection backward: ``6 (T B + A + T H)``;
- skip view, prefix-shared: the CE step plus the suffix ``[s, T)`` forward and backward (``3 (T - s) B`` and
  three times the attention of queries ``s .. T - 1``) and the KL's head: the perturbed logits forward and backward
  and the standard view's logits again without gradient (``4 (T - s) H``); with ``s`` uniform, about
  ``(4.5 B + 5 A) / (3 B + 3 A)`` plus the head's share;
- two full passes (skip without sharing, cyclic): twice the body and attention, and the KL's head on its positions;
- LongCE: the CE step plus the short windows' forwards (each window's body, attention and head on its scored
  targets) and one more head forward without gradient for the full pass's per-target losses.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from repro.methods.longce import LongCEConfig, window_plan


@dataclass(frozen=True)
class Dims:
    """The sizes of a Llama-architecture model that its FLOPs depend on."""

    hidden: int
    layers: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int

    @classmethod
    def of(cls, config: Any) -> "Dims":
        """From an HF config (``hidden_size``, ``num_hidden_layers``, ``num_attention_heads``,
        ``num_key_value_heads``, ``head_dim`` when set, ``intermediate_size``, ``vocab_size``)."""
        heads = int(config.num_attention_heads)
        head_dim = getattr(config, "head_dim", None) or config.hidden_size // heads
        return cls(int(config.hidden_size), int(config.num_hidden_layers), heads,
                   int(getattr(config, "num_key_value_heads", None) or heads), int(head_dim),
                   int(config.intermediate_size), int(config.vocab_size))

    @property
    def body(self) -> float:
        """``B``: forward FLOPs of the body's weight matmuls per token."""
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        return 2.0 * self.layers * (self.hidden * q + 2 * self.hidden * kv + q * self.hidden
                                    + 3 * self.hidden * self.intermediate)

    @property
    def head(self) -> float:
        """``H``: forward FLOPs of the LM head per token whose logits are computed."""
        return 2.0 * self.hidden * self.vocab

    def attention(self, start: int, stop: int) -> float:
        """Forward FLOPs of causal attention of the queries at positions ``start .. stop - 1`` (each over the keys
        up to itself): ``4 L n_h d_h`` times the keys seen, ``sum (t + 1)``."""
        keys = (stop * (stop + 1) - start * (start + 1)) / 2.0
        return 4.0 * self.layers * self.heads * self.head_dim * keys

    def proportions(self, length: int) -> dict[str, float]:
        """``head / body`` (``H / B``) and ``attention / body`` (``A / (T B)`` at ``length`` tokens)."""
        return {"head/body": self.head / self.body,
                "attention/body": self.attention(0, length) / (length * self.body)}


def ce_flops(d: Dims, T: int) -> float:
    """A CE step (forward and backward) on one row of ``T`` tokens."""
    return 3.0 * (T * d.body + d.attention(0, T) + T * d.head)


def longce_window_flops(d: Dims, T: int, window: int, stride: int) -> float:
    """LongCE's short windows of one row (forwards without gradient: body, attention, the head on the scored
    targets) and the extra head forward of the full pass's per-target losses."""
    total = T * d.head
    for _, n in window_plan(T, LongCEConfig(window=window, stride=stride)):
        total += (window + n) * d.body + d.attention(0, window + n) + n * d.head
    return total


def selfdistill_flops(d: Dims, T: int, split: int, fields: Mapping[str, Any],
                      longce: tuple[int, int] | None = None) -> float:
    """One row of a self-distillation step (``fields``: :class:`repro.methods.selfdistill.SelfDistillSpec`
    fields; ``split``: the row's ``s``, 0 for views without one; ``longce``: ``(window, stride)`` of the LongCE
    arms)."""
    total = ce_flops(d, T)
    if fields.get("longce"):
        if longce is None:
            raise ValueError("a LongCE arm needs longce=(window, stride)")
        total += longce_window_flops(d, T, *longce)
    consistency = fields.get("consistency", "kl")
    if consistency == "none" or fields.get("lam", 1.0) == 0:
        return total
    view = fields.get("view", "skip")
    kl = T - split if view == "skip" else T
    shared = view == "skip" and fields.get("shared_prefix", True)
    start = split if shared else 0
    total += 3.0 * ((T - start) * d.body + d.attention(start, T))
    if consistency == "kl":
        return total + 4.0 * kl * d.head
    return total + 3.0 * T * d.head  # "clm": the perturbed view's CLM over the whole row


def cdt_flops(d: Dims, T: int, detection: str | None) -> float:
    """One row of a CD-Cost arm: ``detection`` None (the CE step), ``frozen`` (CDT), ``full_backward`` (a
    full-backward detection: 2x CE) or ``authors`` (the authors' trainer: a discarded clean forward and full backward
    too, three of each: 3x CE)."""
    fwd = T * d.body + d.attention(0, T) + T * d.head
    if detection is None:
        return 3.0 * fwd
    if detection == "frozen":
        return 3.0 * fwd + fwd + (T * d.body + 2.0 * d.attention(0, T) + T * d.head)
    if detection == "full_backward":
        return 6.0 * fwd
    if detection == "authors":
        return 9.0 * fwd
    raise ValueError(f"detection={detection!r}; allowed: None, frozen, full_backward, authors")


def rows_flops(per_row, lengths: Sequence[int], splits: Sequence[int] | None = None) -> float:
    """The sum of ``per_row(T, s)`` over a batch's rows (``splits``: each row's ``s``, default 0)."""
    splits = list(splits) if splits is not None else [0] * len(lengths)
    return float(sum(per_row(int(T), int(s)) for T, s in zip(lengths, splits)))
