"""``python -m repro bench costs --quick``: the trained timed arms against the cost benchmark, and the proxy tables."""

import csv

from repro.bench.costs import costs_main
from repro.bench.timed_arms import GOAL
from repro.recipes.plans import TIMED_ARMS


def test_quick_run_writes_the_three_tables(tmp_path, capsys):
    assert costs_main(figures_dir=str(tmp_path), quick=True, progress=False) == 0
    rows = list(csv.DictReader(open(tmp_path / "TB-TimedArms.csv")))
    assert [r["arm"] for r in rows] == [a for a in TIMED_ARMS if a != "rp_standard"]
    for r in rows:  # the columns agree with each other
        assert abs(float(r["trained / bench"]) - float(r["trained ratio"]) / float(r["bench ratio"])) < 2e-3
        assert r[f"within {GOAL}x"] in ("yes", "no")
    assert {r["table"] for r in rows} == {"RP-Cost", "CD-Cost"}
    proxies = list(csv.DictReader(open(tmp_path / "RP-Cost-proxies.csv")))
    assert {r["proxy"] for r in proxies} == {"8K-like", "64K-like"}
    assert (tmp_path / "CD-Cost-proxies.md").exists()
    assert costs_main("paper", str(tmp_path / "x"), progress=False) == 2
    assert "use smoke or tiny" in capsys.readouterr().err
