"""RoPE-perturbed self-distillation's compute tables: RP-Cost (step time against Standard) and RP-Fig4 (RULER
against wall-clock, Standard trained for as many more steps as the measured overhead), and the short-context
stand-in of its Table 7.
"""

from __future__ import annotations

import statistics
from typing import Any, Mapping, Sequence

from repro.profiles import Profile
from repro.reports.common import Report, scale_note, scores_of, show
from repro.reports.testbed import doable_ruler
from repro.tasks.summary import NIAH_TASKS, RULER_TASKS

PAPER_RATIO = 1.6
"""§3.7: the method's wall-clock per step relative to Standard."""
RATIO_GOAL = 1.5
"""The prefix-shared skip pass's expected ratio with ``s`` uniform (half a second pass)."""
RP_TAB7 = {"base": 63.7, "rp_standard": 64.1, "rp_longce": 64.4, "rp_pose": 64.1, "rp_cyclic": 64.1, "rp_skip": 63.8}
"""Table 7, Llama: average of MMLU, HellaSwag, WinoGrande, OpenBookQA."""


def _num(x: float | None, digits: int = 1) -> float | str:
    """A plain number rounded (not a fraction shown as percent: :func:`repro.reports.common.show`), or n/a."""
    return "n/a" if x is None else round(float(x), digits)


def run_seconds(metrics: list[dict], skip: int = 5) -> float | None:
    """Median seconds per step of a training run's metrics (the first ``skip`` steps left out: warm-up)."""
    vals = [r["seconds"] for r in metrics[skip:] if "seconds" in r] or [r["seconds"] for r in metrics if "seconds" in r]
    return statistics.median(vals) if vals else None


RUN_NAMES = {"Standard": "rp_standard", "skip, prefix-shared": "rp_skip", "cyclic (two full passes)": "rp_cyclic",
             "LongCE": "rp_longce", "skip + LongCE": "rp_skip_longce"}
"""Bench arm -> the trained arm whose own step time is shown beside (:data:`repro.recipes.plans.TIMED_ARMS`)."""
PART_COLUMNS = {"first_pass": "first pass s", "clm": "CLM s", "second_pass": "second pass s",
                "consistency": "KL s", "backward": "backward s", "optimizer": "optimizer s"}
"""Step part (:data:`repro.bench.selfdistill_cost.PARTS`) -> its column."""


def rp_cost(bench: Mapping[str, Mapping[str, Any]], p: Profile,
            runs: Mapping[str, float | None] | None = None,
            proxies: Sequence[Mapping[str, Any]] | None = None) -> Report:
    """RP-Cost from :func:`repro.bench.selfdistill_cost.measure_rp_step_costs` (``bench``: arm -> timings, on the
    trained arms' rows at their thread count), where given the trained arms' own median seconds per step (``runs``:
    checkpoint name -> seconds; each trained alone, :data:`repro.recipes.plans.TIMED_ARMS`), and the proxy table
    (``proxies``: :func:`repro.bench.cost_proxies.measure_proxies`)."""
    from repro.reports.cost_proxies import bound_columns, proxy_summary, proxy_table

    ref_run = (runs or {}).get("rp_standard")
    rows = []
    for name, r in bench.items():
        run = (runs or {}).get(RUN_NAMES.get(name, ""))
        rows.append({"arm": name, "seconds / step": round(r["seconds_per_step"], 4),
                     "ratio to Standard": round(r["ratio"], 3), **bound_columns(r, name == "Standard"),
                     **{col: round(r["parts"][k], 4) if k in r.get("parts", {}) else ""
                        for k, col in PART_COLUMNS.items()},
                     "training run s / step": "" if run is None else round(run, 4),
                     "training run ratio": "" if run is None or not ref_run else round(run / ref_run, 3),
                     "paper": {"Standard": 1.0, "skip, prefix-shared": PAPER_RATIO,
                               "skip, two full passes": "2 (two passes)"}.get(name, "")})
    shared = bench.get("skip, prefix-shared", {}).get("ratio")
    naive = bench.get("skip, two full passes", {}).get("ratio")
    agrees = "n/a" if shared is None else "yes" if shared <= RATIO_GOAL else \
        "partly" if naive is not None and shared < naive else "no"
    first = next(iter(bench.values()), {})
    n = len(first.get("seconds", []))
    cap = (f"RP-Cost: seconds per optimizer step (forward, backward, AdamW) of each objective on copies of one "
           f"model, batch {p.extend.batch_size} x {p.extend.target_window} tokens of the trained arms' own rows, "
           f"bf16={p.selfdistill.bf16}, {first.get('threads') or 'default'} CPU thread(s), median of {n} interleaved "
           f"rounds in one run; ratios within the run. Parts (medians, need not add up): the first (standard) pass's "
           f"forward, its CLM term (LongCE's windows included), the perturbed pass's forward, the KL, the backward "
           f"and the optimizer step. FLOP bound and measured / bound as in the proxy table (this "
           f"model's head is a large share of its FLOPs). 'training run': the trained arms' own median step time, "
           f"each trained alone at that thread count. Scale: {scale_note(p)}.")
    tables = [{"name": "RP-Cost", "rows": rows, "columns": list(rows[0]) if rows else [], "caption": cap}]
    if proxies:
        tables.append(proxy_table("RP-Cost-proxies", proxies, "Standard", "ratio to Standard", PART_COLUMNS))
    return Report("RP-Cost", tables,
                  ours=f"skip prefix-shared {_num(shared, 2)}x, two passes {_num(naive, 2)}x Standard's step time"
                       + (f"; proxies: {proxy_summary(proxies, 'Standard')}" if proxies else ""),
                  agrees=agrees, note=f"yes when the prefix-shared skip step is <= {RATIO_GOAL}x Standard's "
                                      f"(paper {PAPER_RATIO}x; two full passes ~2x)")


