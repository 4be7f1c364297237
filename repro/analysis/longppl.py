"""LongPPL (Fang et al., "What is Wrong with Perplexity for Long-context Language Modeling?", ICLR 2025).

An *evaluator* model picks the key tokens of a long text: the targets whose log-probability the long context
raises. With ``LSD(x_i) = log p(x_i | long context) - log p(x_i | short context)`` (long-short difference) and
``LCL(x_i) = log p(x_i | long context)`` (long-context likelihood), token ``x_i`` is key when ``LSD > alpha`` and
``LCL > beta``. The LongPPL of the *evaluated* model is ``exp`` of its mean cross-entropy over the key tokens
only, from its own full-context predictions; its PPL is the same over every target. CDT (context-denoising
training) reports LongPPL (its Table 2) and ranks tokens by this score for its critical-token detection (Fig. 7).

What the official code does (PKU-ML/LongPPL, package ``longppl``: ``find_key_token``, ``cal_overlap`` and
``compute_longppl`` in ``longppl/longppl.py``; the aggregation in ``perplexity/perplexity.py``), and what we do:

* **Short contexts: the LongCE windows.** ``find_key_token`` runs the evaluator once on the whole text, then
  ``for start in range(0, T - trunc_len, sliding_window)`` on the slice ``input_ids[start : start + trunc_len +
  sliding_window]`` (cut at the end for the last window) and scores the slice's last ``sliding_window`` targets.
  Defaults: ``trunc_len`` = 4096 (our :attr:`LongPPLConfig.window`), ``sliding_window`` = 1024
  (:attr:`LongPPLConfig.stride`). This is exactly the windowing of the official LongCE training loss (same
  loop, same defaults), so we reuse :func:`repro.methods.longce.short_context_losses` and its
  :func:`~repro.methods.longce.window_plan`: a scored target sees between ``window`` and ``window + stride - 1``
  tokens of short context, positions numbered from 0 in each window (the official call passes no
  ``position_ids``). There is no evaluation-only window setting, so no extra config field.
* **Which tokens can be key.** Only the targets a window scores: tokens ``window .. T-1`` (token indices; the
  first window starts at 0, so its targets have LSD = 0 up to rounding and are never key with ``alpha >= 0``).
* **Thresholds.** ``(loss_short - loss_full) > alpha`` and ``loss_full < -beta``, both strict, from the
  evaluator's per-target cross-entropies; defaults ``alpha`` = 2, ``beta`` = -2 (``compute_longppl``'s
  arguments and the ``--alpha``/``--beta`` defaults of ``perplexity.py``).
* **Per document.** ``compute_longppl`` returns ``longppl = exp(mean CE over key tokens)``, ``n_key_token``,
  ``ppl = exp(mean CE over all T-1 targets)`` and ``n_token`` = T (tokens, not targets). A document without key
  tokens gets ``longppl`` = None (and ``n_key_token`` None; we say 0).
* **Over documents** (``perplexity.py``): ``exp(sum_d n_key_d * log longppl_d / sum_d n_key_d)``, i.e. the
  cross-entropy pooled over all key tokens of all documents (documents without key tokens drop out), NOT the
  mean of the per-document LongPPLs; PPL likewise, weighted by ``n_token`` = T_d (so a document's mean CE over
  its T_d - 1 targets gets weight T_d). :func:`aggregate` does the same. The paper's protocol
  (``perplexity/run_ppl.sh``): 50 GovReport documents of at least 16384 tokens, each cut to its first 32767
  tokens (``--max-length 32768``); the caller chooses the documents here.
* **Tokenizers.** The official evaluator and evaluated model may use different tokenizers: the evaluator's key
  tokens become character spans (their offsets, with touching spans merged) and an evaluated-model token is key
  when its character span lies inside one of them. The evaluator tokenizes the text *with* special tokens (a
  BOS where the tokenizer adds one), the evaluated model *without*. :mod:`repro.analysis.longppl_align`
  implements that text path (:func:`~repro.analysis.longppl_align.compute_longppl_text`).

Where we differ:

* **The token-id path assumes one shared tokenizer.** :func:`compute_longppl` (and :func:`key_tokens` /
  :func:`longppl` composed by hand) take token ids that both models read: the key-token mask of the evaluator is
  the evaluated model's key mask, with no character alignment and no BOS difference (whatever the row holds,
  both models see it). That is what the tiny profile needs (one tokenizer for every model). Different
  vocabulary sizes are refused with an error pointing to the text path; equal sizes do not prove a shared
  tokenizer, which stays the caller's responsibility.
* **Precision.** The official script loads both models in bf16 and takes the cross-entropy of bf16 logits
  (rounded to bf16 before the thresholds). We use each model in its own dtype, the head's matmul in that dtype
  and the log-softmax in float32 (float64 for float64 models), without the bf16 rounding of the losses.
* **Batches.** Rows of ``input_ids`` are scored independently (the official code takes one text at a time) and
  are aggregated over as separate documents.
* **Threshold ranges.** The official functions take any ``alpha`` and ``beta``; :class:`LongPPLConfig` refuses
  ``alpha < 0`` (it would flag tokens the long context makes *less* likely) and ``beta >= 0`` (no log-probability
  exceeds it, so no token could be key). Ranking by LSD (:func:`top_lsd`) needs no threshold.
* **Mode.** Both models are run in ``eval`` mode (as loaded by ``from_pretrained`` in the official script); a
  model in ``train`` mode is switched for the call and restored afterwards.

Indexing convention: masks and scores are (B, T) over *tokens*; entry ``[b, j]`` concerns token ``j`` as a
target, predicted from position ``j - 1`` (the official key-token indices). Column 0 (no prediction) is never
key, never scored.
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import torch
import torch.nn.functional as F

from repro.methods.longce import LongCEConfig, per_token_ce, short_context_losses
from repro.models import forward, forward_hidden, load_model, plain_head_weight

ModelLike = torch.nn.Module | str | Path
"""A loaded causal LM, or a path / HF id for :func:`repro.models.load_model`."""


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_real(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


@dataclass(frozen=True)
class LongPPLConfig:
    """LongPPL's settings; the defaults are the official ones (``compute_longppl`` and ``perplexity.py``)."""

    alpha: float = 2.0
    """LSD threshold: a key token has ``log p_long - log p_short > alpha`` (strict). Official: 2."""
    beta: float = -2.0
    """LCL threshold: a key token has ``log p_long > beta`` (strict). Official: -2."""
    window: int = 4096
    """Short-context length (official ``trunc_len``): a scored target sees ``window`` to ``window + stride - 1``
    tokens in its short pass; tokens ``0 .. window - 1`` are never scored, hence never key. Official: 4096."""
    stride: int = 1024
    """Distance between window starts and number of targets a window scores (official ``sliding_window``).
    Official: 1024."""
    chunk: int = 2048
    """Targets whose logits are built at once (cost only, not the result)."""
    max_pass_tokens: int = 16384
    """Short windows stacked into one forward, up to this many tokens (cost only, not the result beyond
    rounding; :func:`repro.methods.longce.short_context_losses`)."""

    def __post_init__(self):
        if not _is_real(self.alpha) or self.alpha < 0:
            raise ValueError(f"alpha={self.alpha!r}; allowed: a finite number >= 0 (nats of log-probability gain)")
        if not _is_real(self.beta) or self.beta >= 0:
            raise ValueError(f"beta={self.beta!r}; allowed: a finite number < 0 (a log-probability; >= 0 would "
                             "select no token)")
        if not _is_int(self.window) or self.window < 2:
            raise ValueError(f"window={self.window!r}; allowed: an integer >= 2 tokens")
        if not _is_int(self.stride) or not 1 <= self.stride <= self.window:
            raise ValueError(f"stride={self.stride!r}; allowed: an integer with 1 <= stride <= window={self.window}")
        if not _is_int(self.chunk) or self.chunk < 1:
            raise ValueError(f"chunk={self.chunk!r}; allowed: an integer >= 1 target tokens")
        if not _is_int(self.max_pass_tokens) or self.max_pass_tokens < 1:
            raise ValueError(f"max_pass_tokens={self.max_pass_tokens!r}; allowed: an integer >= 1 tokens")

    @classmethod
    def scaled(cls, base_window: int, **overrides) -> "LongPPLConfig":
        """The official ratio at another scale: ``window`` = the short model's context, ``stride`` a quarter of
        it (official 4096 and 1024); the tiny profile's 256 gives 256 and 64. ``overrides`` set other fields."""
        if not _is_int(base_window) or base_window < 2:
            raise ValueError(f"base_window={base_window!r}; allowed: an integer >= 2 tokens")
        return cls(**{"window": base_window, "stride": max(1, base_window // 4), **overrides})

    @property
    def windows(self) -> LongCEConfig:
        """The same short windows as a :class:`~repro.methods.longce.LongCEConfig` (identical official loop)."""
        return LongCEConfig(window=self.window, stride=self.stride)


@dataclass(frozen=True)
class TokenScores:
    """The evaluator's per-token LSD and LCL, (B, T) over tokens (column ``j``: token ``j`` as a target)."""

    lsd: torch.Tensor
    """``loss_short - loss_full`` = ``log p_long - log p_short``; NaN where not scored."""
    lcl: torch.Tensor
    """``-loss_full`` = ``log p_long``; NaN in column 0 (no prediction)."""
    scored: torch.Tensor
    """Bool: the token has a short-context score (tokens ``window ..`` of rows longer than ``window``)."""

    @classmethod
    def from_losses(cls, loss_short: torch.Tensor, loss_full: torch.Tensor, scored: torch.Tensor) -> "TokenScores":
        """From per-target losses and the scored mask, all (B, T-1) (target ``t`` is token ``t + 1``, the
        convention of :func:`repro.methods.longce.short_context_losses`)."""
        if loss_short.shape != loss_full.shape or scored.shape != loss_full.shape or loss_full.dim() != 2:
            raise ValueError(f"shapes loss_short {tuple(loss_short.shape)}, loss_full {tuple(loss_full.shape)}, "
                             f"scored {tuple(scored.shape)}; allowed: all the same (B, T-1)")
        full = loss_full.detach()
        short = loss_short.detach().to(full.dtype)
        nan = torch.full_like(full[:, :1], float("nan"))
        lsd = torch.where(scored, short - full, torch.full_like(full, float("nan")))
        col = torch.zeros_like(scored[:, :1])
        return cls(lsd=torch.cat([nan, lsd], 1), lcl=torch.cat([nan, -full], 1), scored=torch.cat([col, scored], 1))


def select_key_tokens(scores: TokenScores, alpha: float = 2.0, beta: float = -2.0) -> torch.Tensor:
    """(B, T) bool: ``scored & (LSD > alpha) & (LCL > beta)``, both strict (official ``find_key_token``)."""
    return scores.scored & (scores.lsd > alpha) & (scores.lcl > beta)


def top_lsd(scores: TokenScores, k: int) -> torch.Tensor:
    """(B, k) token indices of each row's ``k`` highest LSD among its scored tokens, highest first (the
    "top-k tokens by score" ranking; ties in any order)."""
    n = int(scores.scored.sum(1).min()) if scores.scored.numel() else 0
    if not _is_int(k) or not 1 <= k <= n:
        raise ValueError(f"k={k!r}; allowed: an integer with 1 <= k <= {n} (the scored tokens of a row)")
    ranked = torch.where(scores.scored, scores.lsd, torch.full_like(scores.lsd, -math.inf))
    return ranked.topk(k, dim=1).indices


@contextmanager
def eval_mode(model: torch.nn.Module):
    """Run ``model`` in ``eval`` mode, restoring every submodule's own mode afterwards."""
    modes = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield model
    finally:
        for m, training in modes:
            m.training = training


def as_model(model: ModelLike) -> torch.nn.Module:
    """``model`` itself, or the causal LM at that path / HF id (:func:`repro.models.load_model`)."""
    if isinstance(model, torch.nn.Module):
        return model
    if isinstance(model, (str, Path)):
        return load_model(model).eval()
    raise TypeError(f"model is a {type(model).__name__}; allowed: a torch.nn.Module, or a path / HF id (str, Path)")


def _rows(input_ids: torch.Tensor, model: torch.nn.Module) -> torch.Tensor:
    if not isinstance(input_ids, torch.Tensor) or input_ids.dim() != 2 or input_ids.dtype != torch.long:
        shape = tuple(input_ids.shape) if isinstance(input_ids, torch.Tensor) else type(input_ids).__name__
        raise ValueError(f"input_ids: {shape}; allowed: a (batch, tokens) tensor of token ids (torch.long)")
    V = vocab_size(model)
    if input_ids.numel() and not 0 <= int(input_ids.min()) <= int(input_ids.max()) < V:
        raise ValueError(f"token ids span {int(input_ids.min())}..{int(input_ids.max())}; allowed: 0..{V - 1} "
                         "(the model's vocabulary)")
    param = next(model.parameters(), None)
    return input_ids if param is None else input_ids.to(param.device)


def vocab_size(model: torch.nn.Module) -> int:
    """Rows of the model's input embedding (``config.vocab_size`` for HF models)."""
    return model.get_input_embeddings().num_embeddings


@torch.no_grad()
def full_context_losses(model: ModelLike, input_ids: torch.Tensor, chunk: int = 2048) -> torch.Tensor:
    """(B, T-1) per-target cross-entropy of one full-context forward per row, in ``eval`` mode: entry ``t`` is
    the loss of token ``t + 1``. Plain-head models (:func:`repro.models.plain_head_weight`) go through the
    final hidden states, ``chunk`` targets of logits at a time; others through the model's logits."""
    model = as_model(model)
    ids = _rows(input_ids, model)
    with eval_mode(model):
        head = plain_head_weight(model)
        if head is not None:
            return per_token_ce(forward_hidden(model, ids), head, ids, chunk)
        logits = forward(model, ids).logits[:, :-1]
        logits = logits if logits.dtype == torch.float64 else logits.float()
        B, T1, V = logits.shape
        return F.cross_entropy(logits.reshape(-1, V), ids[:, 1:].reshape(-1), reduction="none").view(B, T1)


@torch.no_grad()
def lsd_scores(evaluator: ModelLike, input_ids: torch.Tensor, cfg: LongPPLConfig = LongPPLConfig()) -> TokenScores:
    """The evaluator's LSD and LCL of every token of ``input_ids`` (B, T): one full-context forward per row and
    the official short windows (:func:`repro.methods.longce.short_context_losses`), in ``eval`` mode."""
    evaluator = as_model(evaluator)
    ids = _rows(input_ids, evaluator)
    with eval_mode(evaluator):
        full = full_context_losses(evaluator, ids, cfg.chunk)
        short, scored = short_context_losses(evaluator, ids, cfg.windows, chunk=cfg.chunk,
                                             max_pass_tokens=cfg.max_pass_tokens)
    return TokenScores.from_losses(short, full, scored)


def key_tokens(evaluator: ModelLike, input_ids: torch.Tensor, cfg: LongPPLConfig = LongPPLConfig()) -> torch.Tensor:
    """(B, T) bool: the evaluator's key tokens (:func:`lsd_scores` thresholded by :func:`select_key_tokens`)."""
    return select_key_tokens(lsd_scores(evaluator, input_ids, cfg), cfg.alpha, cfg.beta)


def document_result(ce: torch.Tensor, key: torch.Tensor) -> dict:
    """One document's official numbers from its per-target CE (T-1,) and key mask over targets (T-1,):
    ``longppl`` (None without key tokens), ``ppl``, ``n_key``, ``n_tokens`` (= T, the official ``n_token``)."""
    ce = ce.double()
    n_key = int(key.sum())
    return {"longppl": math.exp(float(ce[key].mean())) if n_key else None, "ppl": math.exp(float(ce.mean())),
            "n_key": n_key, "n_tokens": ce.numel() + 1}


def aggregate(rows: Sequence[dict]) -> dict:
    """The official aggregation over documents (``perplexity.py``): ``exp`` of the ``n_key``-weighted mean of
    ``log longppl`` over documents with key tokens (= the CE pooled over all key tokens), and ``exp`` of the
    ``n_tokens``-weighted mean of ``log ppl``. ``longppl`` is None when no document has a key token."""
    if not rows:
        raise ValueError("rows is empty; allowed: at least one document")
    keyed = [r for r in rows if r["longppl"] is not None and r["n_key"] > 0]
    n_key = sum(r["n_key"] for r in keyed)
    n_tokens = sum(r["n_tokens"] for r in rows)
    lppl = math.exp(sum(r["n_key"] * math.log(r["longppl"]) for r in keyed) / n_key) if n_key else None
    ppl = math.exp(sum(r["n_tokens"] * math.log(r["ppl"]) for r in rows) / n_tokens)
    return {"longppl": lppl, "ppl": ppl, "n_key": n_key, "n_tokens": n_tokens}


@torch.no_grad()
def longppl(model: ModelLike, input_ids: torch.Tensor, key_mask: torch.Tensor, chunk: int = 2048) -> dict:
    """LongPPL and PPL of ``model`` on ``input_ids`` (B, T) given the key tokens ``key_mask`` (B, T) (e.g. from
    :func:`key_tokens`). Each row is a document (:func:`document_result`); the returned ``longppl``, ``ppl``,
    ``n_key``, ``n_tokens`` aggregate them as the official script does (:func:`aggregate`), and ``rows`` holds
    the per-row dicts."""
    model = as_model(model)
    ids = _rows(input_ids, model)
    if not isinstance(key_mask, torch.Tensor) or key_mask.dtype != torch.bool or key_mask.shape != ids.shape:
        got = f"{key_mask.dtype} {tuple(key_mask.shape)}" if isinstance(key_mask, torch.Tensor) else type(key_mask)
        raise ValueError(f"key_mask: {got}; allowed: a bool tensor shaped like input_ids {tuple(ids.shape)}")
    if ids.shape[1] < 2:
        raise ValueError(f"rows of {ids.shape[1]} tokens; allowed: >= 2 (at least one target)")
    if bool(key_mask[:, 0].any()):
        raise ValueError("key_mask[:, 0] is True; allowed: False (token 0 is predicted by nothing)")
    ce = full_context_losses(model, ids, chunk).cpu()
    key = key_mask[:, 1:].cpu()
    rows = [document_result(ce[b], key[b]) for b in range(ids.shape[0])]
    return {**aggregate(rows), "rows": rows}


def compute_longppl(model: ModelLike, evaluator: ModelLike, input_ids: torch.Tensor | Sequence[torch.Tensor],
                    cfg: LongPPLConfig = LongPPLConfig()) -> dict:
    """LongPPL of ``model`` with key tokens chosen by ``evaluator``, both reading the same token ids (a shared
    tokenizer; module docstring). ``input_ids``: a (B, T) tensor, or a list of 1-D tensors of different lengths
    (each scored alone); either way every row is a document and the result aggregates them officially
    (:func:`aggregate`), with ``rows`` and ``key_mask`` (a (B, T) tensor, or a list of (T_d,) masks)."""
    model, evaluator = as_model(model), as_model(evaluator)
    if vocab_size(model) != vocab_size(evaluator):
        raise ValueError(f"vocabulary sizes differ: model {vocab_size(model)}, evaluator {vocab_size(evaluator)}; "
                         "allowed: equal (the token-id path needs one shared tokenizer); for different tokenizers "
                         "use repro.analysis.longppl_align.compute_longppl_text (character-offset alignment)")
    if isinstance(input_ids, torch.Tensor):
        key = key_tokens(evaluator, input_ids, cfg)
        return {**longppl(model, input_ids, key, cfg.chunk), "key_mask": key}
    docs = list(input_ids)
    if not docs or any(not isinstance(d, torch.Tensor) or d.dim() != 1 for d in docs):
        raise ValueError("input_ids: allowed a (batch, tokens) tensor or a non-empty list of 1-D token tensors")
    rows, keys = [], []
    for d in docs:
        key = key_tokens(evaluator, d[None], cfg)
        rows += longppl(model, d[None], key, cfg.chunk)["rows"]
        keys.append(key[0])
    return {**aggregate(rows), "rows": rows, "key_mask": keys}
