"""Declared headlines: each claim a two-sided test beyond noise, Holm-corrected per table; yes/no/tie/partly."""

import math

import pytest

from repro.reports.headline import (ALPHA, TIE, Claim, Headline, check_claims, headline_verdict, holm, judge,
                                    two_sided_p)


def se_of(table):
    return lambda a, b: table.get((a, b), table.get((b, a)))


def test_alpha_is_the_two_se_rule_and_p_values_are_normal():
    assert math.isclose(ALPHA, 0.0455, abs_tol=1e-4)
    assert math.isclose(two_sided_p(2.0, 1.0), ALPHA)
    assert math.isclose(two_sided_p(-1.96, 1.0), 0.05, abs_tol=1e-4)
    assert two_sided_p(0.0, 0.0) == 1.0 and two_sided_p(0.1, 0.0) == 0.0
    with pytest.raises(ValueError, match="allowed: a finite gap and se >= 0"):
        two_sided_p(1.0, -1.0)


def test_holm_by_hand():
    # sorted 0.01, 0.03, 0.04 (m = 3): 3 x 0.01 = 0.03; 2 x 0.03 = 0.06; 1 x 0.04 = 0.04 -> monotone 0.06
    assert holm([0.04, 0.01, 0.03]) == pytest.approx([0.06, 0.03, 0.06])
    assert holm([0.5, 0.9]) == pytest.approx([1.0, 1.0])
    assert holm([]) == []


H = Headline((Claim("skip", "standard", what="RULER"), Claim("cyclic", "standard")), "RP Table 1")


def test_yes_when_every_claim_holds_beyond_noise():
    ours = {"skip": 30.0, "cyclic": 29.0, "standard": 25.0}
    verdict, how = judge(H, ours, se_of({("skip", "standard"): 1.0, ("cyclic", "standard"): 1.0}))
    assert verdict == "yes" and how.startswith("headline: 2/2 claims hold beyond noise (two-sided, Holm over 2")


def test_no_when_significant_the_other_way():
    ours = {"skip": 20.0, "cyclic": 24.0, "standard": 25.0}  # skip 5 SE below; cyclic ties
    verdict, how = judge(H, ours, se_of({("skip", "standard"): 1.0, ("cyclic", "standard"): 1.0}))
    assert verdict == "no" and "0/2 claims hold beyond noise, 1 significant the other way, 1 tied" in how


def test_tie_when_within_noise():
    ours = {"skip": 26.5, "cyclic": 24.0, "standard": 25.0}  # 1.5 and -1.0 SE
    assert judge(H, ours, se_of({("skip", "standard"): 1.0, ("cyclic", "standard"): 1.0}))[0] == TIE


def test_partly_when_some_claims_hold():
    ours = {"skip": 30.0, "cyclic": 25.5, "standard": 25.0}
    assert judge(H, ours, se_of({("skip", "standard"): 1.0, ("cyclic", "standard"): 1.0}))[0] == "partly"


def test_holm_turns_a_lone_two_se_gap_into_a_tie_among_two():
    # 2.1 SE alone is significant (p 0.036 < 0.0455); with a second claim at p 0.9 Holm doubles it (0.071)
    alone = check_claims([Claim("skip", "standard")], {"skip": 2.1, "standard": 0.0}, se_of({("skip", "standard"): 1}))
    assert alone[0].outcome == "holds"
    both = check_claims(H.claims, {"skip": 2.1, "cyclic": 0.1, "standard": 0.0}, se_of({("skip", "standard"): 1.0,
                                                                                       ("cyclic", "standard"): 1.0}))
    assert [t.outcome for t in both] == ["tie", "tie"]
    assert both[0].adjusted == pytest.approx(2 * two_sided_p(2.1, 1.0))


def test_sameness_claims_and_untested_claims():
    same = Headline((Claim("r30", "r40", "higher"), Claim("r30", "flt", "same")))
    se = se_of({("r30", "r40"): 1.0, ("r30", "flt"): 1.0})
    assert judge(same, {"r30": 15.2, "r40": 14.5, "flt": 15.0}, se)[0] == "partly"  # 30% > 40% ties; 30% ~ FLT
    assert judge(same, {"r30": 15.2, "r40": 10.0, "flt": 15.0}, se)[0] == "yes"
    assert judge(same, {"r30": 15.2, "r40": 10.0, "flt": 25.0}, se)[0] == "partly"  # FLT 9.8 SE above
    verdict, how = judge(H, {"skip": 40.0, "standard": 25.0}, se_of({("skip", "standard"): None}))
    assert verdict == "n/a" and "skip > standard (RULER): untested (no standard error)" in how
    assert "cyclic > standard: untested (an arm is missing)" in how


def test_bad_claims_are_refused():
    with pytest.raises(ValueError, match="expect='better'; allowed: higher, lower, same"):
        Claim("a", "b", "better")
    with pytest.raises(ValueError, match="a claim compares two arms"):
        Claim("a", "a")
    with pytest.raises(ValueError, match="needs at least one claim"):
        Headline(())
    assert headline_verdict([])[0] == "n/a"


def test_judgement_unpacks_and_records_what_it_was_decided_from():
    ours = {"skip": 30.0, "cyclic": 24.0, "standard": 25.0}
    j = judge(H, ours, se_of({("skip", "standard"): 1.0, ("cyclic", "standard"): 1.0}))
    verdict, how = j
    assert (verdict, how) == (j.verdict, j.how) == (j[0], j[1]) and verdict == "partly"
    rec = j.claims
    assert [(c["a"], c["b"], c["expect"], c["outcome"]) for c in rec] == [
        ("skip", "standard", "higher", "holds"), ("cyclic", "standard", "higher", "tie")]
    assert rec[0]["gap"] == 5.0 and rec[0]["se"] == 1.0 and rec[0]["adjusted"] <= ALPHA < rec[1]["adjusted"]
    assert j.with_context("pairs").how == how + ". pairs" and j.with_context("").how == how
    assert j.with_context("pairs").tested == j.tested


@pytest.mark.parametrize("skip,cyclic,se", [(30.0, 24.0, 1.0), (26.0, 25.5, 1.0), (20.0, 19.0, 0.5),
                                            (25.0, 25.0, 0.0), (30.0, 32.0, None)])
def test_rejudge_of_the_records_says_what_judge_said(skip, cyclic, se):
    from repro.reports.headline import rejudge

    j = judge(H, {"skip": skip, "cyclic": cyclic, "standard": 25.0},
              se_of({("skip", "standard"): se, ("cyclic", "standard"): se}))
    again = rejudge(j.claims)
    assert again.verdict == j.verdict and [t.outcome for t in again.tested] == [t.outcome for t in j.tested]
