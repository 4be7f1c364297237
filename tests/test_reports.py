"""The evaluation tables from hand-built result rows: exact numbers, flags, n/a cells and verdicts."""

import pytest

from repro import reports
from repro.profiles import get_profile
from repro.tasks.summary import RULER_TASKS

P = get_profile("tiny")  # base window 256, target 1024, lengths 256/512/1024/2048, threshold 0.3


def rows(task, length, scores, eval_seed=0, depth=0.5):
    return [{"task": task, "length": length, "depth": depth, "seed": i, "eval_seed": eval_seed, "n_tokens": length,
             "prediction": "", "references": ["x"], "score": float(s)} for i, s in enumerate(scores)]


def record(results, skipped=()):
    return {"results": results, "skipped": [{"task": t, "length": L, "depth": 0.5, "eval_seed": 0, "minimum": m}
                                            for t, L, m in skipped], "seconds": 0.0}


# flt at the target: MK-1 1.0, MK-2 0.0, MK-3 0.5 (multikey 0.5), MV 1.0, MQ 0.0 -> NIAH(M) 0.5;
# every other RULER task 0.25 -> RULER-13 = (1 + 0 + 0.5 + 1 + 0 + 8 * 0.25) / 13 = 4.5 / 13
FLT_TARGET = {"niah_multikey_1": 1.0, "niah_multikey_2": 0.0, "niah_multikey_3": 0.5, "niah_multivalue": 1.0,
              "niah_multiquery": 0.0}


def make_suite(cwe_skipped_at_base_window=True):
    base_rows, flt_rows = [], []
    for t in RULER_TASKS:
        # base at its window: NIAH tasks 1.0 (doable), vt/fwe/qa 0.0 (not), cwe skipped
        if t == "cwe" and cwe_skipped_at_base_window:
            pass
        else:
            base_rows += rows(t, 256, [1.0, 1.0] if t.startswith("niah_") else [0.0, 0.0])
        base_rows += rows(t, 1024, [0.0, 0.0])
        flt_rows += rows(t, 1024, [FLT_TARGET.get(t, 0.25)] * 2)
        flt_rows += rows(t, 256, [1.0, 1.0] if t.startswith("niah_") else [0.5, 0.5])
    for h, (b, f) in zip(reports.MULTIHOP, [(1.0, 1.0), (0.0, 0.5), (0.0, 0.25)]):
        base_rows += rows(h, 256, [b]) + rows(h, 1024, [0.0])
        flt_rows += rows(h, 256, [f]) + rows(h, 1024, [f])
    for sp, v in zip(reports.POSITION_SPECS, (1.0, 0.5, 0.0, 0.5)):
        flt_rows += rows(sp, 1024, [v])
        base_rows += rows(sp, 1024, [0.0])
    skipped = [("cwe", 256, 300)] if cwe_skipped_at_base_window else []
    return {"base": {"suite": record(base_rows, skipped)}, "flt": {"suite": record(flt_rows)}}


def test_base_can_do_flags_and_na():
    can = reports.base_can_do(make_suite(), P)
    assert can["niah_single_1"] == {"acc": 1.0, "doable": True, "label": "yes (100.0)"}
    assert can["vt"] == {"acc": 0.0, "doable": False, "label": "no (0.0)"}
    assert can["cwe"] == {"acc": None, "doable": None, "label": "n/a (min length 300)"}
    assert can["niah_position:ordinal=first"]["label"] == "n/a (not evaluated)"
    assert reports.doable_ruler(make_suite(), P) == reports.NIAH_TASKS
    no_base = reports.base_can_do({"flt": make_suite()["flt"]}, P)
    assert no_base["vt"]["label"] == "n/a (no base checkpoint)"


def test_rp_tab1_2_per_task_flags_and_skipped_cells():
    suite = make_suite()
    suite["flt"]["suite"]["skipped"].append({"task": "fwe", "length": 512, "depth": 0.5, "eval_seed": 0,
                                             "minimum": 600})
    rep = reports.rp_tab1_2(suite, P)
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
    assert rep.agrees == "yes"


