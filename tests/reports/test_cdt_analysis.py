"""CDT's analysis tables from hand-built records: the verdicts read the numbers they claim to."""

import math

import numpy as np
import pytest

from repro.analysis.cdt_scores import detected_shares
from repro.profiles import get_profile
from repro.reports import cdt_analysis as cda
from repro.reports import cdt_effects as cde

P = get_profile("tiny")
TYPES = ("supporting", "interference", "irrelevant", "low_frequency")


def _rec(ig, fr, jitter=0.0):
    share = {t: v + jitter for t, v in zip(TYPES, ig)}
    frs = {t: v for t, v in zip(TYPES, fr)}
    return {"ig_share": share, "fr_share": frs, "fr_top_share": frs, "grad_l1_share": share, "top_heads_used": 12}


def test_mean_se():
    assert cda.mean_se([1.0, 3.0]) == (2.0, pytest.approx(1.0))
    assert cda.mean_se([5.0]) == (5.0, 0.0)
    m, se = cda.mean_se([float("nan")])
    assert math.isnan(m) and math.isnan(se)


def se_of(x, y):
    """The paired SE over samples, computed here: sd(x - y) / sqrt(n) (ddof 1)."""
    d = np.asarray(x, dtype=float) - np.asarray(y, dtype=float)
    return float(d.std(ddof=1) / math.sqrt(d.size))


def test_fig3_headline_per_answer_group():
    # IG: critical 0.9 vs irrelevant 0.05; FR on noise 0.7 vs IG's 0.1 (both groups), with per-sample jitter
    recs = [_rec((0.7, 0.2, 0.05, 0.05), (0.2, 0.1, 0.6, 0.1), j) for j in (0.0, 0.01, -0.01, 0.02)]
    data, rep = cda.cd_fig3(recs, [True, True, False, False], P)
    assert rep.agrees == "yes" and rep.note.startswith("headline: 4/4 claims hold beyond noise")
    assert data["correct"]["IG (Eq. 1)"]["supporting"][0] == pytest.approx(0.705)
    assert {r["answers"] for r in rep.tables[0]["rows"]} == {"correct", "wrong"}
    per = cda.fig3_per_sample(recs, [True, True, False, False])
    # IG critical - irrelevant per sample: (0.7 + j) + (0.2 + j) - (0.05 + j) = 0.85 + j
    assert per["correct: IG critical"][1] - per["correct: IG irrelevant"][1] == pytest.approx(0.86)
    assert per["wrong: FR noise"][0] == pytest.approx(0.7) and per["wrong: IG noise"][0] == pytest.approx(0.08)
    # FR no heavier on noise than IG: the IG claims hold, the FR ones are significant the other way
    recs = [_rec((0.7, 0.2, 0.05, 0.05), (0.7, 0.2, 0.05, 0.05), j) for j in (0.0, 0.01, -0.01, 0.02)]
    assert cda.cd_fig3(recs, [True, False, True, False], P)[1].agrees == "partly"
    # the paper's opposite in both groups: IG puts more on irrelevant tokens, IG more on noise than FR
    recs = [_rec((0.05, 0.05, 0.7, 0.2), (0.2, 0.2, 0.3, 0.3), j) for j in (0.0, 0.01, -0.01, 0.02)]
    verdict = cda.cd_fig3(recs, [True, True, False, False], P)[1]
    assert verdict.agrees == "no" and "0/4 claims hold beyond noise, 4 significant the other way" in verdict.note
    # within noise: per-sample gaps of mean 0 (IG critical = supporting + interference = irrelevant + d)
    recs = []
    for d in (0.1, -0.1, 0.05, -0.05):
        ig = {"supporting": 0.2, "interference": 0.1 + d, "irrelevant": 0.3, "low_frequency": 0.4 - d}
        recs.append({"ig_share": ig, "fr_share": {**ig, "irrelevant": 0.3 - d, "low_frequency": 0.4},
                     "fr_top_share": ig, "grad_l1_share": ig, "top_heads_used": 12})
    correct = [True, True, False, False]
    # correct: IG gaps d = +0.1, -0.1 (mean 0, SE 0.1); FR noise - IG noise = (0.7 - d) - (0.7 - d) = 0: all tie
    rep = cda.cd_fig3(recs, correct, P)[1]
    assert rep.agrees == "tie within noise" and "0/4 claims hold beyond noise, 4 tied" in rep.note


