"""The smol profile's verdicts (:mod:`repro.reports.as_is`) on hand-made prediction rows: paired prompts, McNemar's
exact p, so that a handful of prompts never reads as beyond noise."""

import pytest

from repro.profiles import get_profile
from repro.reports.as_is import exact_se, rp_tab45, tb_niah
from repro.reports.headline import rejudge


def _record(scores: dict[int, list[float]], scaling: str = "none", rope: dict | None = None) -> dict:
    """An evaluate_as_is record: per length, one 0/1 score per prompt (seed = prompt index, depths in turn)."""
    rows = [{"target_length": L, "depth": (0.1, 0.5, 0.9)[i % 3], "seed": i, "score": s}
            for L, ss in scores.items() for i, s in enumerate(ss)]
    return {"rows": rows, "rope_scaling": scaling, "rope_parameters": rope, "max_position_embeddings": 8192,
            "chat_template": "on", "chat_template_flag": "auto"}


def test_exact_se_gives_mcnemars_p_and_zero_without_discordant_prompts():
    assert exact_se([1, 1, 0], [1, 1, 0]) == 0.0
    se = exact_se([1, 1], [0, 0])  # 2 discordant prompts: exact p = 0.5, i.e. z = 0.674
    assert se == pytest.approx(1.0 / 0.6745, rel=1e-3)
    assert exact_se([1] * 12, [0] * 12) < 1.0 / 3.2  # p = 2^-11: beyond 3.2 SE


def test_rp_tab45_needs_more_than_two_prompts_to_call_a_scaling_better():
    p = get_profile("smol")
    none = _record({16384: [0, 0]})
    few = {"none": none, "yarn:2": _record({16384: [1, 1]}, "yarn:2", {"rope_type": "yarn", "factor": 2.0})}
    series, rep = rp_tab45(few, _record({8192: [1] * 6}), p)
    assert series["none"] == {8192: 100.0, 16384: 0.0} and series["yarn:2"] == {16384: 100.0}
    assert rep.agrees == "tie within noise"  # 2 of 2 against 0 of 2: McNemar's exact p = 0.5
    assert rejudge(rep.claims).verdict == rep.agrees  # the recorded gap and SE give the same verdict
    many = {"none": _record({16384: [0] * 12}), "yarn:2": _record({16384: [1] * 12}, "yarn:2")}
    _, rep = rp_tab45(many, None, p.override(real={"scaled_samples": 12, "scalings": ("none", "yarn:2")}))
    assert rep.agrees == "yes" and rep.claims[0]["a"] == "yarn:2 @16384"
    worse = {"none": _record({16384: [1] * 12}), "linear:2": _record({16384: [0] * 12}, "linear:2")}
    assert rp_tab45(worse, None, p.override(real={"scalings": ("none", "linear:2")}))[1].agrees == "no"
    _, rep = rp_tab45(many, None, p)  # the profile's other scalings not evaluated: their claims untested
    assert rep.agrees == "partly" and [c["outcome"] for c in rep.claims] == ["untested", "untested", "holds"]


def test_tb_niah_holds_within_the_window_unless_the_drop_is_significant():
    p = get_profile("smol")
    tables, rep = tb_niah(_record({1024: [1] * 6, 2048: [1] * 6, 4096: [1, 1, 1, 1, 1, 0], 8192: [1] * 6}), p)
    name = p.model.pretrained
    assert tables[name][(4096, 0.9)] == 0.5 and tables[name][(1024, 0.1)] == 1.0
    assert rep.agrees == "yes" and rep.claims[0]["a"] == "8192" and rep.claims[0]["b"] == "1024"
    _, rep = tb_niah(_record({1024: [1] * 12, 8192: [0] * 12}), p)
    assert rep.agrees == "no"  # a claim of sameness fails on a significant drop