def rp_fig4(curves: Mapping[str, Mapping[int, Mapping[str, Any]]], seconds: Mapping[str, float | None],
            suite, p: Profile) -> tuple[dict[str, list[tuple[float, float]]], Report]:
    """RP-Fig4: RULER at the target against wall-clock for each curve arm (``curves``: arm -> step -> record of
    RULER at the target; ``seconds``: arm -> its median seconds per step). Wall-clock = step x seconds per step.
    ``suite`` holds the base's records (which tasks it can do). Returns the points and the report."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    tasks = doable or RULER_TASKS
    metric = f"RULER-doable ({len(doable)} tasks)" if doable else "RULER-13"
    points: dict[str, list[tuple[float, float]]] = {}
    rows = []
    for name, by_step in curves.items():
        sps = seconds.get(name)
        for step, record in sorted(by_step.items()):
            v = scores_of({name: {"ruler": record}}, name, "ruler").average(tasks, target)
            if v is None or sps is None:
                continue
            points.setdefault(name, []).append((step * sps, 100 * v))
            rows.append({"arm": name, "step": step, "seconds / step": round(sps, 4),
                         "wall-clock s": round(step * sps, 1), metric: round(100 * v, 1)})
    verdict, how = "n/a", "needs both curves"
    if "rp_skip" in points and "rp_standard_matched" in points:
        skip_end_t, skip_end = points["rp_skip"][-1]
        std_at = [v for t, v in points["rp_standard_matched"] if t <= skip_end_t * 1.05]
        best_std = max(std_at) if std_at else None
        if best_std is not None:
            verdict = "yes" if skip_end > best_std else "no"
            how = (f"skip's final {metric} {skip_end:.1f} vs the best compute-matched Standard checkpoint within its "
                   f"wall-clock {best_std:.1f} (one training seed each; see RP-Tab1/2 for the seed spread)")
    cap = (f"RP-Fig4 data: {metric} (percent) at the target {target} along training, against wall-clock (step x the "
           f"run's median seconds per step); Standard trained {p.selfdistill.matched_steps_ratio}x the steps. "
           f"Scale: {scale_note(p, p.selfdistill.ablation_samples)}.")
    rep = Report("RP-Fig4", [{"name": "RP-Fig4", "rows": rows,
                              "columns": list(rows[0]) if rows else ["arm"], "caption": cap}],
                 ours="; ".join(f"{n}: " + ", ".join(f"{v:.1f}@{t:.0f}s" for t, v in pts) for n, pts in points.items()),
                 agrees=verdict, note=how)
    return points, rep


def rp_tab7(rp_suite, lm: Mapping[str, Mapping[str, Any]], p: Profile) -> Report:
    """The short-context stand-in of Table 7: the held-out LM loss at the base window and NIAH at the base window
    (labelled so: the tiny model has no MMLU, HellaSwag, WinoGrande or OpenBookQA)."""
    rows = []
    for name in [n for n in ("base", *p.selfdistill.main_arms) if n in lm or n in rp_suite]:
        s = scores_of(rp_suite, name, "short")
        niah = s.average(NIAH_TASKS, p.base.window)
        loss = (lm.get(name) or {}).get("loss")
        rows.append({"model": name, f"held-out LM loss @{p.base.window} (nats)": _num(loss, 3),
                     f"NIAH avg @{p.base.window}": show(niah),
                     "paper avg of 4 short benchmarks (Llama)": RP_TAB7.get(name, "-")})
    cap = (f"RP-Tab7 stand-in: short-context ability as the LM loss on held-out windows of the base window and NIAH "
           f"at the base window (the paper: MMLU, HellaSwag, WinoGrande, OpenBookQA, which a tiny model cannot do). "
           f"Scale: {scale_note(p)}.")
    losses = {r["model"]: r[f"held-out LM loss @{p.base.window} (nats)"] for r in rows}
    std = losses.get("rp_standard")
    worse = [n for n, v in losses.items() if isinstance(v, float) and isinstance(std, float) and n != "base"
             and v > std + 0.05]
    agrees = "n/a" if not isinstance(std, float) else "yes" if not worse else "partly"
    return Report("RP-Tab7", [{"name": "RP-Tab7", "rows": rows, "columns": list(rows[0]) if rows else ["model"],
                               "caption": cap}],
                  ours="; ".join(f"{n} {v}" for n, v in losses.items()), agrees=agrees,
                  note="yes when no arm's held-out loss exceeds Standard's by more than 0.05 nats (the paper: short "
                       "abilities preserved)" + (f"; above: {', '.join(worse)}" if worse else ""))
