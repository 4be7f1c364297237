"""Attention of the last queries over every key, and its histogram by query-key distance (RP-Fig2).

RoPE-perturbed self-distillation (Fig. 2) takes the last 256 queries of a 64K sequence, keeps every
attention weight above 1e-3 and histograms the signed distance ``query index - key index``. Here:

* :func:`recording_query_rows` switches a model, for the duration of a ``with`` block, to a recording
  attention function registered in transformers' attention-function registry
  (``AttentionInterface.register``). It receives the queries and keys the layer really uses (after
  RoPE, q/k norms, ...), computes the attention probabilities of the last ``queries`` rows only
  (``scores = q k^T * scaling`` plus the mask of those rows, softmax in float32 or wider; GQA by
  grouping the query heads of each key/value head), then hands the call to the model's original
  implementation (eager, sdpa or flash attention), so the model's outputs do not change. Memory:
  O(queries x T) per layer, never the T x T matrix. The original implementation is restored on exit,
  also after an error. A mask function is registered under the same name (the original's), so the
  model builds the mask the original implementation expects.
* :func:`query_attention` runs one forward with :func:`repro.models.forward` (an explicit all-ones
  ``attention_mask``: jumps in ``position_ids`` are not read as packed documents) and returns the rows.
* :func:`distance_histogram` turns one layer's rows into a :class:`DistanceHistogram`: counts of the
  (head, query, key) entries above a threshold per distance bin, their attention mass, and the scalar
  summaries (mean distance, weighted and unweighted; share of entries beyond a fraction of T).
  Histograms of several inputs add up (``+``).

Not covered: attention sinks (``s_aux``), ALiBi-style position biases and flex attention's block masks
(the probabilities would differ from the kernel's); such calls raise ``ValueError``.
"""

from __future__ import annotations

import contextlib
import sys
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Mapping

import numpy as np
import torch
from transformers import AttentionInterface, AttentionMaskInterface

from repro.analysis.capture import attention_implementation
from repro.models import forward

SUPPORTED = ("eager", "sdpa", "flash_attention_2", "flash_attention_3", "flash_attention_4")
"""Attention implementations the recorder can wrap."""
_CODE = {"eager": "e", "sdpa": "s", "flash_attention_2": "f2", "flash_attention_3": "f3", "flash_attention_4": "f4"}
"""Registered names are ``query_rows_<code>``: without 'sdpa' or 'flash' in them, which transformers would read
as a request for those kernels."""
_ACTIVE: dict[int, "QueryRows"] = {}
"""id(module) -> the recording session of the model that module belongs to."""


# -- recording -----------------------------------------------------------------------------------
@dataclass
class QueryRows:
    """One recording session: what to keep, and what was kept (``rows``: layer -> (B, heads, queries, T))."""

    model: torch.nn.Module
    """The model being recorded."""
    original: str
    """Its attention implementation before recording (restored on exit)."""
    name: str
    """The registered name of the recording implementation."""
    queries: int
    """How many last query rows to compute per layer."""
    layers: frozenset[int] | None = None
    """Layers to record (None: all)."""
    reduce: Callable[[int, torch.Tensor], None] | None = None
    """Called as ``reduce(layer, rows)`` instead of storing the rows (keeps memory at one layer's rows)."""
    rows: dict[int, torch.Tensor] = field(default_factory=dict)
    """Layer -> rows of the last forward (when ``reduce`` is None)."""
    _order: dict[int, int] = field(default_factory=dict)

    def layer_of(self, module: torch.nn.Module) -> int:
        """The module's ``layer_idx``, else the order in which the attention modules were first called."""
        idx = getattr(module, "layer_idx", None)
        return idx if isinstance(idx, int) else self._order.setdefault(id(module), len(self._order))

    def record(self, module, query, key, attention_mask, kwargs) -> None:
        layer = self.layer_of(module)
        if self.layers is not None and layer not in self.layers:
            return
        causal = kwargs.get("is_causal")  # as the kernels read it: the call's flag, else the module's
        causal = getattr(module, "is_causal", True) if causal is None else causal
        rows = attention_rows(query, key, attention_mask, self.queries, scaling=kwargs.get("scaling"),
                              is_causal=causal, sliding_window=kwargs.get("sliding_window"),
                              softcap=kwargs.get("softcap"))
        if self.reduce is not None:
            self.reduce(layer, rows)
        else:
            self.rows[layer] = rows


