"""Prompts paired across arms, the paired test of a table's headline and its training-seed widening, one arm's standard
error."""

import math

import numpy as np
import pytest

from repro import stats
from repro.reports import common, noise
from tests.reports.records import record, rows


def right(task, k, n=40, length=1024, **kw):
    """``n`` prompts of ``task``, the first ``k`` answered right."""
    return rows(task, length, [1] * k + [0] * (n - k), **kw)


def test_pairing_aligns_by_prompt_and_names_what_differs():
    a = right("vt", 3, 4) + right("vt", 1, 4, eval_seed=1)
    b = list(reversed(right("vt", 2, 4) + right("vt", 4, 4, eval_seed=1)))
    keys, x, y = noise.pair_rows(a, b, ("flt", "pose"))
    assert len(keys) == 8 and keys[0] == ("vt", 1024, 0.5, 0, 0)
    assert x.tolist() == [1, 1, 1, 0, 1, 0, 0, 0] and y.tolist() == [1, 1, 0, 0, 1, 1, 1, 1]
    with pytest.raises(noise.PromptMismatch, match=r"flt and pose were not evaluated on the same prompts: "
                                                   r"1 prompt\(s\) only in flt, 0 only in pose; differing fields: "
                                                   r"seed \{0, 1, 2, 3\} vs \{0, 1, 2\}"):
        noise.pair_rows(right("vt", 1, 4), right("vt", 1, 3), ("flt", "pose"))
    with pytest.raises(noise.PromptMismatch, match=r"differing fields: depth \{0.5\} vs \{0.1\}"):
        noise.pair_rows(right("vt", 1, 4), right("vt", 1, 4, depth=0.1))
    with pytest.raises(ValueError, match="scored twice in A; allowed: one row per prompt"):
        noise.pair_rows(right("vt", 1, 2) * 2, right("vt", 1, 2))
    with pytest.raises(ValueError, match="result row without depth, seed"):
        noise.prompt_key({"task": "vt", "length": 1024, "score": 1.0})


def test_headline_weights():
    assert noise.macro(("a", "b"), 8) == {("a", 8): 0.5, ("b", 8): 0.5}
    assert sum(noise.macro(("a", "b"), (8, 16)).values()) == 1.0
    w = noise.niah_m(1024)
    assert sum(w.values()) == pytest.approx(1.0) and w[("niah_multikey_2", 1024)] == pytest.approx(1 / 9)
    with pytest.raises(ValueError, match=r"tasks=\(\), lengths=\(8,\); allowed: at least one of each"):
        noise.macro((), 8)


def test_gap_test_matches_the_analytic_paired_se():
    rng = np.random.default_rng(3)
    scores = {n: {t: (rng.random(60) < p).astype(int).tolist() for t in ("vt", "cwe")}
              for n, p in (("flt", 0.6), ("pose", 0.4))}
    suite = {n: {"ruler": record(rows("vt", 1024, s["vt"]) + rows("cwe", 1024, s["cwe"]))} for n, s in scores.items()}
    test = noise.GapTest(suite, "ruler", noise.macro(("vt", "cwe"), 1024), B=4000)
    a = np.array(scores["flt"]["vt"] + scores["flt"]["cwe"])
    b = np.array(scores["pose"]["vt"] + scores["pose"]["cwe"])
    strata = ["vt"] * 60 + ["cwe"] * 60
    g = test.gap("flt", "pose")
    assert g.gap == pytest.approx(100 * (a.mean() - b.mean()))
    assert g.eval_se == pytest.approx(100 * stats.paired_se(a, b, strata), rel=0.06) and g.seed_se == 0.0
    assert test.value("flt") == pytest.approx(100 * a.mean())
    assert test.arm_se("flt") == pytest.approx(100 * math.sqrt(np.var(a[:60]) / 60 + np.var(a[60:]) / 60) / 2)
    assert test.gap("flt", "missing") is None and test.value("missing") is None
    assert test.method() == "paired bootstrap over prompts, 2 SE; training-seed spread not measured"


