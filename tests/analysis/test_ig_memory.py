"""CD-Mem's benchmark: each (method, length) in its own child process, under a memory cap."""

import pytest

from repro.analysis.ig_memory import IGMemoryConfig, lengths, main, markdown, run_one, sweep

TINY = dict(vocab_size=64, hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=1,
            answer_tokens=4)


def test_markdown_rows():
    rows = [{"method": "ours", "length": 64, "peak_mib": 522.6, "delta_mib": 139.5, "seconds": 0.005, "status": "ok"},
            {"method": "naive", "length": 64, "peak_mib": None, "delta_mib": None, "seconds": None,
             "status": "not attempted"}]
    # a sweep's rows from real children: the smoke run's CD-Mem (tests/test_pipeline.py)
    assert markdown(rows).splitlines()[2:] == ["| ours | 64 | 522.6 | 139.5 | 0.005 | ok |",
                                               "| naive | 64 |  |  |  | not attempted |"]


def test_the_child_stops_at_the_cap_and_the_method_is_not_run_further():
    # the child (~350 MiB once loaded) limits its address space: naive at 8K (~2 GiB here) fails inside it and it
    # reports its own row (peak included); the next length is not attempted
    rows = sweep(IGMemoryConfig(**TINY, cap_mib=700), methods=("naive",), start=8192, max_length=16384)
    assert [r["status"] for r in rows] == ["out of memory (> 700 MiB)", "not attempted"]
    # the child's own peak (None when the watchdog killed it first); no upper bound: pages mapped before the limit
    # and touched later pass it unseen, and on a loaded machine the watchdog samples them late (2,408 MiB once)
    assert (rows[0]["peak_mib"] is None or rows[0]["peak_mib"] > 300) and rows[0]["seconds"] is None


def test_the_watchdog_kills_a_child_over_the_cap():
    row = run_one("ours", 64, IGMemoryConfig(**TINY, cap_mib=64))  # over the cap while importing torch
    assert row["status"] == "out of memory (> 64 MiB)" and row["peak_mib"] is None


def test_config_and_lengths_are_checked(capsys):
    assert lengths(1024, 32768) == [1024, 2048, 4096, 8192, 16384, 32768]
    assert lengths(1024, 3000) == [1024, 2048]
    with pytest.raises(ValueError, match="start=1, max_length=8"):
        lengths(1, 8)
    with pytest.raises(ValueError, match="cap_mib=0; allowed: an integer >= 1"):
        IGMemoryConfig(cap_mib=0)
    with pytest.raises(ValueError, match="methods=.*allowed: a non-empty subset of ours, naive"):
        sweep(IGMemoryConfig(**TINY), methods=("fast",))
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "--max-length" in capsys.readouterr().out