def _row_mask(scores: torch.Tensor, attention_mask, q_len: int, queries: int, is_causal: bool,
              sliding_window: int | None) -> torch.Tensor:
    """``scores`` (B, H, queries, T) with the mask of the last ``queries`` rows applied."""
    k_len = scores.shape[-1]
    low = torch.finfo(scores.dtype).min
    if isinstance(attention_mask, torch.Tensor) and attention_mask.ndim == 4:
        m = attention_mask[..., -queries:, :k_len] if attention_mask.shape[-2] == q_len else attention_mask[..., :k_len]
        if m.dtype == torch.bool:
            return scores.masked_fill(~m, low)
        return scores + m.to(scores.dtype)
    if attention_mask is not None and not (isinstance(attention_mask, torch.Tensor) and attention_mask.ndim == 2):
        raise ValueError(f"attention mask of type {type(attention_mask).__name__}; allowed: None, a 2-D padding "
                         "mask or a 4-D mask (flex attention's block masks are not supported)")
    allowed = torch.ones(queries, k_len, dtype=torch.bool, device=scores.device)
    if is_causal:  # queries sit at the end of the keys (bottom-right aligned, as with a cache)
        qpos = torch.arange(k_len - queries, k_len, device=scores.device)[:, None]
        kpos = torch.arange(k_len, device=scores.device)[None, :]
        allowed = kpos <= qpos
        if sliding_window:
            allowed = allowed & (qpos - kpos < sliding_window)
    allowed = allowed[None, None]
    if attention_mask is not None:  # 2-D key padding mask (flash attention)
        allowed = allowed & attention_mask[:, None, None, :k_len].bool()
    return scores.masked_fill(~allowed, low)


def attention_rows(query: torch.Tensor, key: torch.Tensor, attention_mask, queries: int, scaling: float | None = None,
                   is_causal: bool = True, sliding_window: int | None = None,
                   softcap: float | None = None) -> torch.Tensor:
    """Attention probabilities of the last ``queries`` query rows: (B, heads, queries, T).

    ``query`` (B, heads, q_len, D) and ``key`` (B, kv_heads, T, D) as an attention function receives them;
    ``attention_mask`` as the model built it for the implementation (None, a 2-D padding mask, or an additive
    float / boolean 4-D mask). Scores in float32 (float64 for float64 inputs), softmax in float32 (as transformers'
    eager kernels): float32 rows.
    """
    b, heads, q_len, dim = query.shape
    kv_heads, k_len = key.shape[1], key.shape[2]
    if not 1 <= queries <= q_len:
        raise ValueError(f"queries={queries}; allowed: 1 <= queries <= {q_len} (the query length)")
    if heads % kv_heads:
        raise ValueError(f"{heads} query heads and {kv_heads} key/value heads; allowed: heads divisible by kv heads")
    dtype = torch.promote_types(query.dtype, torch.float32)
    rep = heads // kv_heads
    q = query[:, :, q_len - queries:].to(dtype).reshape(b, kv_heads, rep * queries, dim)  # GQA: heads of a kv head
    scores = (q @ key.to(dtype).transpose(-1, -2)).reshape(b, heads, queries, k_len)
    scores = scores * (dim ** -0.5 if scaling is None else scaling)
    if softcap:
        scores = torch.tanh(scores / softcap) * softcap
    scores = _row_mask(scores, attention_mask, q_len, queries, is_causal, sliding_window)
    return torch.softmax(scores, dim=-1, dtype=torch.float32)  # as the eager kernels do


