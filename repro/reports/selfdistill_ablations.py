"""RoPE-perturbed self-distillation's ablation tables (RP-Tab8-11) from the early-checkpoint arms.

Every arm of these tables trains the main cosine schedule and stops at ``selfdistill.ablation_steps`` (the
paper reads its ablations at step 200 of 1000); each is evaluated on RULER at the target (part ``ruler`` of
:func:`repro.recipes.plans.rp_plan`). Rows give RULER-13 and the headline (RULER over the tasks the base can do,
else all 13), the gap to "Ours" (``rp_skip_early``) with its paired standard error, and the paper's number.
The verdict is the table's declared headline (:mod:`repro.claims.selfdistill`: Ours above every ablation in
Tables 8 and 10, the skipping range and lambda within noise of Ours in Tables 9 and 11), its claims Holm-corrected
together; the order of the other pairs is shown in the note for context and never decides.
"""

from __future__ import annotations

from repro.profiles import Profile
from repro.reports.common import Report, direction_agrees, missing_note, scale_note, scores_of, show
from repro.reports.noise import GapTest, macro
from repro.reports.selfdistill import verdict_of
from repro.reports.testbed import doable_caption, doable_ruler
from repro.tasks.summary import RULER_TASKS

OURS = "rp_skip_early"
"""The method at the early checkpoint: every ablation's reference row."""
RP_TAB8 = {"rp_standard_early": 47.9, "rp_skip_early": 59.2, "rp_fwd_kl": 57.8, "rp_clm": 56.5,
           "rp_fixed_skip": 55.1, "rp_dropout": 48.9, "rp_attn_noise": 49.6}
"""Table 8 (Llama RULER 64K at step 200): baseline, ours, forward KL, CLM on the perturbed view, fixed skip,
dropout consistency, attention noise."""
RP_TAB9 = {"rp_y050": 59.63, "rp_skip_early": 59.23, "rp_y200": 58.88}
"""Table 9: skipping range Y = L/2, L (ours), 2L."""
RP_TAB10 = {"rp_standard_early": 47.9, "rp_skip_early": 59.2, "rp_nope": 29.5, "rp_dilation": 53.4,
            "rp_chunk_perm": 46.2}
"""Table 10: perturbation schemes."""
RP_TAB11 = {"rp_standard_early": 47.9, "rp_lam020": 54.0, "rp_lam050": 60.0, "rp_skip_early": 59.2, "rp_lam200": 58.9}
"""Table 11: the KL weight lambda (1 is ours)."""
TABLES: dict[str, tuple[str, dict[str, float]]] = {
    "RP-Tab8": ("objective ablations and generic two-pass controls", RP_TAB8),
    "RP-Tab9": ("skipping range Y", RP_TAB9),
    "RP-Tab10": ("perturbation schemes", RP_TAB10),
    "RP-Tab11": ("KL weight lambda", RP_TAB11),
}


def rp_ablation(suite, p: Profile, target_id: str) -> Report:
    """One of RP-Tab8-11 from ``suite`` (``{checkpoint: {part: record}}`` with the ablation arms' ``ruler`` parts
    and the base's ``window`` part, from which the tasks the base can do are read)."""
    from repro.methods.arms import RP_ARMS  # lazy: repro.methods loads torch; the reports load without it

    if target_id not in TABLES:
        raise ValueError(f"target_id={target_id!r}; allowed: {', '.join(TABLES)}")
    what, paper = TABLES[target_id]
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    head_tasks = doable or RULER_TASKS
    metric = f"RULER-doable ({len(doable)} tasks)" if doable else "RULER-13"
    noise = GapTest(suite, "ruler", macro(head_tasks, target))
    scores = {name: scores_of(suite, name, "ruler") for name in paper}
    heads = {name: s.average(head_tasks, target) for name, s in scores.items()}
    ours: dict[str, float | None] = {n: None if h is None else 100 * h for n, h in heads.items()}
    rows = []
    for name, pap in paper.items():  # the gap needs OURS's value, whichever row comes first
        s, head = scores[name], heads[name]
        se = noise.se(name, OURS) if name != OURS and head is not None else None
        gap = None if head is None or ours.get(OURS) is None or name == OURS else ours[name] - ours[OURS]
        rows.append({"arm": name, "paper row": RP_ARMS[name].paper, "steps": p.selfdistill.ablation_steps,
                     "RULER-13": show(s.average(RULER_TASKS, target), missing_note(s, RULER_TASKS, target)),
                     metric: show(head, missing_note(s, head_tasks, target)),
                     f"gap to {OURS}": "" if gap is None else round(gap, 1),
                     "paired SE": "" if se is None else round(se, 1),
                     "paper (Llama RULER 64K, step 200)": pap, "scale": scale_note(p, p.selfdistill.ablation_samples)})
    verdict, how = judged = verdict_of(target_id, ours, noise.se, direction_agrees(ours, paper, noise=noise)[1])
    cap = (f"{target_id} analog: {what}, RULER (percent) at the target {target} after {p.selfdistill.ablation_steps} "
           f"of {p.extend.steps} steps (the paper: 200 of 1000), {p.selfdistill.ablation_samples} prompts per "
           f"(task, depth); gap and paired SE (bootstrap over the same prompts) against {OURS}. "
           f"{doable_caption(suite, p, RULER_TASKS)} One training seed per arm. Scale: "
           f"{scale_note(p, p.selfdistill.ablation_samples)}.")
    table = {"name": target_id, "rows": rows, "columns": list(rows[0]), "caption": cap}
    summary = "; ".join(f"{n} {'n/a' if v is None else round(v, 1)}" for n, v in ours.items())
    return Report(target_id, [table], ours=summary, agrees=verdict,
                  note=f"{how}. Metric: {metric} at the target", claims=judged.claims)
