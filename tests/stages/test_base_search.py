"""The base-model search: candidates as profile overrides, the TB-BaseSearch rows, CLI errors."""

import json

import pytest

from repro.__main__ import main
from repro.profiles import get_profile
from repro.profiles import BASE_TRAIN_TASKS
from repro.stages.base_search import CANDIDATES, Candidate, get_candidate, search_rows


def test_candidates_are_valid_profiles_and_cover_every_eval_family():
    for c in CANDIDATES.values():
        p = c.profile()
        assert p.name == "tiny"
    v1 = CANDIDATES["v1"].profile()
    assert (v1.model.num_layers, v1.model.hidden_size, len(v1.base.train_tasks), v1.base.bf16) == (2, 128, 7, False)
    names = {t.split(":")[0] for t in get_profile("tiny").eval.base_tasks}
    assert set(BASE_TRAIN_TASKS) == names
    c = Candidate("x", "a test", {"num_layers": 5}, {"bf16": False})
    assert c.profile().model.num_layers == 5 and not c.profile().base.bf16


def test_the_tiny_defaults_are_the_chosen_candidate():
    from repro.stages.base_search import CHOSEN
    from repro.stages.keys import base_key

    tiny = get_profile("tiny")
    assert CANDIDATES[CHOSEN].profile() == tiny and base_key(CANDIDATES[CHOSEN].profile()) == base_key(tiny)
    # the v1 candidate is v1 whatever the defaults: 2 layers, 7 families, fp32, v1's curriculum lengths
    v1 = CANDIDATES["v1"].profile().base
    assert (v1.copy_max_steps, v1.max_steps_per_length, v1.final_steps, v1.copy_fraction, v1.threads) == \
        (1500, 200, 400, 0.25, 2)


def test_unknown_candidate_names_the_allowed_ones(capsys):
    with pytest.raises(ValueError, match="unknown base candidate 'nope'; allowed: v1, "):
        get_candidate("nope")
    assert main(["base-search", "nope"]) == 2
    assert "unknown base candidate(s) ['nope']" in capsys.readouterr().err
    assert main(["base-search"]) == 0
    assert "l4-all" in capsys.readouterr().out


def test_search_rows_keep_the_latest_run_of_each_candidate(tmp_path):
    log = tmp_path / "log.jsonl"
    base = {"layers": 2, "hidden": 128, "params": 800_000, "bf16": False, "steps": 2000, "tokens": 12_000_000,
            "train_seconds": 600.0, "threads": 2, "copy_steps": 1000, "note": "v1"}
    rows = [dict(base, name="v1", tasks={"niah_single_1": {"acc": 0.5}}),
            dict(base, name="l4", layers=4, tasks={"niah_single_1": {"acc": 0.9}}),
            dict(base, name="v1", tasks={"niah_single_1": {"acc": 0.8}})]
    log.write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = search_rows(log)
    assert [r["candidate"] for r in out] == ["v1", "l4"]
    assert out[0]["niah_single_1"] == 80.0 and out[0]["train min"] == 10.0 and out[0]["tokens (M)"] == 12.0
