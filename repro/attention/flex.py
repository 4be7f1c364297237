"""Document-masked attention through PyTorch's flex attention: a block-sparse causal mask per packed document.

:data:`FLEX_DOC` (``"flex_doc"``) is registered in transformers' public registries (no transformers code is
patched), beside ``sdpa_varlen`` (:mod:`repro.attention.doc_masked`) and flash-attn's varlen kernel:

* ``AttentionInterface``: :func:`flex_doc_attention_forward` reads the packed rows' boundaries as
  ``sdpa_varlen`` does (explicit ``cu_seq_lens_q/k`` kwargs first, else the restarts of the ``position_ids``
  transformers forwards to every attention call: :func:`repro.attention.spans.packed_boundaries`) and runs
  ``torch.nn.attention.flex_attention`` with a ``BlockMask`` of those documents, causal within each one. Scaling
  and GQA (``enable_gqa``) are as in transformers' sdpa path, and so is the output ``((B, T, heads, head_dim),
  None)``. Where there is nothing to split (a 4-D mask, the all-ones 2-D marker of one document per row, a
  cache, one document per row) it is exactly transformers' ``sdpa_attention_forward``.
* ``AttentionMaskInterface``: :func:`repro.attention.spans.doc_mask`, None for packed rows, so transformers
  builds no (T, T) mask either.

The block mask (:func:`doc_block_mask`) is built from the boundaries alone, block by block: a (query block, key
block) tile of :data:`BLOCK_SIZE` tokens is *full* (computed without the mask function) when both lie in one
document and the key block comes first, *partial* when they share a document otherwise, and skipped else. Its
tensors are (B, 1, T / 128, T / 128) block indices, never a (T, T) mask; it is the block structure
``create_block_mask`` gives for the same mask function (``tests/attention/test_flex.py``), which would evaluate
that function on all T x T pairs to find it. It lives on the query's device and is cached for identical
boundaries (the layers of one forward, repeated batches).

The kernel is ``torch.compile(flex_attention)``, compiled once per shape on the CPU (``dynamic=False``: torch
2.13's CPU kernel for dynamic shapes fails to build, a C++ error "'cur_qSplitSize8' was not declared"; the first
compilation took 20 s here, later shapes 3-5 s; past dynamo's recompile limit, 8 shapes, torch runs it uncompiled),
with dynamic shapes on CUDA. Float64 on the CPU, which the compiled CPU kernel refuses (float32, bfloat16 and
float16 only), runs torch's unfused reference instead, which computes every score: for the float64 tests, not for
speed.

Training on the CPU is refused. torch 2.13's flex attention has no CPU backward, compiled or not ("FlexAttention
does not support backward on CPU"); :func:`flex_doc` raises before torch does, with the implementations that do
train there (once torch raised it while compiling, the compiled function ran unfused for good, 5-19x slower). Forward
only, the compiled kernel was slower here than ``sdpa_varlen``'s per-document sdpa (tiny profile: 3 layers, width
128, 4 heads; 8192 tokens of documents of 50-400 tokens a pass, one thread, 5 rounds;
``python -m repro.bench.doc_attention``): rows of 1024 tokens 0.78x full attention's forward tokens/s (sdpa_varlen
1.05x, the dense mask 0.78x), rows of 4096 1.10x (sdpa_varlen 1.45x, the dense mask 0.47x); on the attention alone
(8 x 1024, 4 heads of 32) 64 ms against 31-36 ms. Its losses equal the other document-masked arms' to the printed 6
decimals.

Which implementation computes each packed document alone is picked per device by
:func:`repro.attention.doc_masked.doc_masked_implementation`: on CUDA flash-attn varlen when installed (the kernel
ProLong trained with), else this (it needs no package beyond torch); on the CPU ``sdpa_varlen``, which trains and
was the faster forward. Neither CUDA kernel was timed against the other here (no GPU on these machines):
``python -m repro.bench.doc_attention`` on a GPU times both beside the others.
"""

from __future__ import annotations

import os
import shutil
import warnings
from collections import OrderedDict

import torch
from torch.nn.attention.flex_attention import BlockMask, flex_attention
from torch.utils._triton import has_triton
from transformers import AttentionInterface, AttentionMaskInterface
from transformers.integrations.sdpa_attention import sdpa_attention_forward

from repro.attention.spans import doc_mask, document_route

FLEX_DOC = "flex_doc"
"""Name of the flex-attention document mask in transformers' attention and mask registries."""
BLOCK_SIZE = 128
"""Tokens per side of a block-mask tile (flex attention's default)."""
CACHE_SIZE = 8
"""Block masks kept (least recently used dropped)."""
CPU_TRAINING = ("sdpa_varlen", "sdpa", "eager")
"""What trains on the CPU instead (named in :func:`flex_doc`'s error)."""

