"""Context Denoising Training's compute table: CD-Cost, the CDT step's wall-clock against a CE step, measured in
one run (:func:`repro.bench.cdt_cost.measure_cd_step_costs`), with the paper's account beside it."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from repro.profiles import Profile
from repro.reports.common import Report, scale_note

GOAL_RATIO = 1.7
"""The goal: a CDT step costs at most this many CE steps."""
PAPER_COST = {"ce": "1 (SFT)",
              "cdt": "SFT + one lightweight backward + one forward: about 0.5 h more per 50 steps on 8xA100",
              "cdt_full_backward": "about 2 (the authors' trainer: two forwards, two full backwards)"}
"""The paper's account of each arm's cost (§4; its trainer's code for the full-backward variant)."""
RUN_NAMES = {"ce": "rp_standard", "cdt": "cdt"}
"""Bench arm -> the trained arm whose own step time is shown beside (CE's is the self-distillation Standard)."""
PART_COLUMNS = {"detect_forward": "detection forward s", "detect_backward": "detection backward s",
                "forward": "forward s", "backward": "backward s", "optimizer": "optimizer s"}
"""Step part -> its column."""


def goal_met(ratio: float | None, goal: float = GOAL_RATIO) -> str:
    """``yes`` when a CDT step costs at most ``goal`` CE steps, ``no`` above, ``n/a`` without a number."""
    return "n/a" if ratio is None else "yes" if ratio <= goal else "no"


def cd_cost(bench: Mapping[str, Mapping[str, Any]], p: Profile,
            runs: Mapping[str, float | None] | None = None,
            proxies: Sequence[Mapping[str, Any]] | None = None) -> Report:
    """CD-Cost from :func:`repro.bench.cdt_cost.measure_cd_step_costs` (``bench``: arm -> timings) and, where
    given, the trained arms' own median seconds per step (``runs``: checkpoint name -> seconds, e.g. ``cdt`` and
    ``rp_standard``, each trained alone, :data:`repro.recipes.plans.TIMED_ARMS`) and the proxy table (``proxies``:
    :func:`repro.bench.cost_proxies.measure_proxies`).

    ``agrees``: ``yes`` when the CDT step is at most :data:`GOAL_RATIO` CE steps, ``partly``
    when above it but cheaper than the full-backward variant, ``no`` otherwise."""
    from repro.reports.cost_proxies import bound_columns, proxy_summary, proxy_table

    runs = runs or {}
    ref_run = runs.get(RUN_NAMES["ce"])
    rows = []
    for name, r in bench.items():
        run = runs.get(RUN_NAMES.get(name, ""))
        parts = r.get("parts", {})
        rows.append({"arm": name, "seconds / step": round(r["seconds_per_step"], 4),
                     "ratio to CE": round(r["ratio"], 3), **bound_columns(r, name == "ce"),
                     **{col: round(parts[k], 4) if k in parts else "" for k, col in PART_COLUMNS.items()},
                     "goal": f"<= {GOAL_RATIO}x CE" if name == "cdt" else "",
                     "goal met": goal_met(r["ratio"]) if name == "cdt" else "",
                     "training run s / step": "" if run is None else round(run, 4),
                     "training run ratio": "" if run is None or not ref_run else round(run / ref_run, 3),
                     "paper": PAPER_COST.get(name, "")})
    cdt = bench.get("cdt", {}).get("ratio")
    full = bench.get("cdt_full_backward", {}).get("ratio")
    agrees = "n/a" if cdt is None else "yes" if cdt <= GOAL_RATIO else \
        "partly" if full is not None and cdt < full else "no"
    first = next(iter(bench.values()), {})
    n = len(first.get("seconds", []))
    batch = "x".join(str(x) for x in first.get("batch", [])) or "?"
    cap = (f"CD-Cost: seconds per optimizer step (forward, backward, AdamW) of the CE step and the CDT step on copies "
           f"of one model, batch {batch} tokens, bf16={first.get('bf16')}, lr {first.get('lr')}, beta "
           f"{first.get('beta')}, {first.get('threads') or 'default'} CPU thread(s); median of {n} interleaved "
           f"rounds in one run, ratios within the run. Parts (medians, need not add up): the detection's forward and "
           f"backward (weights frozen for 'cdt', a full backward for 'cdt_full_backward', the authors' trainer), the "
           f"forward (for CDT: the noise mask, Eq. 3 and the CE forward on the denoised embeddings), the backward "
           f"and the optimizer step. FLOP bound and measured / bound as in the proxy table. 'training run': the "
           f"trained arms' own median step time (cdt against rp_standard, the same rows and settings; each trained "
           f"alone). Scale: {scale_note(p)}.")
    tables = [{"name": "CD-Cost", "rows": rows, "columns": list(rows[0]) if rows else ["arm"], "caption": cap}]
    if proxies:
        tables.append(proxy_table("CD-Cost-proxies", proxies, "ce", "ratio to CE", PART_COLUMNS))
    return Report("CD-Cost", tables,
                  ours=f"cdt {_x(cdt)} CE's step time, full-backward detection {_x(full)}"
                       + (f"; proxies: {proxy_summary(proxies, 'ce')}" if proxies else ""),
                  agrees=agrees, note=f"yes when the CDT step is <= {GOAL_RATIO}x CE's (one extra forward and one "
                                      f"activation-only backward: ~1.67x); partly when above but below the "
                                      f"full-backward variant (~2x); the paper: about 0.5 h more per 50 steps than "
                                      f"SFT on 8xA100")


def _x(ratio: float | None) -> str:
    return "n/a" if ratio is None else f"{ratio:.2f}x"
