"""The sequence-parallel degrees a model allows, from its config.json (:mod:`repro.parallel.heads`)."""

import json

import pytest

from repro.parallel.heads import check_model_heads, head_counts, head_error, workable_degrees

SMOL = {"num_attention_heads": 9, "num_key_value_heads": 3}
"""SmolLM2-135M's head counts."""


def test_head_counts_read_the_configs_of_several_families():
    assert head_counts(SMOL) == (9, 3)
    assert head_counts({"num_attention_heads": 12}) == (12, 12)  # no kv count: multi-head attention
    assert head_counts({"n_head": 12}) == (12, 12)  # GPT-2's name
    assert head_counts({"text_config": {"num_attention_heads": 8, "num_key_value_heads": 2}}) == (8, 2)
    assert head_counts({"hidden_size": 64}) is None


def test_workable_degrees_are_the_divisors_of_the_query_heads():
    assert workable_degrees(9) == [3, 9]
    assert workable_degrees(32) == [2, 4, 8, 16, 32]
    assert workable_degrees(7) == [7] and workable_degrees(1) == []


def test_head_error_names_the_counts_and_what_works():
    line = head_error(SMOL, 2)
    assert line.startswith("--sequence-parallel 2 does not divide the model's 9 attention heads (3 key/value heads)")
    assert "allowed: --sequence-parallel 3 or 9 (a divisor of 9)" in line and "\n" not in line
    assert head_error(SMOL, 3) is None and head_error(SMOL, 9) is None and head_error(SMOL, 1) is None
    assert "sequence_parallel=3 does not divide" in head_error({"num_attention_heads": 4}, 3, "sequence_parallel=")
    assert "allowed: none" in head_error({"num_attention_heads": 1}, 2)


def test_check_model_heads_reads_config_json_only(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(SMOL))  # no weights at all
    check_model_heads(tmp_path, 3)
    with pytest.raises(ValueError, match="9 attention heads"):
        check_model_heads(tmp_path, 2)

    class Refused(Exception):
        pass

    with pytest.raises(Refused):
        check_model_heads(tmp_path, 4, Refused)
    check_model_heads(tmp_path / "missing", 2)  # no config.json: left to the model loader
