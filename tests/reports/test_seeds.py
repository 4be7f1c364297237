"""Arms trained with several seeds: grouping, mean ± std cells, and the tables that show them."""

import pytest

from repro.profiles import get_profile
from repro.reports import cdt, longrecipe as lrr, selfdistill, seeds
from repro.tasks.summary import NIAH_M_TASKS, NIAH_TASKS, RULER_TASKS
from tests.reports.records import make_suite, record, rows

P = get_profile("tiny")  # base window 256, target 1024


def test_groups_cells_and_note():
    groups = seeds.seed_groups(["base", "flt@seed2", "flt", "pose", "flt@seed1", "pose+merge@seed1"])
    assert groups == {"base": ("base",), "flt": ("flt", "flt@seed1", "flt@seed2"), "pose": ("pose",),
                      "pose+merge": ("pose+merge@seed1",)}
    assert seeds.cell([0.45, 0.55, 0.65]) == "55.0 ± 10.0" and seeds.cell([0.5]) == 50.0
    assert seeds.cell([None, None], "n/a (missing)") == "n/a (missing)" and seeds.cell([0.5, None]) == 50.0
    assert seeds.cell([2.5, 2.25], scale=1, digits=4) == "2.3750 ± 0.1768"
    assert seeds.seeds_label("FLT", groups["flt"]) == "FLT (3 seeds)" and seeds.seeds_label("PoSE", ("pose",)) == "PoSE"
    assert seeds.multi_seed_note(groups, str.upper) == ("Multi-seed arms (mean ± std across training seeds): "
                                                        "FLT (3 seeds); the other arms have one training seed.")
    with pytest.raises(ValueError, match="bad training-seed suffix '@seed0'"):
        seeds.seed_groups(["flt@seed0"])


def lr_arm(k):
    """An LR-suite arm: NIAH(M) tasks right on the first k of 40 prompts, every other RULER task on 10."""
    return {"ruler": record([r for t in RULER_TASKS for r in rows(t, 1024, [1] * (k if t in NIAH_M_TASKS else 10)
                                                                          + [0] * (40 - (k if t in NIAH_M_TASKS
                                                                                         else 10)))])}


def test_lr_tab1_shows_a_multi_seed_arm_as_mean_and_std_and_widens_its_gaps():
    suite = {"longrecipe": lr_arm(18), "longrecipe@seed1": lr_arm(22), "longrecipe@seed2": lr_arm(26),
             "pose": lr_arm(16)}
    rep = lrr.lr_tab1(suite, {}, P)
    rows_ = {r["method"]: r for r in rep.tables[0]["rows"]}
    assert list(rows_) == ["PoSE", "LongRecipe (3 seeds)"]
    assert rows_["LongRecipe (3 seeds)"]["NIAH(M) @1024"] == "55.0 ± 10.0" and rows_["PoSE"]["NIAH(M) @1024"] == 40.0
    assert isinstance(rows_["LongRecipe (3 seeds)"]["NIAH(M) SE"], float)
    assert ("Multi-seed arms (mean ± std across training seeds): LongRecipe (3 seeds); the other arms have one "
            "training seed.") in rep.tables[0]["caption"]
    # the headline LongRecipe > PoSE: 15 NIAH(M) points (5.8 RULER points) are > 2 evaluation SE but within the
    # training-seed spread: a tie, not an agreement
    assert rep.agrees == "tie within noise" and rep.note.startswith("headline: 0/2 claims hold beyond noise, 2 tied")
    assert "NIAH(M): every pair of pose, longrecipe is tied within noise; 0/1 gaps significant" in rep.note
    assert "widened by the training-seed spread (longrecipe 10.0 over 3 seeds; single-seed arms: pooled 10.0)" in \
        rep.note
    one = lrr.lr_tab1({"longrecipe": lr_arm(22), "pose": lr_arm(16)}, {}, P)  # one seed each: significant
    assert one.agrees == "yes" and "Every arm has one training seed" in one.tables[0]["caption"]