_CACHE: OrderedDict = OrderedDict()
_COMPILED: dict = {}


def flex_available() -> bool:
    """True when this torch has flex attention (``torch.nn.attention.flex_attention``)."""
    try:
        import torch.nn.attention.flex_attention  # noqa: F401  (probe: a torch without flex attention lacks it)
    except ImportError:
        return False
    return True


def flex_compiles(device: str | torch.device = "cpu") -> bool:
    """True when flex attention can be compiled for ``device``: a CUDA GPU and triton, or on the CPU a C++ compiler
    (``$CXX``, ``g++``, ``c++`` or ``clang++``) for inductor. On the CPU it runs forward only (module docstring)."""
    if not flex_available():
        return False
    if torch.device(device).type == "cuda":
        return torch.cuda.is_available() and has_triton()
    return any(shutil.which(c) for c in (os.environ.get("CXX", ""), "g++", "c++", "clang++") if c)


def _require_flex() -> None:
    if not flex_available():
        raise RuntimeError(f"attn_implementation={FLEX_DOC!r} needs torch.nn.attention.flex_attention (torch >= 2.5; "
                           f"this is torch {torch.__version__}); allowed here: sdpa_varlen, sdpa, eager")


def doc_ids(cu: torch.Tensor, B: int, T: int, block_size: int = BLOCK_SIZE) -> torch.Tensor:
    """(B, T') long, T' = T rounded up to ``block_size``: the document index of each token of the rows laid end to
    end (``cu``: :func:`repro.attention.spans.cu_seqlens`, ending at ``B * T``), -1 in the rounding tail."""
    if int(cu[-1]) != B * T or int(cu[0]) != 0:
        raise ValueError(f"cu_seqlens from {int(cu[0])} to {int(cu[-1])}; allowed: 0 to B * T = {B * T} (the rows "
                         "laid end to end)")
    starts = torch.zeros(B * T, dtype=torch.long, device=cu.device)
    starts[cu[:-1].long()] = 1
    ids = (starts.cumsum(0) - 1).view(B, T)
    pad = -T % block_size
    return torch.nn.functional.pad(ids, (0, pad), value=-1) if pad else ids


def block_structure(ids: torch.Tensor, T: int, block_size: int = BLOCK_SIZE) -> tuple[torch.Tensor, torch.Tensor]:
    """(partial, full): (B, n, n) bool over (query block, key block) tiles of :func:`doc_ids`' ``ids`` (n =
    T' / ``block_size``). Documents are contiguous, so a tile is read off the first and last document of each
    block: key block j < query block i share a document iff j's last is i's first; the tile is full iff both
    blocks hold that one document alone (and i has no rounding tail); a diagonal tile is always partial."""
    B, n = ids.shape[0], ids.shape[1] // block_size
    first = ids[:, ::block_size]
    ends = torch.clamp(torch.arange(1, n + 1, device=ids.device) * block_size, max=T) - 1
    last = ids[:, ends]
    i = torch.arange(n, device=ids.device)
    below = (i[None, :] < i[:, None])[None]  # key block j before query block i
    shared = below & (last[:, None, :] == first[:, :, None])
    one = (first == last) & (ends + 1 == (i + 1) * block_size)[None]  # a block of one document, no tail
    full = shared & one[:, :, None] & one[:, None, :]
    partial = (shared & ~full) | torch.eye(n, dtype=torch.bool, device=ids.device)[None].expand(B, n, n)
    return partial, full


def _ordered(dense: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, n, n) bool -> flex's (counts (B, 1, n), indices (B, 1, n, n)): the True columns first, in order."""
    d = dense[:, None].to(torch.int32)
    return d.sum(-1, dtype=torch.int32).contiguous(), \
        torch.argsort(d, dim=-1, descending=True, stable=True).to(torch.int32).contiguous()


def doc_block_mask(cu: torch.Tensor, B: int, T: int, device: torch.device | str | None = None,
                   block_size: int = BLOCK_SIZE):
    """The ``BlockMask`` of causal attention within each document ``[cu[i], cu[i+1])`` of ``B`` rows of ``T``
    tokens laid end to end, on ``device`` (``cu``'s by default); cached for identical boundaries."""
    device = torch.device(device) if device is not None else cu.device
    key = (tuple(cu.tolist()), B, T, str(device), block_size)
    if key in _CACHE:
        _CACHE.move_to_end(key)
        return _CACHE[key]
    ids = doc_ids(cu.to(device), B, T, block_size)

    def same_document_causal(b, h, q_idx, kv_idx):
        return (ids[b, q_idx] == ids[b, kv_idx]) & (q_idx >= kv_idx)

    partial, full = block_structure(ids, T, block_size)
    mask = BlockMask.from_kv_blocks(*_ordered(partial), *_ordered(full), BLOCK_SIZE=block_size,
                                    mask_mod=same_document_causal, seq_lengths=(T, T))
    _CACHE[key] = mask
    while len(_CACHE) > CACHE_SIZE:
        _CACHE.popitem(last=False)
    return mask