def _eager(module, query, key, value, attention_mask, scaling=None, dropout=0.0, **kwargs):
    """Plain eager attention (for a model whose modelling file has no ``eager_attention_forward``)."""
    rep = query.shape[1] // key.shape[1]
    k, v = key.repeat_interleave(rep, dim=1), value.repeat_interleave(rep, dim=1)
    w = query @ k.transpose(-1, -2) * (query.shape[-1] ** -0.5 if scaling is None else scaling)
    if attention_mask is not None:
        w = w + attention_mask[..., : k.shape[-2]]
    w = torch.softmax(w, dim=-1, dtype=torch.float32).to(query.dtype)
    w = torch.nn.functional.dropout(w, p=dropout, training=module.training)
    return (w @ v).transpose(1, 2).contiguous(), w


def _original_function(module: torch.nn.Module, original: str) -> Callable:
    """The function the model would call for ``original``: its modelling file's eager attention, or the registry's."""
    if original == "eager":
        return getattr(sys.modules.get(type(module).__module__), "eager_attention_forward", _eager)
    return AttentionInterface()[original]


def _make_recorder(original: str) -> Callable:
    def recording_attention(module, query, key, value, attention_mask, *args, **kwargs):
        session = _ACTIVE.get(id(module))
        if session is not None:
            session.record(module, query, key, attention_mask, kwargs)
        fn = _original_function(module, original)
        if "flash" not in original:
            return fn(module, query, key, value, attention_mask, *args, **kwargs)
        if session is None:
            raise ValueError(f"the recording attention of {original!r} was called outside recording_query_rows")
        session.model.set_attn_implementation(original)  # flash kernels read the name from the config
        try:
            return fn(module, query, key, value, attention_mask, *args, **kwargs)
        finally:
            session.model.set_attn_implementation(session.name)

    recording_attention.__name__ = f"recording_attention_{_CODE[original]}"
    return recording_attention


def _register(original: str) -> str:
    """Register the recording attention and its mask function for ``original``; returns the name."""
    name = f"query_rows_{_CODE[original]}"
    if name not in AttentionInterface():
        AttentionInterface.register(name, _make_recorder(original))
        AttentionMaskInterface.register(name, AttentionMaskInterface()[original])
    return name


def _num_layers(model: torch.nn.Module) -> int | None:
    cfg = model.config.get_text_config() if hasattr(model.config, "get_text_config") else model.config
    n = getattr(cfg, "num_hidden_layers", None)
    return n if isinstance(n, int) else None


@contextlib.contextmanager
def recording_query_rows(model: torch.nn.Module, queries: int, layers: Iterable[int] | None = None,
                         reduce: Callable[[int, torch.Tensor], None] | None = None) -> Iterator[QueryRows]:
    """Record the last ``queries`` attention rows of every layer (or of ``layers``) while inside the block.

    Yields the :class:`QueryRows` session; after a forward, ``session.rows[layer]`` holds (B, heads,
    queries, T) probabilities (or ``reduce(layer, rows)`` was called for each). The model's outputs are
    those of its own implementation; the implementation is restored on exit, whatever happens.
    """
    if isinstance(queries, bool) or not isinstance(queries, (int, np.integer)) or queries < 1:
        raise ValueError(f"queries={queries!r}; allowed: an integer >= 1 (and <= the input length)")
    n_layers = _num_layers(model)
    if layers is not None:
        layers = frozenset(int(x) for x in layers)
        bad = sorted(x for x in layers if x < 0 or (n_layers is not None and x >= n_layers))
        if bad or not layers:
            raise ValueError(f"layers={sorted(layers)}; allowed: a non-empty set of 0..{(n_layers or 1) - 1}")
    modules = list(model.modules())
    if any(id(m) in _ACTIVE for m in modules):
        raise ValueError("this model is already being recorded; allowed: one recording_query_rows at a time per model")
    original = model.config._attn_implementation
    if original not in SUPPORTED:
        raise ValueError(f"attention implementation {original!r}; allowed: {', '.join(SUPPORTED)}")
    name = _register(original)
    session = QueryRows(model, original, name, int(queries), layers, reduce)

    try:
        for m in modules:
            _ACTIVE[id(m)] = session
        with attention_implementation(model, name):
            yield session
    finally:
        for m in modules:
            _ACTIVE.pop(id(m), None)


