"""TB-Base: per-task accuracy with binomial SE against the testbed goals."""

from repro.profiles import get_profile
from repro.reports.basemodel import BASE_GOALS, tb_base


def _rows(task, hits, n):
    return [{"task": task, "score": 1.0 if i < hits else 0.0} for i in range(n)]


def test_tb_base_rows_se_and_goals():
    p = get_profile("tiny")
    results = (_rows("niah_single_1", 90, 100) + _rows("niah_multikey_2", 50, 100) + _rows("multihop_2", 95, 100)
               + _rows("niah_position:ordinal=first", 80, 100) + _rows("niah_position:ordinal=last", 30, 100)
               + _rows("vt", 10, 100))
    rep = tb_base(results, p)
    rows = {r["task"]: r for r in rep.tables[0]["rows"]}
    assert rows["niah_single_1"]["accuracy %"] == 90.0 and rows["niah_single_1"]["SE %"] == 3.0  # sqrt(.9*.1/100)
    assert rows["niah_single_1"]["meets goal"] == "yes"
    assert rows["niah_multikey_2"]["meets goal"] == "no" and rows["niah_multikey_2"]["SE %"] == 5.0
    assert rows["multihop_2"]["meets goal"] == "no"  # 95% is above the 40-90% band: wrong answers must occur
    assert rows["multihop_2"]["goal"] == "40-90%"
    assert rows["niah_position"]["accuracy %"] == 55.0 and rows["niah_position"]["n"] == 200
    assert rows["niah_position"]["meets goal"] == "no"
    assert rows["niah_position:ordinal=first"]["meets goal"] == ""  # judged on the mean only
    assert rows["vt"]["meets goal"] == "no"
    assert rep.ours == "1/5 goals met; missed: MK-2, MH-2, VT, NIAH-position"


def test_every_goal_is_a_suite_task_or_the_position_mean():
    p = get_profile("tiny")
    names = {t.split(":")[0] for t in p.eval.base_tasks}
    assert set(BASE_GOALS) <= names
