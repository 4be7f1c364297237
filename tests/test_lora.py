"""LoRA through peft for every method: only adapters (and the chosen extras) move, the loss falls, adapters and
the merged model are saved and agree, a LoRA run resumes bit-exactly; activation checkpointing leaves every
gradient unchanged (float64) for CLM, self-distillation and CDT; errors name the bad value."""

import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro.io import read_jsonl
from repro.lora import (EXTRAS_FILE, LONGLORA_TRAINABLE, LoraSpec, apply_lora, load_adapter, merge_lora,
                        save_adapter, trainable_parameter_names)
from repro.methods import Extension, ExtensionSpec
from repro.methods.cdt import CDTSpec, ContextDenoising, cdt_loss
from repro.methods.selfdistill import SelfDistillation, SelfDistillSpec, selfdistill_loss
from repro.models import build_tiny, forward, load_model, recomputes_layers
from repro.profiles import ModelConfig
from repro.train import Interrupted, Trainer, TrainConfig, clm_step
from tests.methods import conftest as methods_conftest
from tests.methods.test_cdt import _Rows
from tests.methods.test_cdt import _batch as _cdt_batch
from tests.methods.test_prolong import _method as _prolong_method
from tests.methods.test_selfdistill import _assert_close, _grads, _model
from tests.methods.test_selfdistill import _batch as _sd_batch

corpus_rows = methods_conftest.corpus_rows
"""The method tests' fixture (code rows of the small tokenizer)."""
TINY = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=2, num_heads=4, num_kv_heads=2, init_std=0.2)
SPEC = LoraSpec(r=4, alpha=8.0)


@pytest.fixture(autouse=True)
def one_thread():
    """These models are tiny: one thread is fastest, and immune to other processes on the same cores."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def _tiny(tok):
    return build_tiny(TINY, len(tok), 1024, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id)


def _pose(tok, corpus):
    m = Extension("pose", ExtensionSpec("pose", 48), 256, batch_size=2, retrieval_fraction=0.0, tokenizer=tok,
                  corpus=corpus, seed=0)
    return m, _tiny(tok)


def _selfdistill(tok, corpus):
    return SelfDistillation("sd", SelfDistillSpec(), _Rows(_cdt_batch(T=32, dtype=torch.float32)), seed=0,
                            pad_id=0), _model(dtype=torch.float32)


def _cdt(tok, corpus):
    return ContextDenoising("cdt", CDTSpec(), _Rows(_cdt_batch(T=32, dtype=torch.float32)), pad_id=None), \
        _model(dtype=torch.float32)


def _prolong(tok, corpus):
    m = _prolong_method(tok)
    m.length, m.batch_size = 96, 2  # shorter rows: a faster test
    return m, _tiny(tok)


BUILDERS = {"pose": _pose, "selfdistill": _selfdistill, "cdt": _cdt, "prolong_mix": _prolong}


def _params(model):
    return {n: p.detach().clone() for n, p in model.named_parameters()}


def _memorise(method):
    """The method's step-0 batch at every step (a batch the model can learn by heart)."""
    first = method.batch
    method.batch = lambda step: first(0)
    return method


@pytest.mark.parametrize("name", list(BUILDERS))
def test_lora_run_moves_only_adapters_and_merged_model_matches(name, small_tokenizer, corpus_rows, tmp_path):
    method, base = BUILDERS[name](small_tokenizer, corpus_rows)
    model = apply_lora(base, SPEC)
    start = _params(model)
    cfg = TrainConfig(max_steps=16, lr=3e-2, schedule="constant", checkpoint_every=0)
    final = Trainer(model, _memorise(method), cfg, tmp_path, progress=False).train()
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, start[n])}
    assert moved and all(".lora_A." in n or ".lora_B." in n for n in moved), sorted(moved)
    assert {n for n in start if ".lora_B." in n} <= moved  # every adapter learned something
    assert moved == set(trainable_parameter_names(model))
    losses = [r["loss"] for r in read_jsonl(tmp_path / "metrics.jsonl")]
    assert losses[-1] < 0.9 * losses[0], losses
    # adapters as safetensors; the merged final model computes what the adapter model computes
    adapter = load_file(final / "adapter" / "adapter_model.safetensors")
    assert len(adapter) == 4 * 2 * base.config.num_hidden_layers and not (final / "adapter" / EXTRAS_FILE).exists()
    merged = load_model(final)
    assert type(merged).__name__ == type(base).__name__
    b = {k: torch.as_tensor(v) for k, v in method.batch(0).items()}
    with torch.no_grad():
        want = forward(model, b["input_ids"], b["position_ids"], b.get("doc_ids")).logits
        got = forward(merged.eval(), b["input_ids"], b["position_ids"], b.get("doc_ids")).logits
    assert (got - want).abs().max().item() < 1e-4 * max(1.0, want.abs().max().item())


