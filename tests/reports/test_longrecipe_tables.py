"""LongRecipe tables from hand-built records: exact numbers, paper columns, verdicts, cost ratios."""

import numpy as np
import pytest

from repro.profiles import get_profile
from repro.reports import longrecipe as lrr
from repro.reports import longrecipe_analysis as lra
from repro.tasks.summary import NIAH_M_TASKS, NIAH_TASKS, RULER_TASKS

P = get_profile("tiny")  # base window 256, target 1024, YaRN 2x -> 2048


def rec(task_scores, length):
    rows = [{"task": t, "length": length, "depth": 0.5, "seed": i, "eval_seed": 0, "n_tokens": length,
             "prediction": "", "references": ["x"], "score": float(s)}
            for t, s in task_scores.items() for i in range(2)]
    return {"results": rows, "skipped": [], "seconds": 0.0}


def arm(niah_m, other, short=1.0, yarn=None):
    scores = {t: (niah_m if t in NIAH_M_TASKS else other) for t in RULER_TASKS}
    parts = {"ruler": rec(scores, 1024), "short": rec({t: short for t in NIAH_TASKS}, 256)}
    if yarn is not None:
        parts["yarn"] = rec({t: yarn for t in RULER_TASKS}, 2048)
    return parts


def test_lr_tab1_numbers_columns_and_order_verdict():
    base_short = rec({t: (1.0 if t == "niah_single_1" else 0.25) for t in NIAH_TASKS}, 256)
    suite = {"base": {"short": base_short}, "flt": arm(0.8, 0.5, yarn=0.25), "rpes": arm(0.5, 0.5, yarn=0.0),
             "pose": arm(0.4, 0.5, yarn=0.0), "longrecipe": arm(0.6, 0.5, 0.75, yarn=0.5)}
    lm = {n: {"loss": v} for n, v in [("base", 2.0), ("flt", 2.5), ("rpes", 2.6), ("pose", 2.4), ("longrecipe", 2.3)]}
    rep = lrr.lr_tab1(suite, lm, P)
    rows = {r["method"]: r for r in rep.tables[0]["rows"]}
    assert list(rows) == ["Base model", "FLT", "RPES", "PoSE", "LongRecipe"]
    lr = rows["LongRecipe"]
    assert lr["NIAH(M) @1024"] == 60.0
    assert lr["RULER @1024"] == round(100 * (5 * 0.6 + 8 * 0.5) / 13, 1) == 53.8
    assert lr["NIAH(M) SE"] == 0.0  # every prompt of a task scores the same here (tests/reports/test_noise.py: SEs)
    assert "6/6 gaps significant (paired bootstrap over prompts, 2 SE; training-seed spread not measured)" in rep.note
    assert "Every arm has one training seed" in rep.tables[0]["caption"]
    assert lr["base-doable @1024"] == 50.0  # the base does only S-1 (1.0 >= 0.3; the rest 0.25)
    assert "base-doable = mean over the tasks the base model does at its window (niah_single_1)" in \
        rep.tables[0]["caption"]
    assert lr["RULER YaRN 2x @2048"] == 50.0 and lr["NIAH @256 (stand-in)"] == 75.0
    assert lr["LM loss @256 (stand-in, lower is better)"] == 2.3
    assert lr["paper NIAH(M) / RULER / MMLU (Llama3-8B-I 80K)"] == "78.9 / 74.5 / 63.0"
    assert rows["Base model"]["NIAH(M) @1024"] == "n/a" and rows["Base model"]["NIAH @256 (stand-in)"] == 34.4
    # the headline: LongRecipe > PoSE on NIAH(M) (60 vs 40) and on RULER (7/13 vs 6/13), every prompt alike (SE 0)
    assert rep.agrees == "yes" and rep.note.startswith("headline: 2/2 claims hold beyond noise")
    # the full order (flt 80 > longrecipe 60 > rpes 50 > pose 40, the paper's) is context after the headline
    assert rep.note.index("Not deciding (context): full order, NIAH(M): order of flt, rpes, pose, longrecipe") > 0
    assert rep.note.count("6/6 significant pairs") == 2 and "RPES" not in rep.note.split("Not deciding")[0]
    suite["pose"] = arm(0.9, 0.5, yarn=0.0)  # PoSE above LongRecipe on both metrics: the headline fails
    assert lrr.lr_tab1(suite, lm, P).agrees == "no"


