"""How many evaluation samples an arm needs for its headline's standard error to reach a target (2 points).

A plan part (one entry of :func:`repro.recipes.plans.lr_plan` or :func:`~repro.recipes.plans.suite_plan`:
``evaluate_checkpoint`` keyword arguments) scores ``samples`` prompts in each of ``len(depths) x len(seeds)``
cells per (task, length). A headline ``sum_cell w * mean`` (weights: :func:`repro.reports.noise.macro`,
:func:`~repro.reports.noise.niah_m`) then has the standard error of :func:`repro.stats.headline_se`,
``sqrt(sum w^2 sd^2 / (cells x samples))``, with ``sd`` the per-prompt score std of each (task, length):
0.5 at worst for 0/1 scores (the default), or measured on records (:func:`observed_sd`).

Worst case (sd 0.5), 3 depths and one evaluation seed (the tiny and paper profiles' grids), target 2 points:

* LR NIAH(M), sum w^2 = 3/81 + 2/9 = 0.259: 55 samples per cell (``longrecipe.eval_samples`` 20: SE 3.3 points;
  v1's 6: 6.0);
* LR RULER-13, sum w^2 = 1/13: 17 per cell (20: 1.8 points; 6: 3.3);
* RP RULER-doable over 8 NIAH tasks, sum w^2 = 1/8: 27 per cell (``eval.suite_samples`` 16: 2.6 points; 8: 3.6).

Measured score spreads (accuracies near 0 or 1) need fewer; the paired gap between two arms usually has a
smaller SE than either arm's headline (their errors on a prompt are correlated).

Usage: ``samples_needed(lr_plan(p, "flt", theta)["ruler"], niah_m(p.extend.target_window))``.
"""

from __future__ import annotations

from typing import Any, Hashable, Mapping

import numpy as np

from repro import stats


def observed_sd(record: Mapping[str, Any], weights: Mapping[Hashable, float]) -> dict[Hashable, float]:
    """Per-prompt score std (population) of each ``(task, length)`` cell of ``weights`` in one evaluation record;
    ValueError naming the cells without rows."""
    by: dict[Hashable, list[float]] = {c: [] for c in weights}
    for r in record.get("results", []):
        c = (r["task"], r["length"])
        if c in by and r.get("score") is not None:
            by[c].append(float(r["score"]))
    missing = [c for c, v in by.items() if not v]
    if missing:
        raise ValueError(f"no scored rows for {missing}; allowed: a record holding every cell of the headline")
    return {c: float(np.std(v)) for c, v in by.items()}


def samples_needed(part: Mapping[str, Any], weights: Mapping[Hashable, float],
                   sd: float | Mapping[Hashable, float] = 0.5, target_se: float = 2.0) -> dict[str, float | int]:
    """For one plan part: ``{"samples": per cell now, "cells": depths x seeds, "se": SE now (points),
    "needed": samples per cell for SE <= target_se points, "prompts_per_arm": needed x cells x weighted cells}``.

    ``sd`` is the per-prompt score std per ``(task, length)`` cell (or one number; 0.5 is the worst case of 0/1
    scores); ``target_se`` is in percent points.
    """
    for key in ("samples", "depths", "seeds"):
        if key not in part:
            raise ValueError(f"plan part without {key!r}: {sorted(part)}; allowed: evaluate_checkpoint kwargs "
                             "with samples, depths and seeds (repro.recipes.plans)")
    cells = len(part["depths"]) * len(part["seeds"])
    needed = stats.samples_for_se(weights, sd, cells, target_se / 100.0)
    return {"samples": part["samples"], "cells": cells,
            "se": round(100.0 * stats.headline_se(weights, sd, cells, part["samples"]), 2), "needed": needed,
            "prompts_per_arm": needed * cells * len(weights)}