def _manual(crit, irr):
    """One manual-denoising record per (critical after, irrelevant after), every type 0.01 before."""
    before = {"supporting": 0.01, "interference": 0.01, "irrelevant": 0.01, "low_frequency": 0.01}
    return [{"before": before, "after": {**before, "supporting": c, "interference": c, "irrelevant": i},
             "noise_tokens": 5, "context_tokens": 10} for c, i in zip(crit, irr)]


def test_fig4_ratio_and_headline():
    manual = _manual((0.1, 0.11, 0.09), (0.008, 0.0085, 0.0075))
    data, rep = cda.cd_fig4(manual, P, step=10.0)
    assert data["supporting"]["ratio"][0] == pytest.approx(10.0)
    # critical ratios 10, 11, 9: mean 10, SE 1 / sqrt(3); irrelevant 0.8, 0.85, 0.75: 0.8 +- 0.029
    assert rep.agrees == "yes" and "critical: after / before > 1 (unchanged)" in rep.note
    assert f"gap {10.0 - 1:+.4g} +- {se_of([10, 11, 9], [1, 1, 1]):.2g}" in rep.note
    assert "paper's x10 (magnitude not tested)" in rep.note
    # attention on critical tokens falls, on irrelevant ones rises: the paper's opposite
    rep = cda.cd_fig4(_manual((0.005, 0.0051, 0.0049), (0.02, 0.021, 0.019)), P, step=10.0)[1]
    assert rep.agrees == "no"
    # ratios 1.1, 0.9, 1.0 (mean 1, SE 0.058) and 0.9, 1.1, 1.0: no change beyond noise
    rep = cda.cd_fig4(_manual((0.011, 0.009, 0.010), (0.009, 0.011, 0.010)), P, step=10.0)[1]
    assert rep.agrees == "tie within noise"
    # the critical claim holds, the irrelevant one ties (ratio exactly 1: gap 0)
    assert cda.cd_fig4(_manual((0.1, 0.11, 0.09), (0.01,) * 3), P, step=10.0)[1].agrees == "partly"


def _corr_records(pairs):
    """Records of (IG per token, grad per token) pairs, four context types cycling."""
    recs = [{"ig_token": list(ig), "grad_token": list(g)} for ig, g in pairs]
    types = [[("supporting", "interference", "irrelevant", "low_frequency")[i % 4] for i in range(len(g))]
             for _, g in pairs]
    return recs, types


def test_fig5_correlation_pooled_over_context_tokens():
    rng = np.random.default_rng(0)
    recs, types = [], []
    for _ in range(3):
        g = rng.random(12)
        recs.append({"ig_token": list(2 * g + 0.01 * rng.random(12)), "grad_token": list(g)})
        types.append(["prompt", "supporting", "interference", "irrelevant"] * 3)
    _, rep = cda.cd_fig5(recs, types, P)
    last = rep.tables[0]["rows"][-1]
    assert last["tokens"] == 27 and last["Pearson r (within type)"] > 0.99
    assert rep.agrees == "yes" and rep.note.startswith("headline: 1/1 claims hold beyond noise")
    assert "type means ordered alike by IG and the gradient norm" in rep.note


def test_fig5_says_no_for_a_negative_and_tie_for_no_correlation():
    up, down = (1.0, 2.0, 3.0, 4.0), (4.0, 3.0, 2.0, 1.0)
    recs, types = _corr_records([(up, [5 - x + 0.1 * k for x in up]) for k in range(4)])
    assert cda.cd_fig5(recs, types, P)[1].agrees == "no"
    # one sample with r = +1, one with r = -1 on the same x: pooled r exactly 0, the bootstrap SE > 0
    recs, types = _corr_records([(up, up), (up, down)])
    _, rep = cda.cd_fig5(recs, types, P)
    se = cda.pearson_bootstrap_se(recs, types)
    assert rep.agrees == "tie within noise" and se > 0.1 and f"gap +0 +- {se:.2g}" in rep.note
    assert cda.pearson_bootstrap_se(recs[:1], types[:1]) is None  # one sample: no standard error
    assert "n/a (fewer than two samples" in cda.type_order(recs[:1], types[:1])
    # type means: IG (x) and grad (y) per type over both samples; type k's mean IG is x[k]; grad is 2.5 for all
    assert "on 0 of the 0 type pairs that both order" in rep.note


def _detect(crit, irr):
    """A detector's shares: critical ``crit`` split 2:1 over supporting / interference, irrelevant ``irr``."""
    return {"supporting": 2 * crit / 3, "interference": crit / 3, "irrelevant": irr, "low_frequency": 1 - crit - irr}