def _kernel(query: torch.Tensor):
    """Compiled flex attention, or torch's unfused reference for float64 on the CPU (module docstring)."""
    if torch.compiler.is_compiling():
        return flex_attention
    if query.device.type == "cpu" and query.dtype == torch.float64:
        def reference(*args, **kwargs):
            with warnings.catch_warnings():
                warnings.filterwarnings("ignore", message="flex_attention called without torch.compile")
                return flex_attention(*args, **kwargs)

        return reference
    kind = query.device.type
    if kind not in _COMPILED:  # static shapes on the CPU: its dynamic-shape kernel does not build (module docstring)
        _COMPILED[kind] = torch.compile(flex_attention, dynamic=False if kind == "cpu" else None)
    return _COMPILED[kind]


def flex_doc(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor, cu: torch.Tensor,
             scaling: float | None = None, block_size: int = BLOCK_SIZE) -> torch.Tensor:
    """Causal attention within each document ``[cu[i], cu[i+1])`` of the rows laid end to end. ``query`` (B, H, T,
    D), ``key``/``value`` (B, H_kv, T, D), H a multiple of H_kv (GQA); returns (B, T, H, D), contiguous."""
    B, H, T, _ = query.shape
    if H % key.shape[1]:
        raise ValueError(f"{H} query heads and {key.shape[1]} key/value heads; allowed: a multiple (GQA)")
    if query.device.type == "cpu" and torch.is_grad_enabled() and any(t.requires_grad for t in (query, key, value)):
        # refused here, before torch.compile sees it: torch raises the same while tracing, after which the compiled
        # function falls back to the unfused path for good (every score computed); tests/attention/test_flex.py
        # checks that torch still refuses
        raise NotImplementedError(
            f"attn_implementation={FLEX_DOC!r} cannot train on the CPU: torch {torch.__version__}'s flex attention "
            f"has no CPU backward ('FlexAttention does not support backward on CPU'); allowed: {FLEX_DOC} for "
            f"forward passes only there (torch.no_grad), or train with {', '.join(CPU_TRAINING)}")
    mask = doc_block_mask(cu, B, T, query.device, block_size)
    out = _kernel(query)(query, key, value, block_mask=mask, scale=scaling, enable_gqa=H != key.shape[1])
    return out.transpose(1, 2).contiguous()


def flex_doc_attention_forward(module: torch.nn.Module, query: torch.Tensor, key: torch.Tensor,
                               value: torch.Tensor, attention_mask: torch.Tensor | None, dropout: float = 0.0,
                               scaling: float | None = None, is_causal: bool | None = None,
                               **kwargs) -> tuple[torch.Tensor, None]:
    """transformers' attention-function signature. With no mask (:func:`repro.attention.spans.doc_mask`'s answer
    for packed rows) and ``q_len == kv_len > 1``, :func:`flex_doc` over the boundaries of ``cu_seq_lens_q/k`` or
    the restarts of ``position_ids``; otherwise exactly transformers' ``sdpa_attention_forward``."""
    def dense(mask):
        return sdpa_attention_forward(module, query, key, value, mask, dropout=dropout, scaling=scaling,
                                      is_causal=is_causal, **kwargs)

    route, cu = document_route(module, query, key, attention_mask, is_causal, kwargs, FLEX_DOC)
    if route == "dense":
        return dense(cu)
    if dropout:
        raise ValueError(f"attn_implementation={FLEX_DOC!r} has no attention dropout (got {dropout:g} in "
                         f"{type(module).__name__}); allowed: attention_dropout=0, or sdpa_varlen")
    return flex_doc(query, key, value, cu, scaling), None


def register() -> str:
    """Register :data:`FLEX_DOC` in transformers' attention and mask registries (idempotent); returns the name.
    A RuntimeError naming the alternatives where this torch has no flex attention."""
    _require_flex()
    AttentionInterface.register(FLEX_DOC, flex_doc_attention_forward)
    AttentionMaskInterface.register(FLEX_DOC, doc_mask)
    return FLEX_DOC
