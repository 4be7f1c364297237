"""The evaluation plans: parts, lengths, seeds, YaRN overrides and their cost."""

import pytest

from repro.profiles import get_profile
from repro.recipes import plans
from repro.tasks import get_task
from repro.tasks.summary import NIAH_TASKS, RULER_TASKS

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def test_suite_plan_cost_and_yarn():
    plan = plans.suite_plan(P, "flt", rope_theta=10_000.0)
    assert set(plan) == {"suite", "seeds", "deciles", "yarn2"}
    assert plan["seeds"]["seeds"] == (1, 2) and plan["seeds"]["lengths"] == (1024,)
    assert plan["yarn2"]["rope"] == {"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 2.0,
                                     "original_max_position_embeddings": 1024}
    assert plan["yarn2"]["lengths"] == (2048,)
    base = plans.suite_plan(P, "base", rope_theta=10_000.0)["yarn2"]["rope"]
    assert (base["factor"], base["original_max_position_embeddings"]) == (8.0, 256)
    cost = {r["part"]: r for r in plans.plan_cost(P, n_checkpoints=2)}
    n = P.eval.suite_samples
    assert cost["suite"]["generations"] == 2 * 20 * 4 * 3 * n
    assert cost["suite"]["prompt_tokens"] == 2 * 20 * 3840 * 3 * n
    assert cost["deciles"]["generations"] == 2 * 10 * 10
    assert cost["total"]["generations"] == sum(r["generations"] for p, r in cost.items() if p != "total")


def test_lr_plan_parts_and_yarn():
    plan = plans.lr_plan(P, "flt", 10_000.0, yarn=True)
    assert set(plan) == {"ruler", "short", "yarn"}
    assert plan["ruler"]["tasks"] == RULER_TASKS and plan["ruler"]["lengths"] == (1024,)
    assert plan["short"]["tasks"] == NIAH_TASKS and plan["short"]["lengths"] == (256,)
    assert plan["yarn"]["lengths"] == (2048,) and plan["yarn"]["rope"] == plans.yarn_rope(P, "flt", 2.0, 10_000.0)
    assert set(plans.lr_plan(P, "flt", 10_000.0)) == {"ruler", "short"}


@pytest.mark.parametrize("name, lengths", [("smoke", (384,)), ("tiny", (512, 1024)), ("paper", (40_960, 81_920))])
def test_cd_plan_has_the_babilong_part(name, lengths):
    p = get_profile(name)
    plan = plans.cd_plan(p, "cdt", rope_theta=10_000.0)
    assert set(plan) == {"suite", "multihop", "babilong"}
    bl = plan["babilong"]
    assert bl["tasks"] == ("babilong_qa1", "babilong_qa2", "babilong_qa3", "babilong_qa4", "babilong_qa5")
    assert all(get_task(t).name == t for t in bl["tasks"])  # every task is registered
    # the cells of the other CD-Tab2 parts: selfdistill.eval_lengths, the suite depths and samples, seed 0
    assert bl["lengths"] == lengths == plan["suite"]["lengths"] == plan["multihop"]["lengths"]
    for key in ("depths", "samples", "seeds"):
        assert bl[key] == plan["multihop"][key] == plan["suite"][key]
    assert (bl["depths"], bl["samples"], bl["seeds"]) == (p.eval.suite_depths, p.eval.suite_samples, (0,))


def test_cd_plan_keeps_babilong_without_multihop_in_the_suite():
    p = P.override(eval={"suite_tasks": RULER_TASKS})
    assert set(plans.cd_plan(p, "cdt", rope_theta=10_000.0)) == {"suite", "babilong"}