def test_seed_widening_turns_a_significant_gap_into_a_tie():
    paper = {"flt": 82.3, "pose": 68.8}

    def arm(k):  # vt at the target, 40 prompts, the first k right
        return {"ruler": record(right("vt", k))}

    one_seed = {"flt": arm(22), "pose": arm(16)}  # 55 vs 40: d = 1 on 6 of 40 prompts, SE 5.3 points
    test = noise.GapTest(one_seed, "ruler", noise.macro(("vt",), 1024))
    assert test.gap("flt", "pose").eval_se == pytest.approx(100 * math.sqrt(0.15 * 0.85 / 40), rel=0.08)
    ours = {n: test.value(n) for n in paper}
    assert common.direction_agrees(ours, paper, noise=test)[0] == "yes"
    # three training seeds of flt at 45, 55, 65 (mean 55, std 10): the gap's variance gains 10^2 / 3 for flt
    # and the pooled 10^2 / 1 for single-seed pose -> SE ~ 11.8, and 15 points are a tie
    three = {"flt": arm(18), "flt@seed1": arm(22), "flt@seed2": arm(26), "pose": arm(16)}
    test = noise.GapTest(three, "ruler", noise.macro(("vt",), 1024))
    assert test.replicate_values("flt") == pytest.approx([45.0, 55.0, 65.0]) and test.seed_std("flt") == 10.0
    assert test.value("flt") == pytest.approx(55.0) and test.pooled_seed_std() == pytest.approx(10.0)
    g = test.gap("flt", "pose")
    assert g.seed_se == pytest.approx(math.sqrt(100 / 3 + 100)) and g.gap == pytest.approx(15.0)
    assert 2 * g.eval_se < 15 < 2 * g.se
    ours = {n: test.value(n) for n in paper}
    v, how = common.direction_agrees(ours, paper, noise=test)
    assert v == common.TIE
    assert how.endswith("0/1 gaps significant (paired bootstrap over prompts, 2 SE; widened by the training-seed "
                        "spread (flt 10.0 over 3 seeds; single-seed arms: pooled 10.0))")
    three["flt@seed2"] = {"ruler": record(right("vt", 26, 39))}
    with pytest.raises(noise.PromptMismatch, match="flt and flt@seed2 were not evaluated on the same prompts"):
        noise.GapTest(three, "ruler", noise.macro(("vt",), 1024)).value("flt")


def test_no_noise_estimate_below_two_prompts_a_cell():
    suite = {"flt": {"ruler": record(right("vt", 1, 1))}, "pose": {"ruler": record(right("vt", 0, 1))}}
    test = noise.GapTest(suite, "ruler", noise.macro(("vt",), 1024))
    assert test.gap("flt", "pose") is None and test.se("flt", "pose") is None and test.arm_se("flt") is None
    assert test.value("flt") == 100.0


def test_nonlinear_metric_and_task_mcnemar():
    # a curve's spread (max - min over two depth cells) by the bootstrap
    cells = {("vt", 0): 0.5, ("vt", 9): 0.5}
    flat = right("vt", 5, 10, depth=0.05) + right("vt", 5, 10, depth=0.95)
    steep = right("vt", 9, 10, depth=0.05) + right("vt", 1, 10, depth=0.95)
    suite = {"a": {"d": record(flat)}, "b": {"d": record(steep)}}
    test = noise.GapTest(suite, "d", cells, stratum=noise.depth_decile, metric=lambda m: m.max(1) - m.min(1))
    assert test.value("a") == 0.0 and test.value("b") == pytest.approx(80.0)
    assert test.gap("b", "a").gap == pytest.approx(80.0) and test.gap("b", "a").verdict() == "higher"
    # McNemar on the hand case of tests/test_stats.py: 8 prompts right under flt only, 2 under base only
    a = [1] * 8 + [0] * 2 + [1] * 5 + [0] * 5
    b = [0] * 8 + [1] * 2 + [1] * 5 + [0] * 5
    suite = {"flt": {"ruler": record(rows("vt", 1024, a) + rows("cwe", 1024, [0.5] * 20))},
             "base": {"ruler": record(rows("vt", 1024, b) + rows("cwe", 1024, [0.5] * 20))}}
    out = noise.task_mcnemar(suite, "flt", "base", "ruler", 1024, ("vt", "cwe", "fwe"))
    assert list(out) == ["vt"] and out["vt"].p == pytest.approx(0.109375)


def test_standard_error_of_a_macro_average():
    def part(task_scores):  # one task's per-prompt scores at the target
        return {"ruler": record([r for t, s in task_scores.items() for r in rows(t, 1024, s)])}

    suite = {"a": part({"vt": [1, 0, 1, 0]}), "c": part({"vt": [1, 1, 1, 1]}),
             "m": part({"vt": [1, 0, 1, 0], "cwe": [1, 1, 0, 0, 0, 0, 1, 1]})}
    assert noise.standard_error(suite, "a", ("vt",), 1024) == 25.0  # sqrt(0.25 / 4)
    assert noise.standard_error(suite, "c", ("vt",), 1024) == 0.0
    assert noise.standard_error(suite, "a", ("vt",), 512) is None
    # macro average of two tasks: sqrt(0.25 / 4 + 0.25 / 8) / 2 = 15.3
    assert noise.standard_error(suite, "m", ("vt", "cwe"), 1024) == round(100 * (0.25 / 4 + 0.25 / 8) ** 0.5 / 2, 1)
