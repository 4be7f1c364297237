"""``extend.sequence_parallel`` validates and builds accelerate's ParallelismConfig."""

import pytest
from accelerate import ParallelismConfig

from repro.parallel.config import check_sequence_parallel, parallelism_config, profile_parallelism
from repro.profiles import get_profile, validate
from repro.stages.keys import extend_fields


def test_paper_profile_has_the_field_and_it_validates():
    p = get_profile("paper")
    assert p.extend.sequence_parallel == 1
    assert profile_parallelism(p, 8) is None  # 1: plain data parallelism, as before
    with pytest.raises(ValueError, match=r"extend.sequence_parallel=0; allowed: >= 1"):
        validate(p.override(extend={"sequence_parallel": 0}))
    sp4 = validate(p.override(extend={"sequence_parallel": 4}))
    assert "sequence_parallel" not in extend_fields(p) and extend_fields(sp4)["sequence_parallel"] == 4


def test_deepspeed_ulysses_config_builds():
    pc = profile_parallelism(get_profile("paper").override(extend={"sequence_parallel": 4}), 8)
    assert isinstance(pc, ParallelismConfig)
    assert (pc.sp_size, pc.sp_backend, pc.sp_enabled, pc.cp_size, pc.non_data_parallel_size) == \
        (4, "deepspeed", True, 1, 4)
    assert pc.sp_handler.sp_attn_implementation == "flash_attention_2"
    assert pc.sp_handler.sp_seq_length_is_variable and pc.sp_handler.sp_seq_length is None
    fixed = parallelism_config(2, 4, attn_implementation="sdpa", seq_length=81_920)
    assert fixed.sp_handler.sp_seq_length == 81_920 and not fixed.sp_handler.sp_seq_length_is_variable


def test_torch_context_parallel_config_builds():
    pc = parallelism_config(2, 8, backend="torch")
    assert (pc.cp_size, pc.cp_backend, pc.dp_shard_size, pc.total_size) == (2, "torch", 4, 8)
    assert pc.dp_shard_cp_dim_names == ["dp_shard", "cp"]


@pytest.mark.parametrize("sp,n,message", [
    (3, 8, r"extend.sequence_parallel=3 does not divide num_processes=8; allowed: \[1, 2, 4, 8\]"),
    (0, 8, r"extend.sequence_parallel=0; allowed: an integer >= 1"),
    (2, 0, r"num_processes=0; allowed: an integer >= 1"),
])
def test_bad_sizes_name_the_values(sp, n, message):
    with pytest.raises(ValueError, match=message):
        check_sequence_parallel(sp, n)


def test_bad_backend_attention_and_length():
    with pytest.raises(ValueError, match=r"backend='ring'; allowed: 'deepspeed', 'torch'"):
        parallelism_config(2, 2, backend="ring")
    with pytest.raises(ValueError, match=r"attn_implementation='eager' under DeepSpeed Ulysses; allowed: sdpa"):
        parallelism_config(2, 2, attn_implementation="eager")
    with pytest.raises(ValueError, match=r"seq_length=7; allowed: None \(variable\) or a multiple of "
                                         r"sequence_parallel=2"):
        parallelism_config(2, 2, seq_length=7)


@pytest.mark.slow
def test_accelerate_deepspeed_ulysses_runs_a_pose_row_on_two_cpu_processes():
    """accelerate prepares the model with this config (DeepSpeed Ulysses around sdpa, gloo, CPU); each rank's
    logits of a PoSE row's shard equal the single-process full row's (float64), and the loss parts add up."""
    import numpy as np

    from repro import positions as P
    from repro.parallel.check import reference, run_check

    rng = np.random.default_rng(1)
    case = {"input_ids": rng.integers(0, 128, size=(1, 64)), "weights": rng.uniform(0.5, 1.5, size=(1, 64)),
            "position_ids": P.pose(P.PositionSample(64), 512, rng)[None], "layout": "contiguous"}
    ranks = run_check([case], world=2, timeout=150, mode="deepspeed")[0]
    ref = reference(case)
    for res in ranks:
        np.testing.assert_allclose(res["logits"][0], ref["logits"][0][res["token_index"]], rtol=0, atol=1e-12)
    assert abs(sum(float(r["loss"]) for r in ranks) - float(ref["loss"])) < 1e-12