def test_skipped_cell_reads_min_length_not_zero():
    suite = make_suite()
    s = reports.Scores(suite["base"]["suite"])
    assert s.cell("cwe", 256) == "n/a (min length 300)"
    assert s.mean("cwe", 256) is None and s.average(RULER_TASKS, 256) is None
    assert s.cell("vt", 256) == 0.0


def test_cd_tab2_and_rp_tab14():
    rep = reports.cd_tab2(make_suite(), P)
    flag = rep.tables[0]["rows"][0]
    assert flag == {"model": "base can do it at its window", "length": 256, "2-hop": "yes (100.0)",
                    "3-hop": "no (0.0)", "4-hop": "no (0.0)"}
    flt_1024 = [r for r in rep.tables[0]["rows"] if r["model"] == "flt" and r["length"] == 1024][0]
    assert (flt_1024["2-hop"], flt_1024["3-hop"], flt_1024["4-hop"]) == (100.0, 50.0, 25.0)
    assert flt_1024["multi-hop mean"] == round(100 * 1.75 / 3, 1)
    assert flt_1024["paper RULER 32K/64K, BABILong avg"] == "+ CE: 36.01 / 13.82, 29.56"
    assert rep.agrees == "yes"  # flt > base, as CE 29.56 > base 13.00
    rep = reports.rp_tab14(make_suite(), P)
    flt = [r for r in rep.tables[0]["rows"] if r["model"] == "flt"][0]
    assert (flt["first"], flt["second"], flt["third"], flt["last"], flt["mean"]) == (100.0, 50.0, 0.0, 50.0, 50.0)
    assert flt["paper (64K NIAH-position)"] == "Standard 44.0"
    assert rep.agrees == "yes" and rep.ours == "base 0.0; flt 50.0"


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
    rep = reports.rp_tab15(suite, P)
    flt = [r for r in rep.tables[0]["rows"] if r["model"] == "flt"][0]
    # RULER-13 per seed: 4.5/13 = 0.34615, 0.2, 0.2 -> mean 0.24872, sample std 0.08437
    assert flt["RULER-13 mean (std) @1024"] == "24.9 (8.44)"
    # doable (8 NIAH tasks): 3.25/8 = 0.40625, 0.2, 0.2 -> mean 0.26875, std 0.11908
    assert flt["RULER-doable mean (std) @1024"] == "26.9 (11.91)"
    assert flt["seeds"] == 3
    assert rep.agrees == "partly"  # std 11.9 > 0.17 but below the 26.9-point gap to base (0.0, std 0)
    suite["base"]["seeds"] = record([{**r, "score": 0.3} for r in base_seeds])  # 20.0 (17.32): gap 6.9
    assert reports.rp_tab15(suite, P).agrees == "no"


def test_rp_fig1a_curve_and_verdict():
    suite = make_suite()
    for name, vals in (("flt", [1, 0, 0, 0, 0, 0, 0, 0, 0, 1]), ("rp_skip", [1, 1, 1, 1, 0, 1, 1, 1, 1, 1])):
        rs = [r for d, v in zip(reports.DECILE_DEPTHS, vals) for r in rows("niah_multikey_2", 1024, [v], depth=d)]
        suite.setdefault(name, {})["deciles"] = record(rs)
    curves, rep = reports.rp_fig1a(suite, P)
    assert curves["flt"] == [1.0] + [0.0] * 8 + [1.0]
    summary = {r["model"]: r["accuracy"] for r in rep.tables[0]["rows"] if r["decile"].startswith("mean")}
    assert summary == {"flt": "20.0 / 100.0", "rp_skip": "90.0 / 100.0"}
    assert rep.agrees == "partly"  # higher, not flatter
    del suite["rp_skip"]
    assert reports.rp_fig1a(suite, P)[1].agrees == "n/a"