def query_attention(model: torch.nn.Module, input_ids: torch.Tensor, queries: int,
                    position_ids: torch.Tensor | None = None, layers: Iterable[int] | None = None,
                    reduce: Callable[[int, torch.Tensor], None] | None = None) -> dict[int, torch.Tensor]:
    """Layer -> attention probabilities (B, heads, queries, T) of the last ``queries`` tokens of ``input_ids``
    (B, T) over all T keys, from one no-grad forward through :func:`repro.models.forward` (fully causal, the
    given ``position_ids`` as RoPE positions). With ``reduce``, rows go to ``reduce(layer, rows)`` and ``{}``
    is returned."""
    if input_ids.ndim != 2:
        raise ValueError(f"input_ids of shape {tuple(input_ids.shape)}; allowed: (batch, length)")
    t = input_ids.shape[1]
    if isinstance(queries, bool) or not isinstance(queries, (int, np.integer)) or not 1 <= queries <= t:
        raise ValueError(f"queries={queries!r}; allowed: 1 <= queries <= {t} (the input length)")
    with torch.no_grad(), recording_query_rows(model, queries, layers, reduce) as session:
        forward(model, input_ids, position_ids=position_ids)
    return dict(sorted(session.rows.items()))


# -- histogram -----------------------------------------------------------------------------------
def distance_edges(length: int, bins: int) -> np.ndarray:
    """``bins`` equal bins over the causal distances 0 .. ``length`` (the last edge inclusive)."""
    if bins < 1 or length < 1:
        raise ValueError(f"length={length}, bins={bins}; allowed: both >= 1")
    return np.linspace(0.0, float(length), bins + 1)


def _check_edges(edges) -> np.ndarray:
    e = np.asarray(edges, dtype=np.float64)
    if e.ndim != 1 or e.size < 2 or not np.all(np.isfinite(e)) or not np.all(np.diff(e) > 0):
        raise ValueError(f"edges={np.asarray(edges).tolist()[:6]}...; allowed: >= 2 finite, strictly increasing values")
    return e


@dataclass
class DistanceHistogram:
    """Attention entries above ``threshold`` of one layer by signed distance (query index - key index), summed
    over inputs. Entries outside ``edges`` count in the totals, not in the bins."""

    edges: np.ndarray
    """Bin edges in token positions (the last bin includes its right edge)."""
    counts: np.ndarray
    """(bins,) number of (head, query, key) entries above the threshold per bin."""
    mass: np.ndarray
    """(bins,) their summed attention weight per bin."""
    length: int
    """T, the number of keys (distances are relative to it)."""
    threshold: float
    """Entries with weight > threshold count."""
    far: float
    """'Far' means distance > far x T."""
    rows: int = 0
    """Query rows seen (batch x heads x queries, summed over inputs)."""
    entries: int = 0
    """Entries above the threshold (all distances)."""
    distance_sum: float = 0.0
    """Sum of their distances."""
    weight_sum: float = 0.0
    """Sum of their weights."""
    weighted_distance_sum: float = 0.0
    """Sum of weight x distance over them."""
    far_entries: int = 0
    """Entries above the threshold at distance > far x T."""
    far_weight: float = 0.0
    """Their summed weight."""

    def __add__(self, other: "DistanceHistogram") -> "DistanceHistogram":
        if not isinstance(other, DistanceHistogram):
            return NotImplemented
        if (self.length, self.threshold, self.far) != (other.length, other.threshold, other.far) or \
                not np.array_equal(self.edges, other.edges):
            raise ValueError(f"adding histograms of (length, threshold, far) {(self.length, self.threshold, self.far)}"
                             f" and {(other.length, other.threshold, other.far)}; allowed: the same values and edges")
        return DistanceHistogram(
            self.edges, self.counts + other.counts, self.mass + other.mass, self.length, self.threshold, self.far,
            self.rows + other.rows, self.entries + other.entries, self.distance_sum + other.distance_sum,
            self.weight_sum + other.weight_sum, self.weighted_distance_sum + other.weighted_distance_sum,
            self.far_entries + other.far_entries, self.far_weight + other.far_weight)

    def summary(self) -> dict:
        """Scalar summaries: entries (total, per query row), mean distance of the entries (unweighted and
        weighted by attention), and the share of entries (and of their mass) at distance > far x T."""
        n, w = self.entries, self.weight_sum
        return {"entries": n, "rows": self.rows, "entries_per_row": n / self.rows if self.rows else None,
                "mean_distance": self.distance_sum / n if n else None,
                "weighted_mean_distance": self.weighted_distance_sum / w if w > 0 else None,
                "far_share": self.far_entries / n if n else None,
                "far_mass_share": self.far_weight / w if w > 0 else None}

    def to_dict(self) -> dict:
        """Plain JSON values (:meth:`from_dict` reads them back)."""
        return {"edges": self.edges.tolist(), "counts": self.counts.tolist(), "mass": self.mass.tolist(),
                "length": self.length, "threshold": self.threshold, "far": self.far, "rows": self.rows,
                "entries": self.entries, "distance_sum": self.distance_sum, "weight_sum": self.weight_sum,
                "weighted_distance_sum": self.weighted_distance_sum, "far_entries": self.far_entries,
                "far_weight": self.far_weight}

    @classmethod
    def from_dict(cls, d: Mapping) -> "DistanceHistogram":
        return cls(np.asarray(d["edges"], dtype=np.float64), np.asarray(d["counts"], dtype=np.int64),
                   np.asarray(d["mass"], dtype=np.float64), int(d["length"]), float(d["threshold"]), float(d["far"]),
                   int(d["rows"]), int(d["entries"]), float(d["distance_sum"]), float(d["weight_sum"]),
                   float(d["weighted_distance_sum"]), int(d["far_entries"]), float(d["far_weight"]))