def test_detected_shares_and_fig7():
    types = ["prompt", "supporting", "irrelevant", "irrelevant", "interference", "low_frequency"]
    assert detected_shares(np.array([9, 5, 1, 4, 3, 0.0]), types, 2) == {
        "supporting": 0.5, "interference": 0.0, "irrelevant": 0.5, "low_frequency": 0.0}
    jitter = (0.0, 0.02, -0.02, 0.01)
    recs = [{"detect_attention": _detect(0.3 + j, 0.6), "detect_gradient": _detect(0.8 + j, 0.1 + j),
             "detect_longppl": _detect(0.4, 0.3 + j)} for j in jitter]
    data, rep = cda.cd_fig7(recs, P, evaluator="x")
    assert set(data) == {"attention", "gradient", "longppl"} and rep.agrees == "yes"
    # gradient - attention critical: 0.5 in every sample (SE 0); gradient - LongPPL: 0.4 + j (mean 0.4025)
    assert f"gap {0.4025:+.4g} +- {se_of([0.8 + j for j in jitter], [0.4] * 4):.2g}" in rep.note
    assert "gradient - LongPPL irrelevant share -0.200 ± 0.000" in rep.note  # shown, not deciding
    # without LongPPL's detector its claim is untested: the other two hold -> partly
    two = [{k: v for k, v in r.items() if k != "detect_longppl"} for r in recs]
    rep = cda.cd_fig7(two, P, evaluator="x")[1]
    assert rep.agrees == "partly" and "longppl: critical (share of the top-k): untested (an arm is missing)" in rep.note
    # the gradient finds the fewest critical and the most irrelevant tokens: the paper's opposite
    bad = [{"detect_attention": _detect(0.6 + j, 0.2), "detect_gradient": _detect(0.2 + j, 0.7 + j),
            "detect_longppl": _detect(0.5, 0.1 + j)} for j in jitter]
    assert cda.cd_fig7(bad, P, evaluator="x")[1].agrees == "no"
    # every detector within noise of the others: per-sample gaps +-0.1, +-0.05 (mean 0)
    same = [{"detect_attention": _detect(0.5, 0.3), "detect_gradient": _detect(0.5 + d, 0.3 - d),
             "detect_longppl": _detect(0.5, 0.3)} for d in (0.1, -0.1, 0.05, -0.05)]
    assert cda.cd_fig7(same, P, evaluator="x")[1].agrees == "tie within noise"


def _sweep(gains, emphasis=None, se=0.01):
    """CD-Fig8 rows at lr 1, 10, 100 from per-sample gains (lists per lr) and emphasis gains."""
    rows = []
    for k, (lr, g) in enumerate(zip((1.0, 10.0, 100.0), gains)):
        r = {"lr": lr, "gain": float(np.mean(g)), "gain_se": se, "gain_samples": list(g), "before": 0.1,
             "after_denoising": 0.1 * (1 + float(np.mean(g))), "after_emphasizing": 0.1, "irrelevant_before": 0.01,
             "irrelevant_after_denoising": 0.01, "noise_fraction": 0.7}
        if emphasis is not None:
            e = emphasis[k]
            r.update(emphasis_gain=float(np.mean(e)), emphasis_gain_se=se, emphasis_gain_samples=list(e))
        rows.append(r)
    return rows


def test_fig8_headline():
    up = ([0.01, 0.02, 0.0], [0.2, 0.25, 0.15], [0.4, 0.5, 0.45])
    emph = ([0.1, 0.12, 0.08],) * 3
    rep = cde.cd_fig8(_sweep(up, emph), P)
    assert rep.agrees == "yes" and rep.note.startswith("headline: 3/3 claims hold beyond noise")
    # the mean over lrs of each sample's gains: (0.61, 0.77, 0.60) / 3, SE over the three samples
    means = np.mean(up, axis=0)
    assert f"gap {means.mean():+.4g} +- {se_of(means, [0, 0, 0]):.2g}" in rep.note
    assert f"gap {0.45 - 0.01:+.4g} +- {se_of(up[2], up[0]):.2g}" in rep.note  # largest vs smallest lr, paired
    # attention on critical tokens falls more the larger the lr, and the emphasizing step lowers it: the opposite
    down = ([-0.01, -0.02, -0.015], [-0.2, -0.25, -0.15], [-0.4, -0.5, -0.45])
    rep = cde.cd_fig8(_sweep(down, tuple([-0.1, -0.12, -0.08] for _ in range(3))), P)
    assert rep.agrees == "no" and "3 significant the other way" in rep.note
    # no measurable change (old records: no per-sample values, no emphasis): gains 1e-5 +- 0.001 tie
    flat = [{k: v for k, v in r.items() if k != "gain_samples"} for r in _sweep(([1e-5] * 3,) * 3, se=0.001)]
    rep = cde.cd_fig8(flat, P)
    assert rep.agrees == "tie within noise" and "untested" in rep.note
    assert "denoising mean of the rows' SEs (upper bound)" in rep.note
    # SE of the ends without per-sample values: unpaired sqrt(se1^2 + se2^2)
    assert f"gap +0 +- {math.hypot(0.001, 0.001):.2g}" in rep.note


