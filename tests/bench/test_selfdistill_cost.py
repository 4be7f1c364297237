"""RP-Cost's benchmark: every arm is timed in the same interleaved rounds, ratios are against Standard."""

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.bench.selfdistill_cost import COST_ARMS, measure_rp_step_costs
from repro.methods.longce import LongCEConfig


def _model():
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                        use_cache=False))


def test_every_arm_timed_in_the_same_rounds_and_the_model_untouched():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = measure_rp_step_costs(model, 2, 32, steps=3, warmup=1, longce=LongCEConfig(window=8, stride=4),
                                progress=False)
    assert list(out) == list(COST_ARMS)
    assert all(len(r["seconds"]) == 3 and r["seconds_per_step"] > 0 and r["tokens_per_step"] == 64
               for r in out.values())
    assert out["Standard"]["ratio"] == 1.0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # arms train their own copies


def test_longce_arms_need_a_config_and_standard_is_required():
    out = measure_rp_step_costs(_model(), 1, 16, steps=1, warmup=0, progress=False)
    assert "LongCE" not in out and "skip + LongCE" not in out
    with pytest.raises(ValueError, match="must include 'Standard'"):
        measure_rp_step_costs(_model(), 1, 16, steps=1, arms={"skip": {}}, progress=False)
    with pytest.raises(ValueError, match="steps=0"):
        measure_rp_step_costs(_model(), 1, 16, steps=0, progress=False)