def test_lr_tab2_stages_and_verdict():
    suite = {n: {"short": arm(0, 0, s)["short"]} for n, s in
             [("pose", 0.5), ("pose+replay", 0.75), ("pose+merge", 1.0)]}
    lm = {"pose": {"loss": 3.0}, "pose+replay": {"loss": 2.5}, "pose+merge": {"loss": 2.7}, "base": {"loss": 2.0}}
    rep = lrr.lr_tab2(suite, lm, P)
    (row,) = rep.tables[0]["rows"]
    assert row["LM loss @256 before replay"] == 3.0 and row["LM loss @256 after merging"] == 2.7
    assert row["NIAH @256 after replay"] == 75.0
    assert row["paper MMLU before / after replay / after merging"] == "58.1 / 60.7 / 62.6"
    # the headline is LongRecipe's stages: PoSE's alone leave it untested
    assert rep.agrees == "n/a" and rep.note.startswith("headline: 0/4 claims hold beyond noise, 4 untested")
    assert ("LM loss falls on 1/2 significant steps (no per-window losses recorded; one training seed per stage "
            "(2 SE); untested steps taken as they are)") in rep.note  # replay helped, merging did not
    assert "NIAH @256 rises on 2/2 significant steps; 2/2 gaps significant (paired bootstrap" in rep.note
    assert "Base model LM loss: 2.0" in rep.tables[0]["caption"]


def test_lr_tab3_and_tab4():
    suite = {"pose": arm(0.2, 0.1), "longrecipe_wo_t": arm(0.3, 0.1), "longrecipe_random_t": arm(0.25, 0.1),
             "longrecipe": arm(0.5, 0.1), "flt": arm(0.7, 0.1), "longrecipe_r10": arm(0.1, 0.1),
             "longrecipe_r20": arm(0.2, 0.1), "longrecipe_r40": arm(0.6, 0.1)}
    rep3 = lrr.lr_tab3(suite, P)
    assert [r["method"] for r in rep3.tables[0]["rows"]] == ["PoSE", "LongRecipe (w/o T)", "LongRecipe (Random T)",
                                                            "LongRecipe"]
    assert ("order of pose, longrecipe_wo_t, longrecipe_random_t, longrecipe as in the paper on 6/6 significant "
            "pairs") in rep3.note
    # headline: LongRecipe > Random T (50 vs 25) and w/o T > PoSE (30 vs 20) on NIAH(M); RULER the same gaps / 13
    assert rep3.agrees == "yes" and rep3.note.startswith("headline: 4/4 claims hold beyond noise")
    rep4 = lrr.lr_tab4(suite, P)
    rows = rep4.tables[0]["rows"]
    assert [r["method"] for r in rows] == ["10%", "20%", "30%", "40%", "100% (FLT)"]
    assert rows[3]["NIAH(M) @1024"] == 60.0 and rows[3]["paper NIAH(M) / RULER (Llama3-8B-I 80K)"] == "72.0 / 71.0"
    # headline: 30% > 40% fails (50 < 60, every prompt alike: SE 0) and 30% ~ FLT fails (50 vs 70): no
    assert rep4.agrees == "no" and rep4.note.startswith("headline: 0/4 claims hold beyond noise, 4 significant")


def test_cost_rows_are_ratios_to_flt():
    runs = {"flt": {"seconds_per_step": 2.0, "tokens_per_step": 1000.0, "flops_per_step": 4e9},
            "longrecipe": {"seconds_per_step": 0.5, "tokens_per_step": 300.0, "flops_per_step": 1e9}}
    lr = lra.cost_rows(runs)[1]
    assert lr["time vs FLT"] == 0.25 and lr["tokens vs FLT"] == 0.3 and lr["FLOPs vs FLT"] == 0.25
    assert lr["GFLOPs/step"] == 1.0
    assert lr["wall vs FLT (compute + data)"] == 0.25 and lr["data seconds/step"] == "-"
    runs["flt"]["data_seconds_per_step"], runs["longrecipe"]["data_seconds_per_step"] = 0.5, 0.1
    runs["longrecipe"]["prepare_seconds_per_step"] = 0.3
    lr = lra.cost_rows(runs)[1]
    assert lr["wall vs FLT (compute + data)"] == 0.24  # (0.5 + 0.1) / (2.0 + 0.5)
    assert lr["preparation seconds/step (before training)"] == 0.3


