"""RP-Fig2's tables and verdict from the attention-distance records of ``stages.attention``.

The paper (Fig. 2, §1) shows histograms only: after self-distillation the last queries put more attention
weights above 1e-3 at large distances. Our number for that claim is the share of above-threshold entries
whose distance exceeds ``far x T`` (T/2 by default) at the layer of the paper's relative depth (24 of 32).
The verdict compares each self-distillation arm with standard fine-tuning (``rp_standard``, else ``flt``)
text by text: a gap counts beyond two paired standard errors over the texts (:func:`repro.stats.paired_se`).
"""

from __future__ import annotations

from typing import Mapping

from repro.profiles import Profile
from repro.reports.common import Report, compare, order_verdict
from repro.reports.selfdistill import RP_METHODS
from repro.stats import Z, paired_se

BASELINES = ("rp_standard", "flt")
"""Standard full-length fine-tuning, in order of preference (the comparison's own arm first)."""
PAPER_ROW = "paper (ProLong-64K Llama-3-8B, 64K, layer 24)"
COLUMNS = ["model", "layer", "texts", "query rows", "entries", "entries per row", "mean distance",
           "weighted mean distance", "share beyond far", "SE over texts", "mass share beyond far"]


def _r(x, nd: int = 3):
    return None if x is None else round(float(x), nd)


def _layer(rec: Mapping, layer: int) -> Mapping | None:
    return next((x for x in rec["layers"] if x["layer"] == layer), None)


def _se(values) -> float | None:
    """Standard error of a mean over texts (population variance, as :func:`repro.stats.paired_se`)."""
    v = [x for x in values if x is not None]
    return paired_se(v, [0.0] * len(v)) if len(v) >= 2 else None


def _scale(p: Profile | None, rec: Mapping) -> str:
    model = ""
    if p is not None:
        m = p.model
        model = f"{p.name}: " + (m.pretrained or f"{m.num_layers}-layer d={m.hidden_size} Llama trained here") + ", "
    return (f"{model}T = {rec['length']}, last {rec['queries']} queries of {rec['samples']} corpus texts, "
            f"weights > {rec['threshold']:g} (1/T = {1 / rec['length']:.2g})")


def rp_fig2(records: Mapping[str, Mapping], missing: Mapping[str, str], p: Profile | None = None) -> Report:
    """Per-model, per-layer summaries (``RP-Fig2``), the histogram counts (``RP-Fig2-hist``), our headline and
    the verdict."""
    if not records:
        why = "; ".join(f"{k}: {v}" for k, v in missing.items()) or "no model given"
        return Report("RP-Fig2", [], ours="no model to analyse", agrees="n/a", note=why)
    first = next(iter(records.values()))
    far = first["far"]
    rows, hist = [], []
    for name, rec in records.items():
        for lay in rec["layers"]:
            rows.append({"model": name, "layer": lay["layer"], "texts": rec["samples"], "query rows": lay["rows"],
                         "entries": lay["entries"], "entries per row": _r(lay["entries_per_row"], 1),
                         "mean distance": _r(lay["mean_distance"], 1),
                         "weighted mean distance": _r(lay["weighted_mean_distance"], 1),
                         "share beyond far": _r(lay["far_share"]),
                         "SE over texts": _r(_se(lay["per_sample"]["far_share"])),
                         "mass share beyond far": _r(lay["far_mass_share"])})
            edges = lay["edges"]
            hist += [{"model": name, "layer": lay["layer"], "from": edges[i], "to": edges[i + 1], "count": c,
                      "mass": _r(m, 4)} for i, (c, m) in enumerate(zip(lay["counts"], lay["mass"]))]
    rows.append({"model": PAPER_ROW, "layer": 24, "texts": 1, "query rows": "256 x heads",
                 "share beyond far": "self-distillation: more mass at large distances, more uniform long-range "
                                     "attention (histogram only, no numbers)"})
    layer = first["verdict_layer"]
    ours = "; ".join(f"{n} {_r(_layer(r, layer)['far_share'])}" for n, r in records.items() if _layer(r, layer))
    ours = f"layer {layer}: share of entries beyond {far:g}T: {ours}"
    agrees, note = _verdict(records, layer)
    gone = f" Not trained yet, so not shown: {', '.join(missing)}." if missing else ""
    cap = (f"RP-Fig2 summaries: attention weights above the threshold from the last queries, by signed distance "
           f"query - key (token positions). 'share beyond far': fraction of those entries at distance > {far:g} T; "
           f"'mass share': the same weighted by attention; SE over texts of the share. Scale: {_scale(p, first)}."
           f"{gone}")
    cap_h = ("RP-Fig2 histogram data: entries above the threshold (count) and their weight (mass) per distance "
             f"bin.{gone}")
    return Report("RP-Fig2", [{"name": "RP-Fig2", "rows": rows, "columns": COLUMNS, "caption": cap},
                              {"name": "RP-Fig2-hist", "rows": hist,
                               "columns": ["model", "layer", "from", "to", "count", "mass"], "caption": cap_h}],
                  ours=ours, agrees=agrees, note=note)


def _verdict(records: Mapping[str, Mapping], layer: int) -> tuple[str, str]:
    """Each self-distillation arm vs standard fine-tuning on the per-text far share at ``layer``."""
    base = next((b for b in BASELINES if b in records), None)
    methods = [m for m in RP_METHODS if m in records]
    if base is None or not methods:
        return "n/a", (f"needs a self-distillation arm ({', '.join(RP_METHODS)}) and standard fine-tuning "
                       f"({' or '.join(BASELINES)}); present: {', '.join(records)}")
    b = _layer(records[base], layer)["per_sample"]["far_share"]
    ok = bad = ties = 0
    parts = []
    for m in methods:
        a = _layer(records[m], layer)["per_sample"]["far_share"]
        pairs = [(x, y) for x, y in zip(a, b) if x is not None and y is not None]
        if not pairs:
            continue
        xa, xb = [x for x, _ in pairs], [y for _, y in pairs]
        gap = sum(xa) / len(xa) - sum(xb) / len(xb)
        se = paired_se(xa, xb) if len(pairs) >= 2 else None
        o, _ = compare(gap, se)
        ok, bad, ties = ok + (o == "higher"), bad + (o == "lower"), ties + (o == "tie")
        noise = f" (SE {se:.3f}, {o})" if se is not None else " (one text: no SE)"
        parts.append(f"{m} - {base} = {gap:+.3f}{noise}")
    how = f"per-text far share at layer {layer}, paired over texts, a gap counts beyond {Z:g} SE: " + "; ".join(parts)
    return order_verdict(ok, bad, ties), how
