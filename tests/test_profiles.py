import ast
import dataclasses
import inspect

import pytest

from repro import profiles
from repro.profiles import PROFILES, Profile, get_profile


@pytest.mark.parametrize("name", list(PROFILES))
def test_every_profile_validates(name):
    p = get_profile(name)
    assert p.name == name
    assert p.extend.target_window >= p.base.window


def test_paper_profile_holds_longrecipe_table6():
    p = get_profile("paper")
    assert p.model.pretrained == "meta-llama/Meta-Llama-3-8B-Instruct"
    assert p.extend.target_window == 80 * 1024
    assert (p.extend.rope_type, p.extend.rope_factor) == ("dynamic", 10.0)
    assert (p.extend.batch_size, p.extend.lr, p.extend.steps) == (96, 5e-5, 104)
    assert p.extend.bf16 and p.model.attn_implementation == "flash_attention_2"
    # 24K-token samples x 96 x 104 steps = the paper's ~240M tokens
    assert abs(24 * 1024 * 96 * 104 / 240e6 - 1) < 0.1


def test_tiny_is_four_times_its_base_window():
    p = get_profile("tiny")
    assert p.extend.target_window == 4 * p.base.window
    assert p.eval.lengths == (p.base.window, 2 * p.base.window, p.extend.target_window, 2 * p.extend.target_window)


def _documented_fields(cls) -> set[str]:
    """Fields followed by a docstring in the class body."""
    body = ast.parse(inspect.getsource(cls)).body[0].body
    out = set()
    for a, b in zip(body, body[1:]):
        if isinstance(a, ast.AnnAssign) and isinstance(b, ast.Expr) and isinstance(b.value, ast.Constant):
            out.add(a.target.id)
    return out


@pytest.mark.parametrize("cls", [profiles.CorpusConfig, profiles.TokenizerConfig, profiles.ModelConfig,
                                 profiles.BaseTrainConfig, profiles.ExtendConfig, profiles.EvalConfig,
                                 profiles.LongRecipeConfig, profiles.SelfDistillConfig, profiles.CDTConfig,
                                 profiles.ProLongConfig, profiles.RealModelConfig, profiles.RunConfig, Profile])
def test_every_field_is_documented_and_frozen(cls):
    names = {f.name for f in dataclasses.fields(cls)}
    assert names == _documented_fields(cls)
    assert cls.__dataclass_params__.frozen


def test_every_section_of_a_profile_is_a_documented_settings_class():
    sections = {f.name: f.default_factory for f in dataclasses.fields(Profile) if f.name != "name"}
    assert set(sections.values()) == {profiles.CorpusConfig, profiles.TokenizerConfig, profiles.ModelConfig,
                                      profiles.BaseTrainConfig, profiles.ExtendConfig, profiles.EvalConfig,
                                      profiles.LongRecipeConfig, profiles.SelfDistillConfig, profiles.CDTConfig,
                                      profiles.ProLongConfig, profiles.RealModelConfig, profiles.RunConfig}


def test_the_run_section_names_the_device_and_is_in_no_cache_key():
    from repro.stages.keys import base_key, extension_key

    tiny, paper = get_profile("tiny"), get_profile("paper")
    assert (tiny.run.device, tiny.run.dtype) == ("auto", "auto") and (paper.run.device, paper.run.dtype) == (
        "cuda", "bfloat16")
    moved = tiny.override(run={"device": "cuda:1", "dtype": "bfloat16"})
    assert base_key(moved) == base_key(tiny) and extension_key(moved, "rp_skip") == extension_key(tiny, "rp_skip")
    with pytest.raises(ValueError, match=r"run.device='tpu'; allowed: auto, cpu, cuda, cuda:N"):
        tiny.override(run={"device": "tpu"})
    with pytest.raises(ValueError, match=r"run.dtype='float16'; allowed: auto, float32, bfloat16"):
        tiny.override(run={"dtype": "float16"})


def test_arm_names_repeated_in_the_profiles_agree_with_the_arm_tables():
    # profiles import nothing above them, so they repeat the arm names of repro.methods.arms
    from repro.methods.arms import PL_ARMS, RP_ARMS

    assert profiles.PL_ARM_NAMES == tuple(PL_ARMS)
    sd = profiles.SelfDistillConfig()
    assert set(profiles.RP_MAIN_ARMS + profiles.RP_ABLATION_ARMS + sd.matched_arms) == set(RP_ARMS)


def test_bad_values_name_the_field_and_range():
    with pytest.raises(ValueError, match="unknown profile 'huge'; allowed: smoke, tiny, paper"):
        get_profile("huge")
    tiny = get_profile("tiny")
    with pytest.raises(ValueError, match=r"extend.retrieval_fraction=1.5 out of range; allowed: 0.0 <="):
        tiny.override(extend={"retrieval_fraction": 1.5})
    with pytest.raises(ValueError, match="extend.target_window=128 must be >= base.window=256"):
        tiny.override(extend={"target_window": 128})
    with pytest.raises(ValueError, match="unknown field"):
        tiny.override(extend={"stepz": 3})
    with pytest.raises(ValueError, match=r"base.threads=-1; allowed: 0 \(leave the process setting\) or >= 1"):
        tiny.override(base={"threads": -1})
    with pytest.raises(ValueError, match=r"extend.data_workers=0; allowed: >= 1"):
        tiny.override(extend={"data_workers": 0})
    with pytest.raises(ValueError, match=r"longrecipe.cost_steps=0; allowed: >= 1"):
        tiny.override(longrecipe={"cost_steps": 0})
    with pytest.raises(ValueError, match=r"extend.workers=0; allowed: >= 1"):
        tiny.override(extend={"workers": 0})
    with pytest.raises(ValueError, match=r"eval.base_depths=\(\), eval.base_samples=20; allowed"):
        tiny.override(eval={"base_depths": ()})
    with pytest.raises(ValueError, match="eval.depths"):
        tiny.override(eval={"depths": (0.5, 1.5)})
    with pytest.raises(ValueError, match=r"base.task_weights=\(1.0, 2.0\); allowed: one positive weight per "
                                         r"base.train_tasks \(18: niah_single_1"):
        tiny.override(base={"task_weights": (1.0, 2.0)})
    with pytest.raises(ValueError, match="base.task_weights"):
        tiny.override(base={"task_weights": (1.0, 1.0, 0.0, 1.0, 1.0, 1.0, 1.0)})
