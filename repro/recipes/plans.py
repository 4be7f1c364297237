"""The evaluation plans: what each checkpoint is evaluated on (tasks, lengths, depths, samples, seeds, RoPE).

A plan maps a part name to the keyword arguments of :func:`repro.stages.evaluate_checkpoint`;
the reports (:mod:`repro.reports`) read the records back by part name. Standalone: imports only the
profile and the task groups of :mod:`repro.tasks.summary`.
"""

from __future__ import annotations

from repro.profiles import Profile
from repro.tasks.summary import BABILONG, DECILE_DEPTHS, NIAH_TASKS, RULER_TASKS, ruler_in_suite

__all__ = ["TAB1_ARMS", "TIMED_ARMS", "timed_threads", "base_window_grid", "cd_plan", "pl_plan", "lr_plan",
           "plan_cost", "rp_plan", "ruler_in_suite", "suite_plan", "yarn_rope"]

TAB1_ARMS: tuple[str, ...] = ("flt", "rpes", "pose", "longrecipe")
"""LongRecipe Table 1's extension arms (evaluated with YaRN beyond the target too, RP-Tab4/5)."""

TIMED_ARMS: tuple[str, ...] = ("rp_standard", "rp_skip", "rp_cyclic", "rp_longce", "rp_skip_longce", "cdt")
"""Arms whose own step times RP-Cost and CD-Cost report: each trains alone (no stage beside it, whose load would
change its step time) on all the cores the side-by-side stages share (:func:`timed_threads`)."""


def timed_threads(p: Profile) -> int:
    """torch threads of a :data:`TIMED_ARMS` stage: ``extend.workers x extend.threads`` (0: the process's own)."""
    return p.extend.workers * p.extend.threads


RP_SEED_ARMS: tuple[str, ...] = ("rp_standard", "rp_cyclic", "rp_skip")
"""Self-distillation arms whose RULER is re-drawn with every evaluation seed (Table 15's rows)."""


def yarn_rope(p: Profile, name: str, factor: float, rope_theta: float) -> dict:
    """YaRN reaching ``factor`` x the target from the checkpoint's own training window
    (the base window for ``base``, the target window for extended checkpoints)."""
    window = p.base.window if name == "base" else p.extend.target_window
    length = factor * p.extend.target_window
    return {"rope_type": "yarn", "rope_theta": float(rope_theta), "factor": float(length / window),
            "original_max_position_embeddings": int(window)}


def suite_plan(p: Profile, name: str = "flt", rope_theta: float | None = None) -> dict[str, dict]:
    """Parts of the evaluation of one checkpoint -> keyword arguments of ``evaluate_checkpoint``.

    ``suite``: every suite task x length x suite depth (first evaluation seed);
    ``seeds``: RULER at the target for the other evaluation seeds (RP-Tab15);
    ``deciles``: the decile task at the target at 10 depths (RP-Fig1a);
    ``yarn<f>``: RULER at f x the target with a YaRN override (RP-Tab4/5);
    ``window`` (the base only): ``TB-Base``'s grid at the base window (the same cached record as
    :func:`repro.stages.evaluate_base_window`), from which the reports decide which tasks the base can do.
    """
    ev, target = p.eval, p.extend.target_window
    ruler = ruler_in_suite(p)
    cell = {"depths": ev.suite_depths, "samples": ev.suite_samples}
    plan = {"suite": {"tasks": ev.suite_tasks, "lengths": ev.lengths, "seeds": ev.seeds[:1], **cell}}
    if len(ev.seeds) > 1 and ruler:
        plan["seeds"] = {"tasks": ruler, "lengths": (target,), "seeds": ev.seeds[1:], **cell}
    plan["deciles"] = {"tasks": (ev.decile_task,), "lengths": (target,), "depths": DECILE_DEPTHS,
                       "samples": ev.decile_samples, "seeds": ev.seeds[:1]}
    for f in ev.yarn_factors:
        if ruler:
            plan[f"yarn{f:g}"] = {"tasks": ruler, "lengths": (int(round(f * target)),), "seeds": ev.seeds[:1],
                                  "rope": yarn_rope(p, name, f, rope_theta or p.model.rope_theta), **cell}
    if name == "base":
        plan["window"] = base_window_grid(p)
    return plan