def test_lr_tab6_shows_ours_beside_the_paper():
    rep = lra.lr_tab6(P, 3600.0, 491_200)
    rows = {r["setting"]: r for r in rep.tables[0]["rows"]}
    assert rows["training sample length"]["ours (tiny)"] == "307 (30%)"
    assert rows["training sample length"]["paper (Llama3-8B 80K)"] == "24K (30%)"
    assert rows["total tokens"]["ours (tiny)"] == "491,200" and rows["hours to train"]["ours (tiny)"] == "1.000"


def test_lr_fig3_verdict_from_tags():
    from repro.analysis.tokens import TokenAnalysis

    class Tok:
        def decode(self, ids):
            return f"t{ids[0]}"

    samples = np.array([[0, 5, 6, 7], [0, 5, 7, 6]])
    selected = np.array([[True, False, False], [True, False, True]])
    tags = [["NUM", "NOUN", "DET"], ["NUM", "DET", "NOUN"]]
    res = TokenAnalysis(samples=samples, changes=np.ones((2, 3), np.float32), selected=selected,
                        delta=np.array([0, 0, 0, 0, 0, 4.0, 1.0, 1.0]), counts=np.array([0, 0, 0, 0, 0, 2, 2, 2]),
                        anchors=np.array([5]), tags=tags)
    p = P.override(longrecipe={"pos_bins": 1})
    curves, rep = lra.lr_fig3(res, Tok(), p)
    pos = {r["POS"]: r for r in rep.tables[0]["rows"]}
    assert pos["NUM"]["share among top tokens"] == pytest.approx(2 / 3, abs=1e-4)
    assert pos["NUM"]["share among all tokens"] == pytest.approx(2 / 6, abs=1e-4) and pos["NUM"]["enrichment"] == 2.0
    assert rep.agrees == "yes"
    (anchor,) = rep.tables[1]["rows"]
    assert anchor["token"] == "'t5'" and anchor["POS (majority)"] == "NUM" and anchor["share in top tokens"] == 1.0


def test_lr_tab2_shows_the_harness_benchmarks_when_the_paper_profile_ran_them():
    import dataclasses

    from repro.tasks.summary import summarize

    p = dataclasses.replace(P, longrecipe=dataclasses.replace(P.longrecipe, general_benchmarks=("mmlu", "gsm8k")))
    suite = {n: {"short": arm(0, 0, s)["short"]} for n, s in
             [("pose", 0.5), ("pose+replay", 0.75), ("pose+merge", 1.0)]}
    lm = {"pose": {"loss": 3.0}, "pose+replay": {"loss": 2.5}, "pose+merge": {"loss": 2.7}}

    def record(scores):
        return {"cells": summarize([{"task": "mmlu_a", "target_length": None, "score": s} for s in scores]),
                "groups": {"mmlu": ["mmlu_a"], "gsm8k": ["gsm8k"]}}

    general = {"pose": record([0, 1, 0, 0]), "pose+replay": record([1, 1, 0, 0])}
    (row,) = lrr.lr_tab2(suite, lm, p, general).tables[0]["rows"]
    # 1/4 correct: 25.0 ± sqrt(.25 * .75 / 4); merging not run; GSM8K not in the records
    assert row["mmlu before / after replay / after merging"] == "25.0 ± 21.7 / 50.0 ± 25.0 / n/a"
    assert row["gsm8k before / after replay / after merging"] == "n/a / n/a / n/a"
    assert "mmlu, gsm8k: lm-evaluation-harness's own tasks" in lrr.lr_tab2(suite, lm, p, general).tables[0]["caption"]
    assert "mmlu before / after replay / after merging" not in lrr.lr_tab2(suite, lm, P).tables[0]["rows"][0]