def test_fig3_and_fig8_captions_say_what_their_figures_rest_on():
    # not the suite's grid (samples x depths per cell): the analysis prompts, split into right and wrong answers
    recs = [_rec((0.7, 0.2, 0.05, 0.05), (0.2, 0.1, 0.6, 0.1), j) for j in (0.0, 0.01, -0.01, 0.02, 0.03)]
    cap = cda.cd_fig3(recs, [True, True, True, False, False], P)[1].tables[0]["caption"]
    assert "5 fresh prompts of" in cap and "(3 right, 2 wrong)" in cap and "depths per cell" not in cap
    cap = cde.cd_fig8(_sweep(([0.01, 0.02, 0.0],) * 3), P).tables[0]["caption"]
    assert "mean over 3 samples" in cap and "3 fresh prompts" in cap and "depths per cell" not in cap
    assert f"The {P.name} profile's beta" in cap and "error bars are each mean's SE" in cap


def test_fig8_table_carries_every_se_its_figure_draws():
    rows = _sweep(([0.01, 0.02, 0.0],) * 3, emphasis=([0.1, 0.12, 0.08],) * 3, se=0.02)
    for r in rows:
        r.update(before_se=0.003, after_denoising_se=0.004, after_emphasizing_se=0.005)
    out = cde.cd_fig8(rows, P).tables[0]["rows"]
    assert out[0]["gain after emphasizing (mean ± SE over samples)"] == "0.100 ± 0.020"
    assert [out[0][f"{c} SE (unpaired)"] for c in ("before", "after denoising", "after emphasizing")] == \
           [0.003, 0.004, 0.005]
    out = cde.cd_fig8(_sweep(([0.01, 0.02, 0.0],) * 3), P).tables[0]["rows"]  # older records: no such values
    assert out[0]["gain after emphasizing (mean ± SE over samples)"] == "n/a" and out[0]["before SE (unpaired)"] == ""


def _curve(acc, ig, se=0.01):
    """CD-Fig10 records of CE and CDT at steps 100 and 600: (first, last) accuracy and IG share per objective."""
    return {o: {s: {"accuracy": a, "accuracy_se": se, "ig_critical": (i, se), "attention_critical": (i, se)}
                for s, a, i in zip((100, 600), acc[o], ig[o])} for o in ("ce", "cdt")}


def test_fig10_headline_is_cdt_against_ce_at_the_last_checkpoint():
    rising = {"ce": (0.2, 0.5), "cdt": (0.2, 0.8)}
    data, rep = cde.cd_fig10(_curve(rising, rising), P)
    assert rep.agrees == "yes" and rep.note.startswith("headline: 3/3 claims hold beyond noise")
    assert f"gap {0.3:+.4g} +- {math.hypot(0.01, 0.01):.2g}" in rep.note
    assert "ce step 100 -> 600: accuracy +0.300 ± 0.014" in rep.note  # rising is shown, never decides
    assert "training-seed spread is not measured" in rep.note
    # both rise, CE more: rising alone is not the claim
    both = {"ce": (0.2, 0.8), "cdt": (0.2, 0.5)}
    assert cde.cd_fig10(_curve(both, both), P)[1].agrees == "no"
    # CDT 0.02 ahead with SEs 0.05 each (gap 0.28 SE): within noise
    close = {"ce": (0.2, 0.60), "cdt": (0.2, 0.62)}
    assert cde.cd_fig10(_curve(close, close, se=0.05), P)[1].agrees == "tie within noise"


