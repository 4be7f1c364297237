"""Device placement, checked on a machine without a GPU: ``--device``/``--dtype`` parsing, the trainer moving the
model and every batch, and :class:`repro.devices.DeviceGuard` over the trainer with every recipe's method, the
generator and the analyses (a tensor created without a device next to the model's tensors is what fails on a GPU).
"""

from dataclasses import replace

import numpy as np
import pytest
import torch

from repro.arms import METHOD_NAMES, ArmData, build_arm, prepare_model
from repro.profiles import scaled_profile
from repro.devices import DeviceGuard, DeviceMismatch, model_device, resolve_device, resolve_dtype
from repro.models import build_tiny
from repro.profiles import ModelConfig, get_profile
from repro.train import TrainConfig, Trainer, clm_step
from tests.test_train import ToyMethod

CUDA = torch.cuda.is_available()


def _model(vocab: int, max_pos: int = 1024):
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
    return build_tiny(cfg, vocab, max_pos, 0, 1, 2, seed=0)


def _batch(vocab: int = 100, rows: int = 2, length: int = 16) -> dict[str, np.ndarray]:
    ids = np.random.default_rng(0).integers(3, vocab, size=(rows, length))
    return {"input_ids": ids, "position_ids": np.tile(np.arange(length), (rows, 1)),
            "weights": np.ones((rows, length), np.float32)}


# -- choices ------------------------------------------------------------------------------------------------------

def test_devices_and_dtypes_resolve_and_bad_ones_name_the_allowed():
    assert resolve_device("cpu") == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if CUDA else "cpu")
    assert resolve_dtype("auto", torch.device("cpu")) is torch.float32
    assert resolve_dtype("auto", torch.device("cuda")) is torch.bfloat16
    assert resolve_dtype("bfloat16", torch.device("cpu")) is torch.bfloat16
    with pytest.raises(ValueError, match=r"device='gpu'; allowed: auto, cpu, cuda, cuda:N"):
        resolve_device("gpu")
    with pytest.raises(ValueError, match=r"dtype='fp16'; allowed: auto, float32, bfloat16"):
        resolve_dtype("fp16", torch.device("cpu"))
    with pytest.raises(ValueError, match=r"device='cuda:x'; allowed"):
        TrainConfig(max_steps=1, lr=1e-3, device="cuda:x")
    if not CUDA:
        with pytest.raises(ValueError, match=r"device='cuda:1': this machine has 0 CUDA device\(s\); allowed: cpu"):
            resolve_device("cuda:1")


def test_load_model_takes_a_device_and_a_dtype(tiny_model_dir):
    from repro.models import load_model

    m = load_model(tiny_model_dir, device="cpu", dtype="bfloat16")
    assert model_device(m) == torch.device("cpu") and next(m.parameters()).dtype is torch.bfloat16
    assert next(load_model(tiny_model_dir).parameters()).dtype is torch.float32  # unchanged default
    with pytest.raises(ValueError, match="dtype='half'; allowed"):
        load_model(tiny_model_dir, dtype="half")


# -- the guard itself ---------------------------------------------------------------------------------------------

def test_the_guard_passes_placed_batches_and_catches_a_batch_left_on_the_cpu():
    model = _model(100)
    b = _batch()
    with DeviceGuard(model) as g:
        batch = {k: torch.as_tensor(v, device=model_device(model)) for k, v in b.items()}
        loss, _ = clm_step(model, batch, False)
        loss.backward()
    assert g.checked > 20  # it saw the forward
    with pytest.raises(DeviceMismatch, match=r"embedding takes tensors on the model's device and 1 created without"):
        with DeviceGuard(model):
            clm_step(model, {k: torch.as_tensor(v) for k, v in b.items()}, False)  # planted: batch left behind


def test_the_guard_catches_a_planted_trainer_bug(monkeypatch, tmp_path):
    """The trainer with its batch built as before it knew of devices (``torch.as_tensor(v)``) fails under the
    guard; as it is, it passes."""
    import repro.train.trainer as trainer_module

    model, p = _model(100), get_profile("smoke")
    cfg = TrainConfig(max_steps=1, lr=1e-3, checkpoint_every=0, device="cpu")
    with DeviceGuard(model):
        Trainer(model, ToyMethod(100), cfg, tmp_path / "ok", progress=False).train()

    real = torch.as_tensor
    monkeypatch.setattr(trainer_module.torch, "as_tensor", lambda v, device=None, **kw: real(v, **kw))
    with pytest.raises(DeviceMismatch):
        with DeviceGuard(model):
            Trainer(model, ToyMethod(100), cfg, tmp_path / "bad", progress=False).train()
    assert p.name == "smoke"


# -- every recipe's method, the generator and the analyses ---------------------------------------------------------

def _rows(tok, n_docs: int = 40, length: int = 700):
    from repro.data.synthetic import CorpusRows

    rng = np.random.default_rng(1)
    docs = [rng.integers(3, len(tok), size=length) for _ in range(n_docs)]
    return docs, CorpusRows(np.concatenate(docs).astype(np.int64),
                            np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64))


METHODS = ("flt", "pose", "rpes", "longrecipe", "selfdistill", "longce", "cdt", "prolong")
"""Every method of the command line."""


