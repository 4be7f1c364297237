"""CDT's analysis tables from hand-built records: the verdicts read the numbers they claim to."""

import math

import numpy as np
import pytest

from repro.analysis.cdt_scores import detected_shares
from repro.profiles import get_profile
from repro.reports import cdt_analysis as cda

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


def test_fig3_verdict_needs_both_gaps():
    recs = [_rec((0.7, 0.2, 0.05, 0.05), (0.2, 0.1, 0.6, 0.1), j) for j in (0.0, 0.01, -0.01, 0.02)]
    data, rep = cda.cd_fig3(recs, [True, True, False, False], P)
    assert rep.agrees == "yes"
    assert data["correct"]["IG (Eq. 1)"]["supporting"][0] == pytest.approx(0.705)
    assert {r["answers"] for r in rep.tables[0]["rows"]} == {"correct", "wrong"}
    # FR no heavier on irrelevant tokens than IG: only one gap holds
    recs = [_rec((0.7, 0.2, 0.05, 0.05), (0.7, 0.2, 0.05, 0.05), j) for j in (0.0, 0.01, -0.01, 0.02)]
    assert cda.cd_fig3(recs, [True, False, True, False], P)[1].agrees == "partly"


def test_fig4_ratio_and_verdict():
    before = {"supporting": 0.01, "interference": 0.01, "irrelevant": 0.01, "low_frequency": 0.01}
    manual = [{"before": before, "after": {**before, "supporting": 0.1 * k, "interference": 0.1 * k},
               "noise_tokens": 5, "context_tokens": 10} for k in (1.0, 1.1, 0.9)]
    data, rep = cda.cd_fig4(manual, P, step=10.0)
    assert data["supporting"]["ratio"][0] == pytest.approx(10.0)
    assert rep.agrees == "yes"
    lower = [{**m, "after": {**before, "supporting": 0.005, "interference": 0.005}} for m in manual]
    assert cda.cd_fig4(lower, P, step=10.0)[1].agrees == "no"


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
    assert rep.agrees == "yes"


def test_detected_shares_and_fig7():
    types = ["prompt", "supporting", "irrelevant", "irrelevant", "interference", "low_frequency"]
    assert detected_shares(np.array([9, 5, 1, 4, 3, 0.0]), types, 2) == {
        "supporting": 0.5, "interference": 0.0, "irrelevant": 0.5, "low_frequency": 0.0}
    recs = [{"detect_attention": {"supporting": 0.2, "interference": 0.1, "irrelevant": 0.6, "low_frequency": 0.1},
             "detect_gradient": {"supporting": 0.5, "interference": 0.3, "irrelevant": 0.1, "low_frequency": 0.1}}
            for _ in range(2)]
    data, rep = cda.cd_fig7(recs, P, evaluator="x")
    assert set(data) == {"attention", "gradient"} and rep.agrees == "yes"


def test_fig8_fig10_mem_fig14():
    rows = [{"lr": lr, "gain": -d * 10, "gain_se": 0.001, "before": 0.1, "after_denoising": 0.1 - d,
             "after_emphasizing": 0.1, "irrelevant_before": 0.01,
             "irrelevant_after_denoising": 0.01, "noise_fraction": 0.7} for lr, d in ((1.0, 0.0), (10.0, 0.01))]
    assert cda.cd_fig8(rows, P).agrees == "no"  # attention on critical tokens falls: the paper's opposite
    flat = [{**r, "gain": 1e-5} for r in rows]
    assert cda.cd_fig8(flat, P).agrees == "no"  # no measurable change is not agreement
    up = [{**r, "gain": g} for r, g in zip(rows, (0.0, 0.2))]
    assert cda.cd_fig8(up, P).agrees == "yes"
    noisy = [{**r, "gain": g, "gain_se": 0.5} for r, g in zip(rows, (0.0, 0.2))]
    assert cda.cd_fig8(noisy, P).agrees == "no"  # within noise
    curve = {o: {s: {"accuracy": a, "accuracy_se": 0.01, "ig_critical": (a, 0.01), "attention_critical": (a, 0.01)}
                 for s, a in ((100, 0.2), (600, top))} for o, top in (("ce", 0.5), ("cdt", 0.8))}
    assert cda.cd_fig10(curve, P)[1].agrees == "yes"
    mem = [{"method": "ours", "length": n, "status": "ok", "peak_mib": 1, "seconds": 1} for n in (1024, 32768)] + \
          [{"method": "naive", "length": 1024, "status": "ok", "peak_mib": 1, "seconds": 1},
           {"method": "naive", "length": 2048, "status": "out of memory (> 1 MiB)", "peak_mib": 2, "seconds": None}]
    rep = cda.cd_mem(mem, P)
    assert rep.agrees == "yes" and rep.ours == "ours up to 32768 tokens, naive up to 1024"
    maps = {"rp_standard": {"last_row_critical": [[0.1, 0.2], [0.1, 0.2], [0.12, 0.2]], "map": []},
            "cdt": {"last_row_critical": [[0.3, 0.2], [0.31, 0.2], [0.29, 0.2]], "map": []}}
    rep = cda.cd_fig14(maps, P)
    assert rep.agrees == "yes" and rep.tables[0]["rows"][1]["after - before (paired)"].startswith("0.000")


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
