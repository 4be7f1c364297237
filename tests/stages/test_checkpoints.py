"""Checkpoint paths by arm name, training-seed replicates, and cache keys."""

import pytest

from repro.profiles import REPLICATE_SEED_STRIDE, get_profile
from repro.stages import checkpoint_path, extension_arms, extension_key
from repro.arms import replicate_profile


def test_a_training_seed_replicate_has_its_own_stage_folder(tmp_path):
    p = get_profile("smoke")
    with pytest.raises(FileNotFoundError) as e:
        checkpoint_path(p, "flt@seed1", tmp_path)
    assert "extend-flt@seed1-" in str(e.value)
    for stage in ("replay", "merge"):
        with pytest.raises(FileNotFoundError) as e:
            checkpoint_path(p, f"pose+{stage}@seed2", tmp_path)
        assert f"{stage}-pose@seed2-" in str(e.value)
    assert extension_key(p, "flt@seed1") not in (extension_key(p, "flt"), extension_key(p, "flt@seed2"))


def test_replicate_k_trains_its_arm_at_a_moved_seed():
    p = get_profile("smoke")
    rp, arm = replicate_profile(p, "longrecipe_r20@seed3")
    assert arm == "longrecipe_r20" and rp.extend.seed == p.extend.seed + 3 * REPLICATE_SEED_STRIDE
    assert replicate_profile(p, "flt") == (p, "flt")
    # the replicate's key is the key of its arm in the moved profile
    assert extension_key(p, "flt@seed3") == extension_key(rp, "flt")


def test_scheduling_fields_leave_the_cache_keys_alone():
    p = get_profile("smoke")
    q = p.override(extend={"workers": 3, "data_workers": 2, "replicate_arms": ("flt",), "seed_replicates": 4,
                           "checkpoint_every": 7})
    assert extension_key(p, "pose") == extension_key(q, "pose")
    assert extension_key(p, "pose") != extension_key(p.override(extend={"steps": 4}), "pose")


def test_extension_arms_lists_the_replicates_after_the_arms():
    p = get_profile("smoke").override(extend={"replicate_arms": ("flt", "longrecipe"), "seed_replicates": 3})
    sd = p.selfdistill
    assert extension_arms(p, "longrecipe")[-4:] == ("flt@seed1", "flt@seed2", "longrecipe@seed1", "longrecipe@seed2")
    # CDT alone: FLT, its CE and LongCE (no replicates: rp_standard is not a self-distillation replicate arm
    # here), then its own arm
    assert extension_arms(p, "cdt") == ("flt", "flt@seed1", "flt@seed2", "rp_standard", "rp_longce", "cdt")
    rp = (*sd.main_arms, *sd.matched_arms, *sd.ablation_arms, "rp_skip@seed1", "rp_skip@seed2")
    assert extension_arms(p, "selfdistill") == ("flt", "flt@seed1", "flt@seed2", *rp)
    arms = extension_arms(p)  # with self-distillation run, CE and LongCE are trained once; ProLong's arms last
    pl = (*p.prolong.arms, "prolong@seed1", "prolong@seed2")
    assert arms[-len(rp) - len(pl) - 5:] == ("flt@seed1", "flt@seed2", "longrecipe@seed1", "longrecipe@seed2", *rp,
                                             "cdt", *pl)
    assert extension_arms(p, "prolong") == ("flt", "flt@seed1", "flt@seed2", *pl)
    q = p.override(selfdistill={"replicate_arms": ("rp_standard",)}, cdt={"replicate_arms": ("cdt",)})
    assert extension_arms(q, "cdt")[3:] == ("rp_standard", "rp_longce", "rp_standard@seed1", "rp_standard@seed2",
                                             "cdt", "cdt@seed1", "cdt@seed2")
    with pytest.raises(ValueError, match="extend.seed_replicates=0 out of range"):
        p.override(extend={"seed_replicates": 0})