def test_mem_headline():
    mem = [{"method": "ours", "length": n, "status": "ok", "peak_mib": 1, "seconds": 1} for n in (1024, 32768)] + \
          [{"method": "naive", "length": 1024, "status": "ok", "peak_mib": 1, "seconds": 1},
           {"method": "naive", "length": 2048, "status": "out of memory (> 1 MiB)", "peak_mib": 2, "seconds": None}]
    rep = cde.cd_mem(mem, P)
    assert rep.agrees == "yes" and rep.ours == "ours up to 32768 tokens, naive up to 1024"
    assert "gap +3.174e+04 +- 0" in rep.note and "goal: ours at >= 32768 tokens within the cap: met" in rep.note
    swapped = [{**r, "method": {"ours": "naive", "naive": "ours"}[r["method"]]} for r in mem]
    assert cde.cd_mem(swapped, P).agrees == "no"  # the direct score reaches further: the paper's opposite
    both = [r for r in mem if r["method"] == "ours"] + [{**r, "method": "naive"} for r in mem if r["method"] == "ours"]
    assert cde.cd_mem(both, P).agrees == "tie within noise"  # both reach the sweep's end: no difference seen
    assert cde.cd_mem([r for r in mem if r["method"] == "ours"], P).agrees == "n/a"  # naive not run


def _maps(before, after):
    """CD-Fig14 maps: per prompt, the share per layer (two layers), before and after."""
    return {"rp_standard": {"last_row_critical": before, "map": []}, "cdt": {"last_row_critical": after, "map": []}}


def test_fig14_headline_is_the_mean_over_layers():
    before, after = [[0.1, 0.2], [0.1, 0.2], [0.12, 0.2]], [[0.3, 0.2], [0.31, 0.2], [0.29, 0.2]]
    rep = cde.cd_fig14(_maps(before, after), P)
    assert rep.agrees == "yes" and rep.tables[0]["rows"][1]["after - before (paired)"].startswith("0.000")
    # per prompt, mean over layers: before (0.15, 0.15, 0.16), after (0.25, 0.255, 0.245)
    d = se_of([0.25, 0.255, 0.245], [0.15, 0.15, 0.16])
    assert f"gap {0.25 - 0.46 / 3:+.4g} +- {d:.2g}" in rep.note
    assert "one checkpoint per arm" in rep.note  # no replicates: prompts only, and it says so
    assert cde.cd_fig14(_maps(after, before), P).agrees == "no"
    # one layer up by 0.006, the other down by as much: the mean over layers does not move
    mixed_b, mixed_a = [[0.1, 0.2], [0.1, 0.21], [0.11, 0.2]], [[0.106, 0.194], [0.106, 0.204], [0.116, 0.194]]
    assert cde.cd_fig14(_maps(mixed_b, mixed_a), P).agrees == "tie within noise"
    assert cde.cd_fig14({}, P).agrees == "n/a"


def test_fig14_widens_by_the_training_seed_spread():
    before, after = [[0.1, 0.2], [0.1, 0.2], [0.12, 0.2]], [[0.3, 0.2], [0.31, 0.2], [0.29, 0.2]]
    maps = _maps(before, after)
    lower = [[x - 0.1 for x in row] for row in after]  # a second CDT seed 0.1 lower
    maps["cdt@seed1"] = {"last_row_critical": lower, "map": []}
    rep = cde.cd_fig14(maps, P)
    # after averaged over the seeds per prompt: (0.2, 0.205, 0.195); seed values 0.25 and 0.15 (spread s)
    eval_se = se_of([0.2, 0.205, 0.195], [0.15, 0.15, 0.16])
    s = float(np.std([0.25, 0.15], ddof=1))
    wide = math.sqrt(eval_se ** 2 + s ** 2 / 2 + s ** 2)  # CE has one seed: the pooled spread, s^2 / 1
    assert f"gap {0.6 / 3 - 0.46 / 3:+.4g} +- {wide:.2g}" in rep.note
    assert rep.agrees == "tie within noise"  # 0.047 over 0.087: the seeds' spread swallows the gap
    assert "widened by the training-seed spread (cdt 0.0707 over 2 seeds" in rep.note
    assert abs(0.6 / 3 - 0.46 / 3) / eval_se > 2  # beyond 2 SE over prompts alone
    assert rep.tables[0]["rows"][0]["cdt"].startswith("0.250")  # layer 0: (0.3, 0.31, 0.29) and 0.1 lower, averaged


