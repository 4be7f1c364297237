"""Paired statistics with real numbers: bootstrap vs the analytic SE, McNemar vs the exact binomial, verdicts,
training-seed widening, sample sizes."""

import math

import numpy as np
import pytest

from repro import stats


def test_bootstrap_se_matches_the_analytic_se_of_the_mean_difference():
    rng = np.random.default_rng(7)
    a = (rng.random(400) < 0.6).astype(float)
    b = np.where(rng.random(400) < 0.7, a, 1 - a)  # correlated with a: pairing matters
    analytic = np.std(a - b) / math.sqrt(400)
    assert stats.paired_se(a, b) == pytest.approx(analytic)
    g = stats.paired_bootstrap(a, b, B=4000, seed=1)
    assert g.gap == pytest.approx(a.mean() - b.mean())
    assert g.eval_se == pytest.approx(analytic, rel=0.06)
    assert g.lo < g.gap < g.hi and g.hi - g.lo == pytest.approx(2 * 1.96 * analytic, rel=0.1)
    # unpaired noise would be larger: sqrt(var a / n + var b / n)
    assert g.eval_se < 0.8 * math.sqrt(np.var(a) / 400 + np.var(b) / 400)
    assert stats.paired_bootstrap(a, b, B=500, seed=3) == stats.paired_bootstrap(a, b, B=500, seed=3)  # seeded


def test_stratified_weighted_bootstrap_matches_the_analytic_se():
    rng = np.random.default_rng(0)
    strata = ["x"] * 100 + ["y"] * 300
    a, b = rng.random(400), rng.random(400)
    w = {"x": 0.75, "y": 0.25}
    d = a - b
    expected = math.sqrt(0.75 ** 2 * np.var(d[:100]) / 100 + 0.25 ** 2 * np.var(d[100:]) / 300)
    assert stats.paired_se(a, b, strata, w) == pytest.approx(expected)
    g = stats.paired_bootstrap(a, b, strata, w, B=4000)
    assert g.gap == pytest.approx(0.75 * d[:100].mean() + 0.25 * d[100:].mean())
    assert g.eval_se == pytest.approx(expected, rel=0.06)
    with pytest.raises(ValueError, match="weights for .*'x'.* but strata"):
        stats.paired_bootstrap(a, b, strata, {"x": 1.0})


def test_mcnemar_equals_the_exact_binomial_on_a_hand_case():
    # 8 prompts right under A only, 2 under B only, 5 right under both, 5 wrong under both
    a = [1] * 8 + [0] * 2 + [1] * 5 + [0] * 5
    b = [0] * 8 + [1] * 2 + [1] * 5 + [0] * 5
    t = stats.mcnemar(a, b)
    assert (t.n10, t.n01, t.method) == (8, 2, "exact binomial")
    assert t.p == pytest.approx(2 * (1 + 10 + 45) / 2 ** 10)  # 2 * P[Bin(10, 1/2) <= 2] = 0.109375
    assert stats.mcnemar(a, a).p == 1.0
    big = stats.mcnemar([1] * 40 + [0] * 10, [0] * 40 + [1] * 10)  # 50 discordant: chi-square (|40-10|-1)^2/50
    assert big.method.startswith("chi-square") and big.p == pytest.approx(math.erfc(math.sqrt(29 ** 2 / 50 / 2)))
    with pytest.raises(ValueError, match=r"scores \[0.5\]; allowed: 0 or 1"):
        stats.mcnemar([0.5, 1], [0, 1])


def test_tie_within_noise_and_significant_gap():
    assert stats.gap_verdict(3.0, 2.0) == "tie" and stats.gap_verdict(-3.9, 2.0) == "tie"
    assert stats.gap_verdict(4.1, 2.0) == "higher" and stats.gap_verdict(-4.1, 2.0) == "lower"
    assert stats.gap_verdict(0.0, 0.0) == "tie" and stats.gap_verdict(0.1, 0.0) == "higher"
    # a bootstrap case: 10 of 40 prompts flip in A's favour -> gap 0.25, SE ~ sqrt(0.25 * 0.75 / 40) = 0.068
    a, b = [1.0] * 10 + [0.0] * 30, [0.0] * 40
    assert stats.paired_bootstrap(a, b).verdict() == "higher"
    # 2 of 40: gap 0.05, SE ~ 0.034 -> within two SE
    assert stats.paired_bootstrap([1.0] * 2 + [0.0] * 38, b).verdict() == "tie"
    with pytest.raises(ValueError, match="se=-1.0, z=2.0; allowed: se >= 0, z > 0"):
        stats.gap_verdict(1.0, -1.0)


def test_seed_widening_turns_a_significant_gap_into_a_tie():
    g = stats.Gap(gap=5.0, eval_se=1.5, lo=2.0, hi=8.0)
    assert g.verdict() == "higher"  # 5 > 2 * 1.5
    spread = stats.seed_spread([60.0, 64.0, 68.0])  # std 4 over 3 training seeds
    assert spread == pytest.approx(4.0)
    se = stats.gap_se(1.5, spread, 3, spread, 3)  # sqrt(1.5^2 + 16/3 + 16/3) = 3.59
    assert se == pytest.approx(math.sqrt(2.25 + 32 / 3))
    widened = stats.Gap(5.0, 1.5, 2.0, 8.0, seed_se=math.sqrt(se ** 2 - 1.5 ** 2))
    assert widened.se == pytest.approx(se) and widened.verdict() == "tie"
    with pytest.raises(ValueError, match="1 training seed"):
        stats.seed_spread([60.0])


def test_samples_for_se():
    ruler = {t: 1 / 13 for t in range(13)}
    # worst case sd 0.5, 3 depths: sum w^2 sd^2 / 3 = 0.25 / 39 -> m = 0.25 / 39 / 0.02^2 = 16.03 -> 17
    assert stats.samples_for_se(ruler, 0.5, cells=3, target_se=0.02) == 17
    assert stats.headline_se(ruler, 0.5, 3, 17) <= 0.02 < stats.headline_se(ruler, 0.5, 3, 16)
    niah_m = {"mk1": 1 / 9, "mk2": 1 / 9, "mk3": 1 / 9, "mv": 1 / 3, "mq": 1 / 3}
    assert stats.samples_for_se(niah_m, 0.5, cells=3, target_se=0.02) == 55  # (3/81 + 2/9) * 0.25 / 0.0012 = 54.01
    assert stats.samples_for_se({"t": 1.0}, {"t": stats.bernoulli_sd(0.9)}, 1, 0.03) == 100
    with pytest.raises(ValueError, match="no score std for b"):
        stats.samples_for_se({"a": 0.5, "b": 0.5}, {"a": 0.5}, 1, 0.02)