def base_window_grid(p: Profile) -> dict:
    """``TB-Base``'s grid: ``eval.base_tasks`` at the base window, ``eval.base_depths`` x ``eval.base_samples``
    prompts, evaluation seed 0 (``evaluate_checkpoint`` kwargs)."""
    ev = p.eval
    return {"tasks": ev.base_tasks, "lengths": (p.base.window,), "depths": ev.base_depths,
            "samples": ev.base_samples, "seeds": (0,)}


def plan_cost(p: Profile, n_checkpoints: int = 1) -> list[dict]:
    """Generations and prompt tokens per part (upper bounds: cells too short for a task are skipped)."""
    rows = []
    for part, kw in suite_plan(p).items():
        k = len(kw["tasks"]) * len(kw["depths"]) * kw["samples"] * len(kw["seeds"])
        rows.append({"part": part, "generations": k * len(kw["lengths"]) * n_checkpoints,
                     "prompt_tokens": k * sum(kw["lengths"]) * n_checkpoints})
    rows.append({"part": "total", "generations": sum(r["generations"] for r in rows),
                 "prompt_tokens": sum(r["prompt_tokens"] for r in rows)})
    return rows


def lr_plan(p: Profile, name: str, rope_theta: float, yarn: bool = False) -> dict[str, dict]:
    """Evaluation parts of one checkpoint for the LongRecipe tables -> ``evaluate_checkpoint`` kwargs.

    ``ruler``: RULER's 13 tasks at the target window; ``short``: the NIAH tasks at the base window
    (short-context stand-in); ``yarn``: RULER at ``eval.yarn_factors[0]`` x the target with YaRN
    (LR-Tab1's extra column; only when ``yarn`` and a factor is configured).
    """
    ev, lr, target = p.eval, p.longrecipe, p.extend.target_window
    cell = {"depths": ev.suite_depths, "seeds": ev.seeds[:1]}
    plan = {"ruler": {"tasks": RULER_TASKS, "lengths": (target,), "samples": lr.eval_samples, **cell},
            "short": {"tasks": NIAH_TASKS, "lengths": (p.base.window,), "samples": lr.eval_samples, **cell}}
    if yarn and ev.yarn_factors:
        f = ev.yarn_factors[0]
        plan["yarn"] = {"tasks": RULER_TASKS, "lengths": (int(round(f * target)),), "samples": lr.yarn_samples,
                        "rope": yarn_rope(p, name, f, rope_theta), **cell}
    return plan


