"""RoPE-perturbed self-distillation's tables from hand-built result rows: exact numbers, flags, n/a cells, verdicts."""

import math
import statistics

import pytest

from repro.profiles import get_profile
from repro.reports import selfdistill
from repro.tasks.summary import DECILE_DEPTHS, POSITION_SPECS, RULER_TASKS
from tests.reports.records import make_suite, record, rows

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def test_rp_tab1_2_per_task_flags_and_skipped_cells():
    suite = make_suite()
    suite["flt"]["suite"]["skipped"].append({"task": "fwe", "length": 512, "depth": 0.5, "eval_seed": 0,
                                             "minimum": 600})
    rep = selfdistill.rp_tab1_2(suite, P)
    flag, base, flt = rep.tables[0]["rows"][:3]
    assert flag["CWE"] == "n/a (min length 300)" and flag["VT"] == "no (0.0)" and flag["S-1"] == "yes (100.0)"
    assert flag["Avg-doable"] == "8 tasks"
    assert flt["MK-1"] == 100.0 and flt["QA-2"] == 25.0 and flt["Avg-13"] == 34.6 and flt["Avg-doable"] == 40.6
    paper = [r for r in rep.tables[0]["rows"] if r["source"].startswith("paper")]
    assert [r["model"] for r in paper] == ["Standard", "LongCE", "PoSE", "Ours (cyclic shift)", "Ours (skip)"]
    assert paper[0]["MK-2"] == 31.0 and paper[4]["Avg-13"] == 69.3
    by_len = {r["model"]: r for r in rep.tables[1]["rows"]}
    assert by_len["flt"]["RULER-13 @512"].startswith("n/a (0/13 tasks")
    assert by_len["flt"]["RULER-13 @256"] == round(100 * (8 + 5 * 0.5) / 13, 1)
    assert by_len["base"]["RULER-13 @256"] == "n/a (12/13 tasks; missing CWE)"
    assert by_len["flt"]["RULER-doable @256"] == 100.0
    # the headline compares the self-distillation arms with rp_standard; none is trained here (the old rule fell back
    # to flt > base)
    assert rep.agrees == "n/a" and "rp_skip > rp_standard (RULER at the target): untested (an arm is missing)" \
        in rep.note


def test_rp_tab15_mean_and_std_over_seeds():
    suite = make_suite()
    seeds = []
    for t in RULER_TASKS:
        seeds += rows(t, 1024, [0.2], eval_seed=1) + rows(t, 1024, [0.2], eval_seed=2)
    base_seeds = []
    for t in RULER_TASKS:
        base_seeds += rows(t, 1024, [0.0], eval_seed=1) + rows(t, 1024, [0.0], eval_seed=2)
    suite["flt"]["seeds"] = record(seeds)
    suite["base"]["seeds"] = record(base_seeds)
    rep = selfdistill.rp_tab15(suite, P)
    flt = [r for r in rep.tables[0]["rows"] if r["model"] == "flt"][0]
    # RULER-13 per seed: 4.5/13 = 0.34615, 0.2, 0.2 -> mean 0.24872, sample std 0.08437
    assert flt["RULER-13 mean (std) @1024"] == "24.9 (8.44)"
    # doable (8 NIAH tasks): 3.25/8 = 0.40625, 0.2, 0.2 -> mean 0.26875, std 0.11908
    assert flt["RULER-doable mean (std) @1024"] == "26.9 (11.91)"
    assert flt["seeds"] == 3
    # the headline reads the paper's three arms (rp_standard, rp_cyclic, rp_skip), none trained here
    assert rep.agrees == "n/a" and "max std 11.91 points, smallest gap between arms 26.88" in rep.note


def _seeded_arm(correct_per_seed, n=40):
    """RULER at the target over evaluation seeds 0, 1, ...: the 8 NIAH tasks (the base can do them) have the first
    ``k`` of ``n`` prompts correct in a seed with ``k`` correct, the other tasks none; seed 0 in part ``suite``."""
    parts = {"suite": [], "seeds": []}
    for e, k in enumerate(correct_per_seed):
        for t in RULER_TASKS:
            scores = [1.0] * k + [0.0] * (n - k) if t.startswith("niah_") else [0.0] * n
            parts["suite" if e == 0 else "seeds"] += rows(t, 1024, scores, eval_seed=e)
    return {part: record(rs) for part, rs in parts.items()}