def test_taskb_from_the_generator(small_tokenizer):
    from repro.analysis.typed_samples import construction

    rows = [construction(small_tokenizer, h, L, 4) for h in (2, 4) for L in (64, 512)]
    assert rows[0]["prompts"] == 0 and rows[0]["status"].startswith("too short")
    built = [r for r in rows if r["prompts"]]
    assert {(r["hops"], r["length"]) for r in built} == {(2, 512), (4, 512)}
    for r in built:
        assert r["hops"] <= r["interference_min"] <= r["interference_max"] <= 2 * r["hops"]
        assert r["interference_after_last_min"] >= 1 and r["emoji"] == 3
        assert r["tokens"] <= 512
    rep = cda.cd_taskb(rows, P)
    assert rep.agrees == "yes" and "2 too short" in rep.ours
    assert rep.note.startswith("headline: 2/2 claims hold beyond noise")


def _cell(hops, lo, hi, after):
    return {"hops": hops, "length": 512, "prompts": 4, "interference_min": lo, "interference_max": hi,
            "interference_after_last_min": after}


def test_taskb_headline_counts_cells_breaking_the_rules():
    ok = [_cell(2, 2, 4, 1), _cell(3, 3, 5, 2)]
    assert cda.cd_taskb(ok, P).agrees == "yes"
    # a count outside 1-2x in one cell, no interference after the last supporting fact in another: both broken
    rep = cda.cd_taskb([_cell(2, 1, 4, 1), _cell(3, 3, 5, 0)], P)
    assert rep.agrees == "no" and "0/2 claims hold beyond noise, 2 significant the other way" in rep.note
    assert "gap +1 +- 0" in rep.note  # exact counts: one cell each, standard error 0
    assert cda.cd_taskb([_cell(2, 2, 5, 1), _cell(3, 3, 5, 1)], P).agrees == "partly"  # 5 > 2 x 2 only
    # exact counts cannot tie: a census has no noise (a gap of 0 holds, any other is significant)
    assert cda.cd_taskb([{"hops": 4, "length": 64, "prompts": 0, "status": "too short"}], P).agrees == "n/a"



def test_captions_other_than_cd_tab2_say_what_their_own_figures_rest_on():
    # the suite's grid (samples x depths per cell) is what CD-Tab2 rests on; each analysis rests on its own prompts
    from repro.reports.common import model_note

    up = (1.0, 2.0, 3.0, 4.0)
    jitter = (0.0, 0.02, -0.02, 0.01)
    fig7 = [{"detect_attention": _detect(0.3 + j, 0.6), "detect_gradient": _detect(0.8 + j, 0.1 + j),
             "detect_longppl": _detect(0.4, 0.3 + j)} for j in jitter]
    before, after = [[0.1, 0.2], [0.1, 0.2], [0.12, 0.2]], [[0.3, 0.2], [0.31, 0.2], [0.29, 0.2]]
    mem = [{"method": m, "length": n, "status": "ok", "peak_mib": 1, "seconds": 1}
           for m in ("ours", "naive") for n in (1024, 2048)]
    reps = {
        "CD-TaskB": cda.cd_taskb([_cell(2, 2, 4, 1)], P),
        "CD-Fig4": cda.cd_fig4(_manual((0.02, 0.021, 0.019), (0.005, 0.0051, 0.0049)), P, step=10.0)[1],
        "CD-Fig5": cda.cd_fig5(*_corr_records([(up, up), (up, up)]), P)[1],
        "CD-Fig7": cda.cd_fig7(fig7, P, evaluator="x")[1],
        "CD-Fig10": cde.cd_fig10(_curve({"ce": (0.5, 0.6), "cdt": (0.5, 0.7)}, {"ce": (0.5, 0.6), "cdt": (0.5, 0.7)}),
                                 P)[1],
        "CD-Fig14": cde.cd_fig14(_maps(before, after), P),
        "CD-Mem": cde.cd_mem(mem, P),
    }
    for target, rep in reps.items():
        cap = rep.tables[0]["caption"]
        assert "depths per cell" not in cap and "synthetic tasks," not in cap, (target, cap)
        assert model_note(P) in cap, (target, cap)
    for target, n in (("CD-Fig4", 3), ("CD-Fig5", 2), ("CD-Fig7", 4)):
        assert f"{n} fresh prompts of {P.cdt.task} at the base window ({P.base.window} tokens)" in \
            reps[target].tables[0]["caption"], target
    assert f"prompts at the base window ({P.base.window} tokens)" in reps["CD-Fig10"].tables[0]["caption"]
    assert f"{P.cdt.map_samples} prompts" in reps["CD-Fig14"].tables[0]["caption"]
    assert "one random token sequence per length" in reps["CD-Mem"].tables[0]["caption"]
    assert "every listed prompt is counted" in reps["CD-TaskB"].tables[0]["caption"]
