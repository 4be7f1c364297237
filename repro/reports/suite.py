"""Every report of the evaluation suite (:func:`repro.recipes.plans.suite_plan`): the RP tables (CD-Tab2, on the CDT
comparison's own grid, is :func:`repro.reports.cdt.cd_tab2`)."""

from __future__ import annotations

from repro.profiles import Profile
from repro.reports.common import Report
from repro.reports.selfdistill import rp_fig1a, rp_tab1_2, rp_tab4_5, rp_tab14, rp_tab15


def all_reports(suite, p: Profile, rp_suite=None) -> tuple[dict[str, list], list[Report]]:
    """Every report of the evaluation notebook; also the RP-Fig1a curves.

    ``suite``: the full suite's records (base, FLT); ``rp_suite``: the self-distillation arms' records
    (:func:`repro.recipes.plans.rp_plan`), added to the RP tables."""
    rp = {**suite, **(rp_suite or {})}
    curves, fig1a = rp_fig1a(rp, p)
    reps = [rp_tab1_2(rp, p), fig1a, rp_tab14(rp, p), rp_tab15(rp, p)]
    if p.eval.yarn_factors or p.selfdistill.yarn_factors:
        reps.append(rp_tab4_5(rp, p))
    return curves, reps