def test_direction_agrees():
    paper = {"flt": 82.3, "rpes": 71.8, "pose": 68.8}
    assert reports.direction_agrees({"flt": 0.9, "rpes": 0.5, "pose": 0.4}, paper)[0] == "yes"
    assert reports.direction_agrees({"flt": 0.1, "rpes": 0.5, "pose": 0.6}, paper)[0] == "no"
    assert reports.direction_agrees({"flt": 0.9, "rpes": 0.3, "pose": 0.4}, paper) == \
        ("partly", "order of flt, rpes, pose as in the paper on 2/3 pairs")
    assert reports.direction_agrees({"flt": 0.5, "base": 0.1}, paper)[0] == "yes"
    assert reports.direction_agrees({"flt": 0.1, "base": 0.1}, paper)[0] == "n/a"  # a tie says nothing
    assert reports.direction_agrees({"flt": 0.9, "rpes": 0.4, "pose": 0.4}, paper) == \
        ("yes", "order of flt, rpes, pose as in the paper on 2/2 pairs; 1 tied pair(s) left out")
    assert reports.direction_agrees({"flt": 0.4, "rpes": 0.4, "pose": 0.4}, paper)[0] == "n/a"
    assert reports.direction_agrees({"flt": 0.5}, paper)[0] == "n/a"


def test_suite_plan_cost_and_yarn():
    plan = reports.suite_plan(P, "flt", rope_theta=10_000.0)
    assert set(plan) == {"suite", "seeds", "deciles", "yarn2"}
    assert plan["seeds"]["seeds"] == (1, 2) and plan["seeds"]["lengths"] == (1024,)
    assert plan["yarn2"]["rope"] == {"rope_type": "yarn", "rope_theta": 10_000.0, "factor": 2.0,
                                     "original_max_position_embeddings": 1024}
    assert plan["yarn2"]["lengths"] == (2048,)
    base = reports.suite_plan(P, "base", rope_theta=10_000.0)["yarn2"]["rope"]
    assert (base["factor"], base["original_max_position_embeddings"]) == (8.0, 256)
    cost = {r["part"]: r for r in reports.plan_cost(P, n_checkpoints=2)}
    assert cost["suite"]["generations"] == 2 * 20 * 4 * 3 * 8
    assert cost["suite"]["prompt_tokens"] == 2 * 20 * 3840 * 3 * 8
    assert cost["deciles"]["generations"] == 2 * 10 * 10
    assert cost["total"]["generations"] == sum(r["generations"] for p, r in cost.items() if p != "total")


def test_tidy_rows_include_skipped_cells():
    tidy = reports.tidy_rows(make_suite())
    skipped = [r for r in tidy if r["status"] != "ok"]
    assert skipped == [{"model": "base", "part": "suite", "task": "cwe", "length": 256, "depth": 0.5,
                        "eval_seed": 0, "status": "n/a (min length 300)"}]
    csv = reports.tidy_csv(tidy)
    assert csv.splitlines()[0] == ",".join(reports.TIDY_COLUMNS)
    assert len(csv.splitlines()) == len(tidy) + 1


def test_all_reports_cover_every_target():
    _, reps = reports.all_reports(make_suite(), P)
    from repro.targets import get_target

    assert [r.target for r in reps] == ["RP-Tab1/2", "RP-Fig1a", "CD-Tab2", "RP-Tab14", "RP-Tab15",
                                        "RP-Tab4/5"]
    for r in reps:
        get_target(r.target)
        assert r.agrees in {"yes", "no", "partly", "n/a"}
        for t in r.tables:
            assert t["rows"] and t["caption"] and "/" not in t["name"]


@pytest.mark.parametrize("spec,expected", [("niah_position:ordinal=first", ("niah_position", {"ordinal": "first"})),
                                           ("vt", ("vt", {})), ("x:a=1,b=0.5", ("x", {"a": 1, "b": 0.5}))])
def test_parse_task_spec(spec, expected):
    from repro.evaluate import parse_task_spec

    assert parse_task_spec(spec) == expected