def test_std_se_by_hand_and_refusal():
    assert selfdistill.std_se(2.0, 3) == 1.0 and selfdistill.std_se(3.0, 10) == 3.0 / math.sqrt(18)
    assert selfdistill.std_se(1.0, 1) is None
    with pytest.raises(ValueError, match="sd=-1.0, n=3; allowed: sd >= 0, n >= 0"):
        selfdistill.std_se(-1.0, 3)


@pytest.mark.parametrize("per_seed, verdict", [
    # 3 seeds alike: std 0 +- 0, below the paper's 0.17 beyond noise
    ([20, 20, 20], "yes"),
    # 9 seeds alternating 10 / 30 of 40 (doable average 25.0 / 75.0): std 26.35, SE 26.35 / 4 = 6.59: 4.0 SE above
    ([10, 30] * 4 + [10], "no"),
    # one prompt more in one seed: averages 50, 50, 50.3125, std 0.180, SE 0.090: 0.12 SE from 0.17
    ([20, 20, 20], "tie within noise"),
])
def test_rp_tab15_verdict_against_the_papers_bound(per_seed, verdict):
    suite = make_suite()
    for name in ("rp_standard", "rp_cyclic", "rp_skip"):
        suite[name] = _seeded_arm(per_seed)
    if verdict == "tie within noise":
        for name in suite:
            if name.startswith("rp_"):
                suite[name]["seeds"]["results"][20]["score"] = 1.0  # seed 1, niah_single_1: 21 of 40
    rep = selfdistill.rp_tab15(suite, P)
    assert rep.agrees == verdict
    if verdict == "no":
        sd = statistics.stdev([25.0, 75.0] * 4 + [25.0])  # doable average per seed (percent)
        assert sd == pytest.approx(26.35, abs=0.01)
        assert f"rp_skip std < paper 0.17 (std of RULER at the target over evaluation seeds): contrary (gap " \
               f"{sd - 0.17:+.4g} +- {sd / 4:.2g}" in rep.note
    if verdict == "tie within noise":
        sd = statistics.stdev([50.0, 50.0 + 100 / 320, 50.0])
        assert f"tie (gap {sd - 0.17:+.4g} +- {sd / 2:.2g}" in rep.note


def _deciles(accs, n=20):
    """NIAH multikey-2 at the target, ``n`` prompts per depth decile, the first ``round(acc * n)`` correct."""
    return record([r for d, a in zip(DECILE_DEPTHS, accs) for r in
                   rows("niah_multikey_2", 1024, [1.0] * round(a * n) + [0.0] * (n - round(a * n)), depth=d)])


U_SHAPE = [1.0] + [0.2] * 8 + [1.0]  # mean 36, spread 80
FLAT = [0.9] * 10  # mean 90, spread 0


@pytest.mark.parametrize("standard, ours, verdict", [
    (U_SHAPE, FLAT, "yes"),  # 54 points higher and 80 flatter, both arms: 4/4 hold
    (FLAT, U_SHAPE, "no"),  # 54 points lower and 80 less flat: 4/4 the other way
    (U_SHAPE, U_SHAPE, "tie within noise"),  # the same curves: gaps of 0
])
def test_rp_fig1a_headline(standard, ours, verdict):
    suite = make_suite()
    suite["rp_standard"] = {"deciles": _deciles(standard)}
    suite["rp_skip"] = {"deciles": _deciles(ours)}
    suite["rp_cyclic"] = {"deciles": _deciles(ours)}
    rep = selfdistill.rp_fig1a(suite, P)[1]
    assert rep.agrees == verdict
    if verdict == "yes":
        assert rep.note.startswith("headline: 4/4 claims hold beyond noise (two-sided, Holm over 4")
        assert "rp_skip mean > rp_standard mean (mean NIAH multikey-2 accuracy over depth deciles): holds (gap +54 " \
               in rep.note
        assert "rp_cyclic spread < rp_standard spread (max - min accuracy over depth deciles): holds (gap -80 " \
               in rep.note


