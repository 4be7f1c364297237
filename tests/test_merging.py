"""Model merging (LongRecipe Eq. 8): exact endpoints, the mean, and refusals."""

import pytest
import torch

from repro.merging import merge_checkpoints, merge_state_dicts


def test_lambda_endpoints_and_mean(tiny_llama):
    a, b = tiny_llama(seed=0).state_dict(), tiny_llama(seed=1).state_dict()
    first = merge_state_dicts([a, b], (1.0, 0.0))
    assert all(torch.equal(first[k], a[k]) for k in a)
    mean = merge_state_dicts([a, b], (0.5, 0.5))
    for k in a:
        assert torch.allclose(mean[k], (a[k] + b[k]) / 2, atol=1e-7, rtol=0)
    k = next(iter(a))
    assert not torch.equal(mean[k], a[k])


def test_mismatches_are_refused(tiny_llama):
    a = tiny_llama(seed=0).state_dict()
    b = dict(a)
    b.pop(next(iter(b)))
    with pytest.raises(ValueError, match="mismatched keys"):
        merge_state_dicts([a, b], (0.5, 0.5))
    c = tiny_llama(vocab=80).state_dict()
    with pytest.raises(ValueError, match="shape"):
        merge_state_dicts([a, c], (0.5, 0.5))
    with pytest.raises(ValueError, match="one weight per model"):
        merge_state_dicts([a, a], (1.0,))


def test_merge_checkpoints_on_hf_folders(tiny_llama, tmp_path):
    m0, m1 = tiny_llama(seed=0), tiny_llama(seed=1)
    m0.save_pretrained(tmp_path / "orig")
    m1.save_pretrained(tmp_path / "tuned")
    out = merge_checkpoints(tmp_path / "orig", tmp_path / "tuned", tmp_path / "merged", (0.25, 0.75))
    from transformers import AutoModelForCausalLM

    merged = AutoModelForCausalLM.from_pretrained(out).state_dict()
    s0, s1 = m0.state_dict(), m1.state_dict()
    for k in s0:
        assert torch.allclose(merged[k], 0.25 * s0[k] + 0.75 * s1[k], atol=1e-6, rtol=0)
    assert not (tmp_path / "merged.tmp").exists()
