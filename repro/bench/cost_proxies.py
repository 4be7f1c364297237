"""Paper-shaped proxies for RP-Cost and CD-Cost: small random-weight Llamas with Llama-3-8B's FLOP proportions.

A method's cost ratio depends on the model's proportions more than on its size: the share of the LM head
(``H / B``, head to body FLOPs per token, :mod:`repro.bench.method_flops`) and of causal attention (``A / (T B)``).
The tiny model trained here has a head of about 44% of its FLOPs, Llama-3-8B about 8%; so each table also times
its methods on proxies that keep the 8B's proportions (:data:`PROXY_SETS`): ``llama-3-8b``, hidden 256, 8 layers,
4 heads of 64 with one key/value head (the 8B's 4:1), MLP 896 (its 3.5 x hidden), vocabulary 2,048, untied, so
``H / B`` = 0.077 (8B: 0.075), at 512 tokens (``A / (T B)`` = 0.154, as the 8B at 8K) and at 4,096 tokens (1.23,
as the 8B at 64K). Lengths map by the same factor (16), so LongCE's official windows (4,096 every 1,024 tokens)
become 256 every 64 on both proxies. ``smoke`` keeps the proportions on a model small enough for CI.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from repro.bench.cdt_cost import measure_cd_step_costs
from repro.bench.gpu_shapes import LLAMA_8B, Shape, build_model, shape_config
from repro.bench.method_flops import Dims
from repro.bench.selfdistill_cost import COST_ARMS, POSITION_ARMS, measure_rp_step_costs
from repro.devices import resolve_device
from repro.methods.longce import LongCEConfig

OFFICIAL_LONGCE = (4096, 1024)
"""LongCE's window and stride in the official code (at the 8B's lengths)."""


@dataclass(frozen=True)
class CostProxy:
    """One proxy length: rows of ``length`` tokens with the attention share of the reference at ``like_length``."""

    name: str
    like_length: int
    length: int
    rows: int
    """Rows per step (about 4K tokens a step on both proxies)."""


@dataclass(frozen=True)
class ProxySet:
    """A proxy model's shape, the model it stands for, and its lengths."""

    shape: Shape
    proxies: tuple[CostProxy, ...]
    reference: Shape = LLAMA_8B

    def longce(self, proxy: CostProxy) -> tuple[int, int]:
        """LongCE's ``(window, stride)`` on ``proxy``: the official ones scaled by the proxy's length factor."""
        scale = proxy.like_length / proxy.length
        return tuple(max(1, int(round(x / scale))) for x in OFFICIAL_LONGCE)  # type: ignore[return-value]


def _shape(name: str, hidden: int, layers: int, heads: int, intermediate: int, vocab: int,
           lengths: tuple[int, ...]) -> Shape:
    return Shape(name, hidden, layers, heads, heads // 4 or 1, intermediate, vocab, False, lengths, lengths, None)


PROXY_SETS: dict[str, ProxySet] = {
    "llama-3-8b": ProxySet(_shape("Llama-3-8B proxy", 256, 8, 4, 896, 2048, (512, 4096)),
                           (CostProxy("8K-like", 8192, 512, 8), CostProxy("64K-like", 65536, 4096, 1))),
    "smoke": ProxySet(_shape("Llama-3-8B proxy (smoke)", 32, 2, 2, 112, 64, (64, 512)),
                      (CostProxy("8K-like", 8192, 64, 2), CostProxy("64K-like", 65536, 512, 1))),
}
"""Proxy sets by name (a profile's ``cost_proxy``; ``none`` runs no proxy)."""


def proxy_set(name: str) -> ProxySet | None:
    """The proxy set ``name`` (None for ``none``)."""
    if name == "none":
        return None
    if name not in PROXY_SETS:
        raise ValueError(f"cost proxy {name!r}; allowed: none, {', '.join(PROXY_SETS)}")
    return PROXY_SETS[name]


def proportions(ps: ProxySet, proxy: CostProxy) -> dict[str, float]:
    """The proxy's ``head/body`` and ``attention/body`` beside the reference model's at ``like_length``."""
    own = Dims.of(shape_config(ps.shape)).proportions(proxy.length)
    ref = Dims.of(shape_config(ps.reference)).proportions(proxy.like_length)
    return {**own, **{f"reference {k}": v for k, v in ref.items()}}


def measure_proxies(table: str, name: str = "llama-3-8b", steps: int = 4, warmup: int = 1, bf16: bool = False,
                    lr: float = 1e-3, beta: float = 3000.0, threshold: str = "document", device: str = "cpu",
                    seed: int = 0, progress: bool = True) -> list[dict[str, Any]]:
    """Time ``table``'s arms (``rp``: :func:`repro.bench.selfdistill_cost.measure_rp_step_costs` with
    :data:`repro.bench.selfdistill_cost.POSITION_ARMS`; ``cd``: :func:`repro.bench.cdt_cost.measure_cd_step_costs`)
    on each proxy of set ``name``, random weights and rows, torch's default threads. One entry per proxy:
    ``proxy``, ``like`` (the reference and length), ``length``, ``rows``, the proportions and ``arms`` (the
    measurement, with each arm's FLOP ``bound``)."""
    if table not in ("rp", "cd"):
        raise ValueError(f"table={table!r}; allowed: rp, cd")
    ps = proxy_set(name)
    if ps is None:
        return []
    dev = resolve_device(device)
    out = []
    for proxy in ps.proxies:
        model = build_model(ps.shape, dev, torch.float32, seed)
        if table == "rp":
            window, stride = ps.longce(proxy)
            arms = measure_rp_step_costs(model, proxy.rows, proxy.length, steps, warmup, bf16,
                                         LongCEConfig(window=window, stride=stride), {**COST_ARMS, **POSITION_ARMS},
                                         seed, progress)
        else:
            arms = measure_cd_step_costs(model, lr, beta, None, proxy.rows, proxy.length, steps, warmup, bf16,
                                         threshold, seed=seed, progress=progress)
        del model
        out.append({"proxy": proxy.name, "like": f"{ps.reference.name} at {proxy.like_length:,} tokens",
                    "model": ps.shape.name, "length": proxy.length, "rows": proxy.rows,
                    "longce": ps.longce(proxy) if table == "rp" else None, **proportions(ps, proxy), "arms": arms})
    return out