def test_rp_fig1a_flt_stands_in_and_one_prompt_per_decile_is_untested():
    suite = make_suite()
    for name, vals in (("flt", [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]), ("rp_skip", [1, 1, 1, 1, 0, 1, 1, 1, 1, 1])):
        rs = [r for d, v in zip(DECILE_DEPTHS, vals) for r in rows("niah_multikey_2", 1024, [v], depth=d)]
        suite.setdefault(name, {})["deciles"] = record(rs)
    curves, rep = selfdistill.rp_fig1a(suite, P)
    assert curves["flt"] == [1.0] + [0.0] * 8 + [1.0]
    summary = {r["model"]: r["accuracy"] for r in rep.tables[0]["rows"] if r["decile"].startswith("mean")}
    assert summary == {"flt": "20.0 / 100.0", "rp_skip": "90.0 / 100.0"}
    # one prompt per decile: no standard error, so no claim is tested (the old rule took the raw 70-point gap)
    assert rep.agrees == "n/a" and "flt stands in for rp_standard" in rep.note
    assert "rp_skip mean > rp_standard mean (mean NIAH multikey-2 accuracy over depth deciles): untested (no " \
           "standard error)" in rep.note
    del suite["rp_skip"]
    assert selfdistill.rp_fig1a(suite, P)[1].agrees == "n/a"


def test_decile_ses_are_each_deciles_standard_error_beside_the_curves():
    # 20 prompts per decile: a decile at accuracy a has SE sqrt(a (1 - a) / 20); one seed each, no spread to add;
    # a decile with one prompt (flt) has none
    suite = make_suite()
    suite["rp_skip"] = {"deciles": _deciles(U_SHAPE)}
    suite["rp_cyclic"] = {"deciles": _deciles(FLAT)}
    ses = selfdistill.decile_ses(suite, P)
    assert set(ses) == set(selfdistill.rp_fig1a(suite, P)[0]) == {"rp_skip", "rp_cyclic"}
    assert ses["rp_skip"][0] == 0.0 and ses["rp_skip"][1] == pytest.approx(math.sqrt(0.2 * 0.8 / 20))
    assert ses["rp_cyclic"] == [pytest.approx(math.sqrt(0.9 * 0.1 / 20))] * 10
    one = make_suite()
    one["flt"] = {"deciles": record([r for d in DECILE_DEPTHS for r in rows("niah_multikey_2", 1024, [1.0], depth=d)])}
    assert selfdistill.decile_ses(one, P) == {"flt": [None] * 10}


def _ruler_arm(acc, part="suite", n=40, extra=0):
    """RULER at the target (and, for ``yarn*`` parts, at their length): every task the first ``round(acc * n)`` of
    ``n`` prompts correct, ``extra`` more in niah_single_1."""
    length = {"suite": 1024, "yarn2": 2048, "yarn4": 4096}[part]
    k = round(acc * n)
    rs = [r for t in RULER_TASKS for r in
          rows(t, length, [1.0] * (k + (extra if t == "niah_single_1" else 0)) + [0.0] * n)[:n]]
    return record(rs)


def _main_suite(accs, part="suite", extra=None):
    suite = make_suite()
    for name, acc in accs.items():
        suite.setdefault(name, {})[part] = _ruler_arm(acc, part, extra=(extra or {}).get(name, 0))
    return suite


def _one_prompt_se(n=40, tasks=8):
    """The paired SE (points) of a gap of one prompt in one of ``tasks`` equally weighted tasks of ``n`` prompts:
    ``sqrt(p (1 - p) / n) / tasks`` with ``p = 1 / n``."""
    return 100 * math.sqrt((1 / n) * (1 - 1 / n) / n) / tasks


