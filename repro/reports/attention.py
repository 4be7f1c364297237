"""RP-Fig2's tables and verdict from the attention-distance records of ``stages.attention``.

The paper (Fig. 2, §1) shows histograms only: after self-distillation the last queries put more attention
weights above 1e-3 at large distances. Our number for that claim is the share of above-threshold entries
whose distance exceeds ``far x T`` (T/2 by default), at every layer (the paper shows layer 24 of 32).
The verdict is the declared headline (:mod:`repro.claims.selfdistill`): each self-distillation arm above
standard fine-tuning (``rp_standard``, else ``flt``) at every layer (:func:`per_layer`), Holm-corrected over all
layers and arms. The value compared is the per-text far share over the share of key positions beyond ``far x T``
(:func:`key_share_beyond`: the last queries see fewer keys at large distances, so 1 is attention blind to distance);
a gap's SE is the paired SE over the texts (:func:`repro.stats.paired_se`).
"""

from __future__ import annotations

import math
from typing import Mapping

from repro.claims import headline_of
from repro.profiles import Profile
from repro.reports.common import Report
from repro.reports.headline import Claim, Headline, Judgement, judge
from repro.reports.selfdistill import RP_METHODS, STANDARD
from repro.stats import paired_se

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
    layers = [x["layer"] for x in first["layers"]]
    ours = "; ".join(f"{n} " + " / ".join(str(_r(x["far_share"])) if (x := _layer(r, k)) else "n/a" for k in layers)
                     for n, r in records.items())
    share = key_share_beyond(first["length"], first["queries"], far)
    ours = (f"share of entries beyond {far:g}T (of key positions: {share:.3f}) at layers "
            f"{' / '.join(map(str, layers))}: {ours}")
    agrees, note = judged = _verdict(records)
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
                  ours=ours, agrees=agrees, note=note, claims=judged.claims)


def key_share_beyond(length: int, queries: int, far: float) -> float:
    """Share of the (query, key) pairs of the last ``queries`` causal queries of a ``length``-token text whose
    distance exceeds ``far x length``: the query at position ``q`` sees keys at distances 0..q, of which
    ``max(0, q - floor(far x length))`` are beyond."""
    if not 1 <= queries <= length or not 0.0 < far < 1.0:
        raise ValueError(f"length={length}, queries={queries}, far={far}; allowed: 1 <= queries <= length, "
                         "0 < far < 1")
    cut = math.floor(far * length)
    qs = range(length - queries, length)
    return sum(max(0, q - cut) for q in qs) / sum(q + 1 for q in qs)


def per_layer(headline: Headline, layers) -> Headline:
    """``headline`` with each claim repeated at every layer: arms ``"<arm> layer <k>"``."""
    return Headline(tuple(Claim(f"{c.a} layer {k}", f"{c.b} layer {k}", c.expect, f"{c.what}, layer {k}")
                          for k in layers for c in headline.claims), headline.source)


def _verdict(records: Mapping[str, Mapping]) -> Judgement:
    """RP-Fig2's headline at every layer: each self-distillation arm against standard fine-tuning on the per-text
    far share over the key-position share beyond far, paired over texts."""
    base = next((b for b in BASELINES if b in records), None)
    methods = [m for m in RP_METHODS if m in records]
    if base is None or not methods:
        return Judgement("n/a", f"needs a self-distillation arm ({', '.join(RP_METHODS)}) and standard fine-tuning "
                                f"({' or '.join(BASELINES)}); present: {', '.join(records)}")
    first = records[base]
    share = key_share_beyond(first["length"], first["queries"], first["far"])
    layers = [x["layer"] for x in first["layers"]]
    arm = {STANDARD: base, **{m: m for m in methods}}
    texts = {}  # "<arm> layer <k>" -> per-text normalized far shares
    for name, ckpt in arm.items():
        for k in layers:
            lay = _layer(records[ckpt], k)
            texts[f"{name} layer {k}"] = None if lay is None else [
                None if x is None else x / share for x in lay["per_sample"]["far_share"]]

    def paired(a: str, b: str):
        pairs = [(x, y) for x, y in zip(texts.get(a) or [], texts.get(b) or []) if x is not None and y is not None]
        return [x for x, _ in pairs], [y for _, y in pairs]

    ours = {}
    for key, vals in texts.items():
        v = [x for x in vals or [] if x is not None]
        ours[key] = sum(v) / len(v) if v else None

    def se(a: str, b: str) -> float | None:
        xa, xb = paired(a, b)
        return paired_se(xa, xb) if len(xa) >= 2 else None

    judged = judge(per_layer(headline_of("RP-Fig2"), layers), ours, se)
    stand_in = f"; {base} stands in for {STANDARD} (not analysed)" if base != STANDARD else ""
    return judged.with_context(f"{stand_in}; values: per-text share of above-threshold entries beyond "
                               f"{first['far']:g}T over the share of key positions there ({share:.3f}), paired over "
                               "texts", sep="")