def distance_histogram(rows: torch.Tensor, edges, threshold: float = 1e-3, far: float = 0.5) -> DistanceHistogram:
    """Histogram of one layer's rows (B, heads, Q, T): the Q queries are the last Q tokens, key ``k`` of query
    ``T - Q + j`` lies at distance ``T - Q + j - k`` (>= 0 where the mask is causal). Counts the entries with
    weight > ``threshold`` per bin of ``edges``, with their mass and the summaries of :class:`DistanceHistogram`."""
    if not isinstance(rows, torch.Tensor) or rows.ndim != 4:
        raise ValueError(f"rows of shape {getattr(rows, 'shape', None)}; allowed: a (batch, heads, queries, T) tensor")
    b, h, q, t = rows.shape
    if not 1 <= q <= t:
        raise ValueError(f"rows with {q} queries over {t} keys; allowed: 1 <= queries <= T")
    if not 0.0 < threshold < 1.0:
        raise ValueError(f"threshold={threshold}; allowed: 0 < threshold < 1")
    if not 0.0 < far < 1.0:
        raise ValueError(f"far={far}; allowed: 0 < far < 1 (a fraction of T)")
    e = _check_edges(edges)
    sel = rows > threshold
    count = sel.sum(dim=(0, 1)).cpu().numpy().astype(np.int64).ravel()  # (Q*T,) per (query, key)
    weight = torch.where(sel, rows, 0).sum(dim=(0, 1), dtype=torch.float64).cpu().numpy().ravel()
    dist = ((t - q + np.arange(q))[:, None] - np.arange(t)[None, :]).ravel()
    nb = e.size - 1
    idx = np.searchsorted(e, dist, side="right") - 1
    idx[dist == e[-1]] = nb - 1
    inside = (idx >= 0) & (idx < nb)
    is_far = dist > far * t
    return DistanceHistogram(
        e, np.bincount(idx[inside], weights=count[inside], minlength=nb).astype(np.int64),
        np.bincount(idx[inside], weights=weight[inside], minlength=nb), t, float(threshold), float(far),
        rows=b * h * q, entries=int(count.sum()), distance_sum=float((count * dist).sum()),
        weight_sum=float(weight.sum()), weighted_distance_sum=float((weight * dist).sum()),
        far_entries=int(count[is_far].sum()), far_weight=float(weight[is_far].sum()))