def test_longlora_extras_train_embeddings_and_norms_and_reload(tmp_path):
    method = _Rows(_cdt_batch(T=32, dtype=torch.float32))
    model = apply_lora(_model(dtype=torch.float32), LoraSpec(r=2, trainable=LONGLORA_TRAINABLE))
    start = _params(model)
    Trainer(model, method, TrainConfig(max_steps=3, lr=1e-2, checkpoint_every=0), tmp_path, progress=False).train()
    moved = {n for n, p in model.named_parameters() if not torch.equal(p, start[n])}
    extras = {n for n in moved if ".lora_" not in n}
    assert "base_model.model.model.embed_tokens.weight" in extras
    assert "base_model.model.model.norm.weight" in extras
    assert "base_model.model.model.layers.1.input_layernorm.weight" in extras
    assert all("embed_tokens" in n or "norm" in n for n in extras)
    assert not any("base_layer" in n or "mlp" in n for n in moved)
    assert load_file(tmp_path / "final" / "adapter" / EXTRAS_FILE).keys() == \
        {n.removeprefix("base_model.model.") for n in extras}
    # the adapter folder on a fresh base model gives the trained model's logits, exactly
    again = load_adapter(_model(dtype=torch.float32), tmp_path / "final" / "adapter")
    ids = torch.as_tensor(method.b["input_ids"])
    with torch.no_grad():
        assert torch.equal(forward(again, ids).logits, forward(model.eval(), ids).logits)
    assert trainable_parameter_names(again) == []


def test_adapters_start_from_the_seed_and_leave_the_callers_random_state():
    """The same seed gives the same adapters in every run and process (a multi-process run's ranks agree, and two
    runs of one command give the same bits); another seed others; torch's own stream is not advanced."""
    def adapters(seed):
        model = apply_lora(_model(dtype=torch.float32), LoraSpec(r=2), seed=seed)
        return {n: p.detach().clone() for n, p in model.named_parameters() if ".lora_A" in n}

    torch.manual_seed(123)
    a = adapters(5)
    torch.manual_seed(321)
    b = adapters(5)
    assert a.keys() == b.keys() and all(torch.equal(a[n], b[n]) for n in a)
    assert not all(torch.equal(a[n], v) for n, v in adapters(6).items())
    model = _model(dtype=torch.float32)
    torch.manual_seed(123)
    apply_lora(model, LoraSpec(r=2), seed=5)
    after = torch.rand(1)
    torch.manual_seed(123)
    assert torch.equal(torch.rand(1), after)


def test_merge_is_exact_in_float64(tmp_path):
    model = apply_lora(_model(), LoraSpec(r=4, trainable=("norm",)))
    with torch.no_grad():
        for n, p in model.named_parameters():
            if ".lora_B." in n or "norm" in n:
                p.add_(0.1 * torch.randn_like(p))
    save_adapter(model, tmp_path / "a")
    assert {p.name for p in (tmp_path / "a").iterdir()} >= {"adapter_model.safetensors", "adapter_config.json",
                                                          EXTRAS_FILE}
    ids = torch.as_tensor(_cdt_batch()["input_ids"])
    with torch.no_grad():
        want = forward(model, ids).logits
        base = forward(_model(), ids).logits
        got = forward(merge_lora(model), ids).logits
    assert (want - base).abs().max().item() > 0.1  # the adapters matter
    assert (got - want).abs().max().item() < 1e-12


def test_lora_run_resumes_bit_exactly(tmp_path):
    """Tied embeddings under peft's key prefix; the optimizer holds state for trainable parameters only."""
    def make(seed):
        base = _model(dtype=torch.float32, tie_word_embeddings=True)
        torch.manual_seed(seed)  # the adapters' init: a resumed run must take them from the checkpoint
        return apply_lora(base, SPEC)

    method = _Rows(_cdt_batch(T=16, dtype=torch.float32))
    cfg = TrainConfig(max_steps=5, lr=1e-2, warmup_steps=1, checkpoint_every=2)
    ref = make(0)
    t = Trainer(ref, method, cfg, tmp_path / "ref", progress=False)
    t.train()
    assert len(t.opt.state) == len(trainable_parameter_names(ref)) == 4 * 2 * 2
    with pytest.raises(Interrupted):
        Trainer(make(0), method, cfg, tmp_path / "run", progress=False).train(stop_after=3)
    fresh = make(123)
    Trainer(fresh, method, cfg, tmp_path / "run", progress=False).train()
    a, b = ref.state_dict(), fresh.state_dict()
    assert a.keys() == b.keys()
    assert all(torch.equal(a[k], b[k]) for k in a)