def rp_plan(p: Profile, name: str, rope_theta: float, early: bool = False) -> dict[str, dict]:
    """Evaluation parts of a self-distillation checkpoint -> ``evaluate_checkpoint`` kwargs, with the part names
    of :func:`suite_plan` so the RP reports read them alike.

    Main arms: ``suite`` (RULER and NIAH-position at ``selfdistill.eval_lengths``: half the target and the target,
    as Table 1), ``deciles`` (RP-Fig1a), ``yarn<f>`` for ``selfdistill.yarn_factors`` (RP-Tab4/5, ``yarn_samples``
    per cell), ``short`` (NIAH at the base window: RP-Tab7's stand-in) and, for :data:`RP_SEED_ARMS` and their
    replicates, ``seeds`` (RP-Tab15). ``early`` (the ablation
    arms and curve checkpoints): ``ruler`` only, RULER at the target with ``selfdistill.ablation_samples``.
    """
    ev, sd, target = p.eval, p.selfdistill, p.extend.target_window
    ruler = ruler_in_suite(p)
    cell = {"depths": ev.suite_depths, "seeds": ev.seeds[:1]}
    if early:
        return {"ruler": {"tasks": ruler, "lengths": (target,), "samples": sd.ablation_samples, **cell}}
    position = tuple(t for t in ev.suite_tasks if t.startswith("niah_position"))
    plan = {"suite": {"tasks": (*ruler, *position), "lengths": tuple(sd.eval_lengths),
                      "samples": ev.suite_samples, **cell},
            "deciles": {"tasks": (ev.decile_task,), "lengths": (target,), "depths": DECILE_DEPTHS,
                        "samples": ev.decile_samples, "seeds": ev.seeds[:1]},
            "short": {"tasks": NIAH_TASKS, "lengths": (p.base.window,), "samples": sd.ablation_samples, **cell}}
    if name.partition("@")[0] in RP_SEED_ARMS and len(ev.seeds) > 1:
        plan["seeds"] = {"tasks": ruler, "lengths": (target,), "samples": ev.suite_samples, "depths": ev.suite_depths,
                         "seeds": ev.seeds[1:]}
    for f in sd.yarn_factors:
        plan[f"yarn{f:g}"] = {"tasks": ruler, "lengths": (int(round(f * target)),), "samples": sd.yarn_samples,
                              "rope": yarn_rope(p, name, f, rope_theta), **cell}
    return plan


def cd_plan(p: Profile, name: str, rope_theta: float) -> dict[str, dict]:
    """Evaluation parts of a CD-Tab2 checkpoint (CE = ``rp_standard``, LongCE = ``rp_longce``, CDT) ->
    ``evaluate_checkpoint`` kwargs: ``suite`` is exactly :func:`rp_plan`'s (RULER and NIAH-position at
    ``selfdistill.eval_lengths``; the CE and LongCE arms reuse their cached records), ``multihop`` CDT's multi-hop
    task (App. B; when the suite has it) and ``babilong`` BABILong's qa1-qa5 (:data:`~repro.tasks.summary.BABILONG`,
    generated offline: Table 2's BABILong column; every profile), both at the same lengths and cells: the suite
    depths, ``eval.suite_samples`` prompts per cell, the first evaluation seed."""
    ev = p.eval
    hops = tuple(t for t in ev.suite_tasks if t.startswith("multihop_"))
    cell = {"lengths": tuple(p.selfdistill.eval_lengths), "samples": ev.suite_samples, "depths": ev.suite_depths,
            "seeds": ev.seeds[:1]}
    plan = {"suite": rp_plan(p, name, rope_theta)["suite"]}
    if hops:
        plan["multihop"] = {"tasks": hops, **cell}
    plan["babilong"] = {"tasks": BABILONG, **cell}
    return plan


PL_RECALL: tuple[str, ...] = ("json_kv", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3")
"""ProLong's recall category (HELMET: JSON KV and RULER's multi-key needles)."""


def pl_plan(p: Profile, name: str) -> dict[str, dict]:
    """Evaluation parts of a ProLong arm -> ``evaluate_checkpoint`` kwargs, ``prolong.eval_samples`` prompts per cell
    at the suite depths: ``long`` (RULER's tasks of the suite plus JSON KV at the target: the reports read the
    downstream average over the tasks the base can do, and :data:`PL_RECALL` among them as recall) and ``short``
    (the NIAH tasks at the base window: the short-context stand-in)."""
    ev, pl, target = p.eval, p.prolong, p.extend.target_window
    cell = {"depths": ev.suite_depths, "seeds": ev.seeds[:1], "samples": pl.eval_samples}
    tasks = (*ruler_in_suite(p), *(t for t in PL_RECALL if t not in RULER_TASKS))
    return {"long": {"tasks": tasks, "lengths": (target,), **cell},
            "short": {"tasks": NIAH_TASKS, "lengths": (p.base.window,), **cell}}