def test_lr_tab2_loss_steps_use_the_training_seed_spread():
    def short(k):  # every NIAH task at the base window, the first k of 20 prompts right
        return {"short": record([r for t in NIAH_TASKS for r in rows(t, 256, [1] * k + [0] * (20 - k))])}

    suite = {"longrecipe": short(10), "longrecipe+replay": short(10), "longrecipe+merge": short(14)}
    lm = {"longrecipe": {"loss": 3.0}, "longrecipe@seed1": {"loss": 3.4}, "longrecipe+replay": {"loss": 2.9},
          "longrecipe+replay@seed1": {"loss": 3.1}, "longrecipe+merge": {"loss": 2.4}}
    rep = lrr.lr_tab2(suite, lm, P)
    (row,) = rep.tables[0]["rows"]
    assert row["LM loss @256 before replay"] == "3.2000 ± 0.2828" and row["LM loss @256 after merging"] == 2.4
    assert row["NIAH @256 after merging"] == 70.0
    # loss: 3.2 -> 3.0 is within 2 x sqrt(0.2828^2 / 2 + 0.1414^2 / 2) = 0.45 (a tie); 3.0 -> 2.4 beyond
    # 2 x sqrt(0.1414^2 / 2 + 0.2236^2 / 1) = 0.49 (merge has one seed: the pooled 0.2236)
    assert ("LM loss falls on 1/1 significant steps, 1 tied within noise (no per-window losses recorded; "
            "training-seed spread of the loss, pooled 0.2236 (2 SE)") in rep.note
    assert "NIAH @256 rises on 1/1 significant steps, 1 tied within noise; 1/2 gaps significant" in rep.note
    # the headline, Holm over its 4 claims: the merge step's loss (p = 0.014, x 3 = 0.043) and NIAH (20 points,
    # SE 3.2) hold; the replay step ties on both
    assert rep.agrees == "partly" and rep.note.startswith("headline: 2/4 claims hold beyond noise, 2 tied")
    assert "Multi-seed arms (mean ± std across training seeds): LongRecipe (2 seeds), longrecipe+replay (2 seeds)" in \
        rep.tables[0]["caption"]


def test_rp_tables_with_a_multi_seed_arm():
    suite = make_suite()
    for k, f in ((1, 0.5), (2, 0.0)):  # two more flt seeds: every target score scaled
        suite[f"flt@seed{k}"] = {"suite": record([{**r, "score": r["score"] * f if r["length"] == 1024 else r["score"]}
                                                  for r in suite["flt"]["suite"]["results"]])}
    rep = selfdistill.rp_tab1_2(suite, P)
    flt = next(r for r in rep.tables[0]["rows"] if r["model"] == "flt (3 seeds)")
    # Avg-13 per seed: 4.5/13, half of it, 0 -> 34.6, 17.3, 0.0
    assert flt["Avg-13"] == f"{100 * 4.5 / 13 / 2:.1f} ± {100 * 4.5 / 13 / 2:.1f}"
    assert flt["MK-1"] == 50.0  # per-task cells: the mean over seeds (1.0, 0.5, 0.0)
    assert "Multi-seed arms (mean ± std across training seeds): flt (3 seeds)" in rep.tables[0]["caption"]
    assert "widened by the training-seed spread (flt" in rep.note
    cd = cdt.cd_tab2(suite, P)
    assert any(r["model"] == "flt (3 seeds)" for r in cd.tables[0]["rows"])  # any arm name, seeds grouped
    suite["flt"]["seeds"] = record([r for t in RULER_TASKS for r in rows(t, 1024, [0.2], eval_seed=1)])
    t15 = selfdistill.rp_tab15(suite, P)
    row = next(r for r in t15.tables[0]["rows"] if r["model"] == "flt (3 seeds)")
    assert row["training seeds"] == 3 and row["training-seed std"] != "-"
    assert "training-seed std: flt" in t15.note