# -- activation checkpointing: the same gradients (float64) -------------------------------------------------------
def _with_and_without_checkpointing(model, loss_of):
    model.train()
    ref = _grads(model, loss_of(model))
    model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
    assert recomputes_layers(model)
    got = _grads(model, loss_of(model))
    model.activation_checkpointing_disable()
    assert ref and not recomputes_layers(model)
    return ref, got


@pytest.mark.parametrize("lora", [False, True])
def test_checkpointing_keeps_clm_gradients(lora):
    model = _model()
    if lora:
        model = apply_lora(model, SPEC)
        with torch.no_grad():
            for n, p in model.named_parameters():
                if ".lora_B." in n:
                    p.normal_(0, 0.1)
    batch = _cdt_batch()
    ref, got = _with_and_without_checkpointing(model, lambda m: clm_step(m, batch, False)[0])
    assert len(ref) == (16 if lora else len(list(model.parameters())))
    _assert_close(got, ref, 1e-12)


def test_checkpointing_keeps_selfdistill_gradients():
    """Under checkpointing (whose layers drop the key/value cache) the skip view runs as two full passes: the
    gradients of two full passes without checkpointing, and those of the prefix-shared pass to the float32
    rounding of transformers' RMSNorm (``test_shared_prefix_equals_two_passes_float64``)."""
    batch = _sd_batch([5, 11], [7, 30], T=24)
    two_passes, got = _with_and_without_checkpointing(
        _model(), lambda m: selfdistill_loss(m, batch, SelfDistillSpec(shared_prefix=False))[0])
    _assert_close(got, two_passes, 1e-12)
    shared, got = _with_and_without_checkpointing(_model(), lambda m: selfdistill_loss(m, batch, SelfDistillSpec())[0])
    _assert_close(got, two_passes, 1e-12)
    _assert_close(got, shared, 1e-6)
    assert max((got[n] - shared[n]).abs().max().item() for n in got) > 0  # the shared pass did run without it


def test_checkpointing_keeps_cdt_gradients():
    batch = _cdt_batch()
    ref, got = _with_and_without_checkpointing(_model(), lambda m: cdt_loss(m, batch, CDTSpec(), lr=1e-2)[0])
    assert "model.embed_tokens.weight" in ref
    _assert_close(got, ref, 1e-12)


def test_trainer_with_checkpointing_and_lora(tmp_path):
    method = SelfDistillation("sd", SelfDistillSpec(), _Rows(_cdt_batch(T=24, dtype=torch.float32)), seed=0,
                              pad_id=0)
    out = {}
    for gc in (False, True):
        model = apply_lora(_model(dtype=torch.float32), SPEC)
        cfg = TrainConfig(max_steps=3, lr=1e-2, checkpoint_every=0, gradient_checkpointing=gc)
        Trainer(model, method, cfg, tmp_path / str(gc), progress=False).train()
        assert recomputes_layers(model.train()) == gc
        out[gc] = dict(model.named_parameters())
    for n, p in out[True].items():
        assert torch.allclose(p, out[False][n], rtol=1e-5, atol=1e-6), n


# -- errors -------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kw, match", [
    ({"r": 0}, "r=0; allowed: an int >= 1"), ({"r": 2.5}, "r=2.5; allowed: an int >= 1"),
    ({"alpha": 0.0}, "alpha=0.0; allowed: a finite value > 0"), ({"alpha": math.inf}, "alpha=inf"),
    ({"dropout": 1.0}, r"dropout=1.0; allowed: 0 <= dropout < 1"),
    ({"target_modules": ()}, r"target_modules=\(\); allowed: at least one"),
    ({"target_modules": "q_proj"}, "target_modules='q_proj'; allowed: a tuple"),
    ({"trainable": ("",)}, r"trainable=\('',\); allowed: a tuple of non-empty"),
])
def test_spec_errors_name_the_value(kw, match):
    with pytest.raises(ValueError, match=match):
        LoraSpec(**kw)


def test_apply_errors_name_the_module():
    with pytest.raises(ValueError, match=r"\['c_attn'\] match no module of LlamaForCausalLM; its linear modules: "
                                         "down_proj, gate_proj, k_proj, lm_head, o_proj, q_proj, up_proj, v_proj"):
        apply_lora(_model(), LoraSpec(target_modules=("q_proj", "c_attn")))
    with pytest.raises(ValueError, match="trainable='layernorm_x' matches no parameter"):
        apply_lora(_model(), LoraSpec(trainable=("layernorm_x",)))
    with pytest.raises(TypeError, match="needs a peft model"):
        save_adapter(_model(), "unused")
    with pytest.raises(FileNotFoundError, match="has no adapter_config.json"):
        load_adapter(_model(), np.__file__.rsplit("/", 1)[0])