@pytest.mark.parametrize("accs, extra, verdict", [
    ({"rp_standard": 0.5, "rp_skip": 0.9, "rp_cyclic": 0.8}, None, "yes"),  # +40 and +30 points, SE about 2.7
    ({"rp_standard": 0.5, "rp_skip": 0.1, "rp_cyclic": 0.5}, None, "no"),  # skip 40 points below, cyclic equal
    ({"rp_standard": 0.5, "rp_skip": 0.9, "rp_cyclic": 0.5}, None, "partly"),
    # one prompt more in one task: +0.3125 points against an SE of 0.309 (1.0 SE), cyclic equal
    ({"rp_standard": 0.5, "rp_skip": 0.5, "rp_cyclic": 0.5}, {"rp_skip": 1}, "tie within noise"),
])
def test_rp_tab1_2_headline(accs, extra, verdict):
    rep = selfdistill.rp_tab1_2(_main_suite(accs, extra=extra), P)
    assert rep.agrees == verdict
    assert rep.note.startswith("headline: ") and rep.note.endswith("Metric: RULER-doable (8 tasks) at the target")
    assert "Other pairs, for context (not deciding): " in rep.note
    if verdict == "tie within noise":
        assert _one_prompt_se() == pytest.approx(0.3086, abs=1e-4)
        assert "rp_skip > rp_standard (RULER at the target): tie (gap +0.3125 +- 0.31" in rep.note
    if verdict == "no":
        assert "rp_skip > rp_standard (RULER at the target): contrary (gap -40 +-" in rep.note


@pytest.mark.parametrize("at2, at4, verdict", [
    ((0.5, 0.9, 0.9), (0.2, 0.6, 0.6), "yes"),  # both factors: +40 points
    ((0.5, 0.9, 0.9), (0.6, 0.2, 0.2), "partly"),  # 2x holds, 4x the other way
    ((0.9, 0.5, 0.5), (0.6, 0.2, 0.2), "no"),
    ((0.5, 0.5, 0.5), (0.2, 0.2, 0.2), "tie within noise"),
])
def test_rp_tab4_5_tests_every_factor(at2, at4, verdict):
    suite = make_suite()
    for part, accs in (("yarn2", at2), ("yarn4", at4)):
        for name, acc in zip(("rp_standard", "rp_skip", "rp_cyclic"), accs):
            suite.setdefault(name, {})[part] = _ruler_arm(acc, part)
    rep = selfdistill.rp_tab4_5(suite, P)
    assert rep.agrees == verdict
    assert "rp_skip YaRN 4x > rp_standard YaRN 4x (RULER with YaRN at 4x the target)" in rep.note
    assert "Holm over 4" in rep.note and "RULER-doable (8 tasks) YaRN 4x: base n/a, flt n/a, rp_standard" in rep.ours
    if verdict == "partly":
        assert "rp_cyclic YaRN 4x > rp_standard YaRN 4x (RULER with YaRN at 4x the target): contrary (gap -40" \
               in rep.note


@pytest.mark.parametrize("accs, verdict", [
    ({"rp_standard": 0.5, "rp_longce": 0.5, "rp_pose": 0.5, "rp_cyclic": 0.2, "rp_skip": 0.9}, "yes"),
    ({"rp_standard": 0.5, "rp_longce": 0.5, "rp_pose": 0.5, "rp_cyclic": 0.9, "rp_skip": 0.1}, "no"),
    ({"rp_standard": 0.5, "rp_longce": 0.5, "rp_pose": 0.5, "rp_cyclic": 0.5, "rp_skip": 0.5}, "tie within noise"),
    ({"rp_standard": 0.5, "rp_longce": 0.5, "rp_pose": 0.5, "rp_cyclic": 0.5, "rp_skip": 0.9}, "partly"),
])
def test_rp_tab14_headline(accs, verdict):
    suite = make_suite()
    for name, acc in accs.items():
        k = round(acc * 40)
        scores = [1.0] * k + [0.0] * (40 - k)
        suite[name] = {"suite": record([r for sp in POSITION_SPECS for r in rows(sp, 1024, scores)])}
    rep = selfdistill.rp_tab14(suite, P)
    assert rep.agrees == verdict and "Holm over 5" in rep.note
    if verdict == "no":
        assert "headline: 0/5 claims hold beyond noise, 5 significant the other way" in rep.note