def _recipe_run(method: str, tok, **cfg_overrides):
    """(model, method, train config) of one command-line method on a tiny model, rows and streams built here."""
    from repro.data.streams import TokenStream

    arm = METHOD_NAMES[method]
    p = scaled_profile(get_profile("smoke"), 128, base_window=64, steps=2, batch_size=2,
                       extend={"threads": 0, "checkpoint_every": 0})
    docs, rows = _rows(tok)
    plan = build_arm(p, arm)
    if plan.data == "streams":
        short = [d[:50] for d in docs]
        data = ArmData(streams=[TokenStream(n, docs if n in p.prolong.long_streams else short, seed=0)
                                for n, _ in p.prolong.sources])
    else:
        data = ArmData(corpus_rows=rows, anchors=np.arange(3, 60) if plan.needs_anchors else None)
    spec = build_arm(p, arm, tok, data)
    model = _model(len(tok), max(512, spec.model.get("max_positions") or 0))
    prepare_model(p, spec.method, model)
    return model, spec.method, replace(spec.train, **{"max_steps": 2, **cfg_overrides})


@pytest.mark.parametrize("method", METHODS)
def test_every_recipe_trains_with_every_tensor_on_the_models_device(method, small_tokenizer, tmp_path):
    model, m, cfg = _recipe_run(method, small_tokenizer)
    with DeviceGuard(model) as g:
        Trainer(model, m, cfg, tmp_path / method, progress=False).train()
    assert g.checked > 50


def test_generation_and_the_analyses_keep_to_the_models_device(small_tokenizer):
    from repro.analysis.attention_distance import query_attention
    from repro.analysis.attention_map import chunked_attention_map
    from repro.analysis.longppl import key_tokens, longppl
    from repro.analysis.ig import naive_token_scores, token_scores
    from repro.analysis.longppl import LongPPLConfig, lsd_scores
    from repro.analysis.tokens import logit_changes
    from repro.generate import greedy_generate

    tok = small_tokenizer
    model = _model(len(tok)).eval()
    ids = np.random.default_rng(2).integers(3, len(tok), size=48)
    with DeviceGuard(model) as g:
        assert len(greedy_generate(model, tok, ["a b c", "the key is"], 4)) == 2
        token_scores(model, ids, answer_positions=[40, 41])
        naive_token_scores(model, ids, answer_positions=[40, 41])
        lsd_scores(model, torch.as_tensor(ids[None], device=model_device(model)), LongPPLConfig.scaled(16))
        logit_changes(model, model, ids[None])
        placed = torch.as_tensor(ids[None], device=model_device(model))
        query_attention(model, placed, 4, reduce=lambda k, r: None)
        longppl(model, placed, key_tokens(model, placed, LongPPLConfig.scaled(16)))
        chunked_attention_map(model, ids, n_chunks=4, block=16)
    assert g.checked > 200


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
@pytest.mark.parametrize("method", METHODS)
def test_one_step_of_every_recipe_on_cuda_in_bf16(method, small_tokenizer, tmp_path):
    import math

    from repro.io import read_jsonl

    model, m, cfg = _recipe_run(method, small_tokenizer, max_steps=1, bf16=True, device="cuda")
    Trainer(model, m, cfg, tmp_path / method, progress=False).train()
    assert model_device(model).type == "cuda"
    assert all(math.isfinite(r["loss"]) for r in read_jsonl(tmp_path / method / "metrics.jsonl"))


@pytest.mark.gpu
@pytest.mark.skipif(not CUDA, reason="needs a CUDA GPU")
def test_generation_and_ig_on_cuda(small_tokenizer):
    from repro.analysis.ig import naive_token_scores, token_scores
    from repro.generate import encode_left, greedy_ids

    tok = small_tokenizer
    gpu = _model(len(tok)).eval().to("cuda")
    ids, mask = encode_left(tok, ["a b c", "the key is here"], "cuda")
    ours = greedy_ids(gpu, ids, mask, 8, None, tok.pad_token_id)
    ref = gpu.generate(input_ids=ids, attention_mask=mask, max_new_tokens=8, do_sample=False, use_cache=True,
                       pad_token_id=tok.pad_token_id)[:, ids.shape[1]:]
    assert ours.device.type == "cuda" and torch.equal(ours, ref[:, :ours.shape[1]])
    row = np.random.default_rng(2).integers(3, len(tok), size=48)
    a = token_scores(gpu, row, answer_positions=[40, 41])
    b = naive_token_scores(gpu, row, answer_positions=[40, 41])
    assert np.allclose(a.ig, b.ig, rtol=1e-3, atol=1e-6)


def test_cdt_scores_detection_and_denoising_keep_to_the_models_device(small_tokenizer):
    from repro.analysis.cdt_record import analysis_samples
    from repro.analysis.cdt_scores import denoising_sweep, manual_denoising, score_sample

    tok, p = small_tokenizer, get_profile("smoke").override(cdt={"analysis_samples": 2})
    model = _model(len(tok)).eval()
    samples = analysis_samples(p, tok)
    with DeviceGuard(model) as g:
        score_sample(model, samples[0], 4, 2)
        manual_denoising(model, samples[0], 1.0)
        denoising_sweep(model, samples, (1.0,), 1e-3)
    assert g.checked > 200
