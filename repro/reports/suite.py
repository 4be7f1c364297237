"""Every report of the evaluation suite (:func:`repro.stages.plans.suite_plan`): the RP and CD tables."""

from __future__ import annotations

from repro.profiles import Profile
from repro.reports.cdt import cd_tab2
from repro.reports.common import Report
from repro.reports.selfdistill import rp_fig1a, rp_tab1_2, rp_tab4_5, rp_tab14, rp_tab15


def all_reports(suite, p: Profile) -> tuple[dict[str, list], list[Report]]:
    """Every report of the evaluation notebook; also the RP-Fig1a curves."""
    curves, fig1a = rp_fig1a(suite, p)
    reps = [rp_tab1_2(suite, p), fig1a, cd_tab2(suite, p), rp_tab14(suite, p),
            rp_tab15(suite, p)]
    if p.eval.yarn_factors:
        reps.append(rp_tab4_5(suite, p))
    return curves, reps
