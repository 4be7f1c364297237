"""The proxy tables of RP-Cost and CD-Cost: each method's measured step-time ratio on paper-shaped proxies
(:mod:`repro.bench.cost_proxies`) beside the bound its FLOPs allow (:mod:`repro.bench.method_flops`)."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

GOAL_VS_BOUND = 1.1
"""The goal: every method's measured ratio within this factor of its FLOP bound."""
BOUND_GOAL = f"within {GOAL_VS_BOUND}x of bound"
"""The column of that goal."""


def _r(x: float | None, digits: int = 3) -> float | str:
    return "" if x is None else round(float(x), digits)


def bound_columns(r: Mapping[str, Any], reference: bool) -> dict[str, Any]:
    """``FLOP bound``, ``measured / bound`` and ``within 1.1x of bound`` of one arm's measurement (blank for the
    reference arm and for measurements without FLOPs)."""
    if reference or "bound" not in r:
        return {"FLOP bound": _r(r.get("bound")), "measured / bound": "", BOUND_GOAL: ""}
    return {"FLOP bound": _r(r["bound"]), "measured / bound": _r(r["vs_bound"]),
            BOUND_GOAL: "yes" if r["vs_bound"] <= GOAL_VS_BOUND else "no"}


def proxy_table(name: str, proxies: Sequence[Mapping[str, Any]], reference: str, ratio_col: str,
                part_columns: Mapping[str, str] | None = None, unit: str = "step") -> dict[str, Any]:
    """The proxy table ``name`` (one row per proxy and arm) from :func:`repro.bench.cost_proxies.measure_proxies`;
    ``reference``: the arm the ratios are against, ``ratio_col`` its column's name, ``part_columns``: part ->
    column of step parts to show."""
    rows = []
    for e in proxies:
        for arm, r in e["arms"].items():
            parts = r.get("parts", {})
            rows.append({"proxy": e["proxy"], "like": e["like"], "tokens/row": e["length"], "rows": e["rows"],
                         "head/body": _r(e["head/body"]), "attention/body": _r(e["attention/body"]), "arm": arm,
                         f"seconds / {unit}": _r(r["seconds_per_step"], 4), ratio_col: _r(r["ratio"]),
                         **bound_columns(r, arm == reference),
                         **{col: _r(parts.get(k), 4) if k in parts else "" for k, col in (part_columns or {}).items()}})
    first = proxies[0] if proxies else {}
    n = len(next(iter(first.get("arms", {}).values()), {}).get("seconds", []))
    refs = "; ".join(f"{e['proxy']}: {e['model']} at {e['length']} tokens x {e['rows']} rows, head/body "
                     f"{e['head/body']:.3f} and attention/body {e['attention/body']:.3f} (the reference: "
                     f"{e['reference head/body']:.3f} and {e['reference attention/body']:.3f}, {e['like']})"
                     + (f", LongCE windows of {e['longce'][0]} every {e['longce'][1]}" if e.get("longce") else "")
                     for e in proxies)
    cap = (f"{name}: the same arms on paper-shaped proxies with random weights and rows, median of {n} interleaved "
           f"rounds per proxy, torch's default threads. {refs}. FLOP bound: the arm's FLOPs over {reference}'s, "
           f"counted from the model's shape and each step's own rows (body and head matmuls, causal attention; a "
           f"backward twice its forward, an activation-only one once for matmuls; elementwise work not counted). "
           f"measured / bound: the median over rounds of the arm's seconds per FLOP over {reference}'s; goal <= "
           f"{GOAL_VS_BOUND}.")
    return {"name": name, "rows": rows, "columns": list(rows[0]) if rows else ["proxy"], "caption": cap}


def proxy_summary(proxies: Sequence[Mapping[str, Any]], reference: str) -> str:
    """``arm measured/bound`` per proxy, for a report's one-line result."""
    return "; ".join(f"{e['proxy']}: " + ", ".join(f"{a} {r['ratio']:.2f}x (bound {r['bound']:.2f})"
                                                    for a, r in e["arms"].items() if a != reference)
                     for e in proxies)
