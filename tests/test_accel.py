import json
import sys

import pytest
import torch

from repro.accel import deepspeed_initialize, load_deepspeed_config
from repro.pipeline import REPO
from repro.profiles import get_profile


def test_paper_profile_deepspeed_config_resolves_batch_96():
    p = get_profile("paper")
    cfg = load_deepspeed_config(REPO / p.extend.deepspeed_config, p.extend.batch_size)
    assert cfg["train_batch_size"] == 96 and cfg["gradient_accumulation_steps"] == 96
    assert cfg["bf16"]["enabled"] and cfg["zero_optimization"]["stage"] == 3
    with pytest.raises(ValueError, match="not divisible"):
        load_deepspeed_config(REPO / p.extend.deepspeed_config, 96, world_size=5)
    with pytest.raises(FileNotFoundError, match="does not exist"):
        load_deepspeed_config(REPO / "configs" / "missing.json", 96)


def test_deepspeed_missing_is_a_clear_error(monkeypatch):
    from repro.distributed import make_accelerator

    monkeypatch.setitem(sys.modules, "deepspeed", None)  # as if not installed: its import raises ImportError
    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    with pytest.raises(ImportError, match=r"pip install deepspeed==0.19.8 \(pinned in requirements.txt\)"):
        deepspeed_initialize(torch.nn.Linear(2, 2), None, {})
    with pytest.raises(ImportError, match="deepspeed_config=.*needs DeepSpeed: pip install deepspeed==0.19.8"):
        make_accelerator(REPO / "configs" / "deepspeed_zero3.json", global_batch=96)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_flash_attention_matches_sdpa_on_gpu(tiny_llama):
    pytest.importorskip("flash_attn")
    ids = torch.randint(3, 64, (1, 32), device="cuda")
    a = tiny_llama("sdpa").cuda().to(torch.bfloat16)(ids).logits
    b = tiny_llama("flash_attention_2").cuda().to(torch.bfloat16)(ids).logits
    assert torch.allclose(a.float(), b.float(), atol=5e-2)


def test_deepspeed_config_of_a_single_process_extension_trains_as_without_it(tmp_path, monkeypatch):
    """Not launched multi-process, an extension whose profile names the paper's DeepSpeed config trains on the
    single-process trainer: the smoke FLT's pinned losses (tests/stages/test_seeded.py), world size 1. (The
    multi-process engines: tests/test_distributed.py.)"""
    from repro.stages import metrics, train_extension
    from tests.stages.test_seeded import FLT_LOSSES

    monkeypatch.delenv("WORLD_SIZE", raising=False)
    p = get_profile("smoke").override(extend={"deepspeed_config": get_profile("paper").extend.deepspeed_config})
    assert p.extend.deepspeed_config == "configs/deepspeed_zero3.json"
    final = train_extension(p, "flt", tmp_path, progress=False)
    assert [r["loss"] for r in metrics(final)] == pytest.approx(FLT_LOSSES, rel=1e-6)
    assert json.loads((final / "train_summary.json").read_text())["world_size"] == 1
