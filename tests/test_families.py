"""Every registered method on tiny random Llama, Qwen2, Qwen3 and Mistral models; the forward paths, safe loading
and the architecture gate on each family."""

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig

from repro.data.corpus import iter_code
from repro.data.mixing import Mixture
from repro.data.streams import TokenStream
from repro.data.synthetic import CorpusRows
from repro.families import FAMILIES, build_family, check_architecture, tiny_family_config
from repro.methods import METHODS, get_method
from repro.methods.arms import EXTENSION_METHODS, RP_ARMS
from repro.methods.cdt import CDTSpec, ContextDenoising
from repro.methods.longce import LongCEConfig
from repro.methods.prolong import ProLongMix
from repro.methods.selfdistill import SelfDistillation, SelfDistillSpec
from repro.models import forward, forward_hidden, load_model, plain_head_weight
from repro.profiles import get_profile
from repro.train import Trainer, TrainConfig, clm_step

TARGET = 128
"""Target window of the extension rows: FLT (and so self-distillation and CDT) trains on rows of this many
tokens, the short-sample arms on half of it."""
SAMPLE_RATIO = 0.5
MAX_POSITIONS = 512
"""Above every index a method reaches here (the skip view's largest is 2 x TARGET)."""
STEPS = 8
LONGCE = LongCEConfig(window=32, stride=16)
"""Short windows well inside a row, so LongCE's weights are not all 1."""


@pytest.fixture(scope="module")
def corpus_rows(small_tokenizer):
    """The method tests' corpus rows (code documents, tokenized)."""
    ids = [small_tokenizer(d.text).input_ids for d in iter_code(max_bytes=60_000)]
    toks = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids])
    return CorpusRows(toks, np.concatenate([[0], np.cumsum([len(i) for i in ids])]))


# -- the methods, by registered name --------------------------------------------------------------------------
def _extension(arm):
    def build(tok, corpus):
        spec = EXTENSION_METHODS[arm]
        anchors = np.arange(10, 60) if spec.selection == "anchors" else None  # any ids: the rows must build
        return get_method("extension", name=arm, spec=spec, target=TARGET, batch_size=2, retrieval_fraction=0.5,
                          tokenizer=tok, corpus=corpus, seed=0, sample_len=spec.resolve_len(TARGET, SAMPLE_RATIO),
                          anchors=anchors)
    return build


def _selfdistill(name, spec):
    def build(tok, corpus):
        return SelfDistillation(name=name, spec=spec, inner=_extension("flt")(tok, corpus), seed=0,
                                pad_id=tok.pad_token_id, longce=LONGCE if spec.longce else None)
    return build


def _cdt(tok, corpus):
    return ContextDenoising(name="cdt", spec=CDTSpec(), inner=_extension("flt")(tok, corpus), pad_id=tok.pad_token_id)


def _prolong(tok, corpus):
    docs = np.split(corpus.tokens, corpus.offsets[1:-1])
    short = [d[i:i + 24] for d in docs for i in range(0, len(d), 24)]  # several documents per packed row
    mix = Mixture([TokenStream("long", docs), TokenStream("short", short)], {"long": 0.5, "short": 0.5})
    return ProLongMix(name="prolong", mixture=mix, length=TARGET, batch_size=2, pad_id=tok.pad_token_id,
                      doc_masks=True)


def _base(name):
    def build(tok, corpus):
        base = get_profile("smoke").base
        cfg = replace(base, copy_rows=2, copy_row_len=64, retrieval_lengths=(TARGET,), tokens_per_step=2 * TARGET)
        return get_method(name, cfg=cfg, tokenizer=tok, corpus=corpus, vocab_size=len(tok))
    return build


BUILDERS = {
    "extension": {arm: _extension(arm) for arm in EXTENSION_METHODS},
    "selfdistill": {arm: _selfdistill(arm, RP_ARMS[arm].spec) for arm in ("rp_skip", "rp_skip_longce", "rp_longce")},
    "cdt": {"cdt": _cdt},
    "prolong_mix": {"prolong": _prolong},
    "base_curriculum": {"base_curriculum": _base("base_curriculum")},
    "replay": {"replay": _base("replay")},
}
"""Registered method name -> its variants trained here -> a builder ``(tokenizer, corpus rows) -> method``."""
CASES = [(method, variant) for method, variants in BUILDERS.items() for variant in variants]


class SameBatch:
    """``method`` with its step-0 batch at every step and no early stop: a batch to memorise for exactly
    ``max_steps`` steps. Every other member (``loss``, ``lr_scale``, ...) is the method's."""

    def __init__(self, method):
        self.method, self._batch = method, None

    def batch(self, step: int) -> dict[str, np.ndarray]:
        if self._batch is None:
            self._batch = self.method.batch(0)
        return self._batch

    def finished(self, step: int) -> bool:
        return False

    def __getattr__(self, name):
        return getattr(self.method, name)


def test_every_registered_method_has_a_builder():
    assert set(METHODS) <= set(BUILDERS)  # and the objectives built from their classes
    assert set(BUILDERS["extension"]) == set(EXTENSION_METHODS)
    # the skip view, the skip view + LongCE, and LongCE alone (the standard CLM with LongCE's weights)
    assert RP_ARMS["rp_skip"].spec == SelfDistillSpec()
    assert RP_ARMS["rp_skip_longce"].spec == SelfDistillSpec(longce=True)
    assert RP_ARMS["rp_longce"].spec == SelfDistillSpec(consistency="none", longce=True)


def _batch_ce(model, batch: dict[str, np.ndarray]) -> float:
    """The weighted CLM loss of ``batch`` under ``model`` (no gradient): the memorisation every method shows."""
    with torch.no_grad():
        return clm_step(model.eval(), {k: torch.as_tensor(v) for k, v in batch.items()}, bf16=False)[0].item()


@pytest.mark.parametrize("method, variant", CASES, ids=[v for _, v in CASES])
@pytest.mark.parametrize("family", FAMILIES)
def test_method_trains_on_family(family, method, variant, small_tokenizer, corpus_rows, tmp_path):
    m = SameBatch(BUILDERS[method][variant](small_tokenizer, corpus_rows))
    model = build_family(family, len(small_tokenizer), MAX_POSITIONS, bos_token_id=small_tokenizer.bos_token_id,
                         eos_token_id=small_tokenizer.eos_token_id, pad_token_id=small_tokenizer.pad_token_id)
    assert model.config.model_type == family
    ce_before = _batch_ce(model, m.batch(0))
    cfg = TrainConfig(max_steps=STEPS, lr=3e-3, schedule="constant", checkpoint_every=0, threads=1)
    final = Trainer(model, m, cfg, tmp_path, progress=False).train()
    rows = [json.loads(line) for line in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in rows]
    assert len(losses) == STEPS and all(np.isfinite(losses)), losses
    assert ce_before > 5.0 and _batch_ce(model, m.batch(0)) < ce_before - 1.0, (ce_before, losses)
    if getattr(getattr(m, "spec", None), "longce", False):
        # LongCE's objective (the official undivided mean) weights each target up to 5x as the long context
        # starts to help it, so on a memorised batch the objective itself may rise while the CE falls
        assert rows[-1]["longce_mean_weight"] > rows[0]["longce_mean_weight"], rows
    else:
        assert losses[-1] < losses[0] - 0.5, losses
    assert (final / "model.safetensors").exists()


# -- the forward paths ----------------------------------------------------------------------------------------
def _model(family, **kw):
    return build_family(family, 97, 256, initializer_range=0.2, **kw).eval()


@pytest.mark.parametrize("family", FAMILIES)
def test_forward_paths_match_the_models_own_logits(family):
    model = _model(family)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 97, (2, 20), generator=g)
    pos = torch.cat([torch.arange(10), torch.arange(10) + 50]).repeat(2, 1)  # a PoSE-like jump
    head = plain_head_weight(model)
    assert head is not None and head.shape == (97, 64)
    with torch.no_grad():
        own = model(ids, position_ids=pos, attention_mask=torch.ones_like(ids), use_cache=False).logits
        ours = forward(model, ids, pos).logits
        hidden = forward_hidden(model, ids, pos)
        # packed documents (positions restart): each one's logits equal a run on it alone
        doc = torch.tensor([[0] * 12 + [1] * 8] * 2)
        restart = torch.cat([torch.arange(12), torch.arange(8)]).repeat(2, 1)
        packed = forward(model, ids, restart, doc).logits
        packed_hidden = forward_hidden(model, ids, restart, doc)
        alone = [model(ids[:, :12], use_cache=False).logits, model(ids[:, 12:], use_cache=False).logits]
    assert own.abs().amax() > 0.1  # outputs large enough for the comparisons to mean something
    torch.testing.assert_close(ours, own, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(hidden @ head.T, own, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed, torch.cat(alone, 1), atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(packed_hidden @ head.T, packed, atol=1e-5, rtol=1e-5)
    assert (packed[:, 12:] - own[:, 12:]).abs().amax() > 1e-3  # the second document did not see the first


@pytest.mark.parametrize("family", FAMILIES)
def test_family_config_is_the_familys_own(family):
    cfg = tiny_family_config(family, 97, 256, rope_theta=500.0)
    assert type(cfg).__name__.lower().startswith(family) and cfg.model_type == family
    assert cfg.rope_parameters == {"rope_type": "default", "rope_theta": 500.0}
    assert (cfg.hidden_size, cfg.num_hidden_layers, cfg.head_dim, cfg.use_cache) == (64, 2, 16, False)
    assert getattr(cfg, "sliding_window", None) is None
    check_architecture(cfg)


def test_family_refusals():
    with pytest.raises(ValueError, match="unknown model family 'gpt2'; allowed: llama, qwen2, qwen3, mistral"):
        build_family("gpt2", 97, 256)
    with pytest.raises(ValueError, match=r"LlamaConfig has no field\(s\) \['rope_thta'\]"):
        tiny_family_config("llama", 97, 256, rope_thta=1.0)
    with pytest.raises(ValueError, match="num_heads divides hidden_size"):
        tiny_family_config("qwen3", 97, 256, hidden_size=60, num_heads=8)


# -- loading --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_load_model_round_trip(family, tmp_path):
    model = _model(family)
    model.save_pretrained(tmp_path / "ck")
    assert (tmp_path / "ck" / "model.safetensors").exists()
    assert not list((tmp_path / "ck").glob("*.bin"))
    loaded = load_model(tmp_path / "ck").eval()
    assert type(loaded) is type(model) and loaded.config.model_type == family
    ids = torch.randint(0, 97, (1, 24), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        torch.testing.assert_close(forward(loaded, ids).logits, forward(model, ids).logits, atol=0, rtol=0)


def test_pickled_weights_are_refused_unread(tmp_path, monkeypatch):
    model = _model("llama")
    model.config.save_pretrained(tmp_path)
    torch.save(model.state_dict(), tmp_path / "pytorch_model.bin")

    def no_unpickling(*a, **kw):
        raise AssertionError("pickled weights were read")

    monkeypatch.setattr(torch, "load", no_unpickling)
    with pytest.raises(ValueError, match=r"holds only pickled weights \(pytorch_model.bin\); loading them would "
                                         r"unpickle"):
        load_model(tmp_path)
    (tmp_path / "pytorch_model.bin").rename(tmp_path / "weights.pt")
    with pytest.raises(ValueError, match=r"only pickled weights \(weights.pt\)"):
        load_model(tmp_path)


def ship_model_code(folder, marker) -> None:
    """Make the saved Llama in ``folder`` a checkpoint that ships its own model code (``modeling_shipped.py``, a
    Llama subclass, mapped by ``auto_map`` in config.json); importing that code writes ``marker``."""
    (folder / "modeling_shipped.py").write_text(
        "from pathlib import Path\n"
        "from transformers import LlamaConfig, LlamaForCausalLM\n"
        f"Path({str(marker)!r}).write_text('code ran')\n"
        "class ShippedConfig(LlamaConfig):\n"
        "    model_type = 'shipped'\n"
        "class ShippedForCausalLM(LlamaForCausalLM):\n"
        "    config_class = ShippedConfig\n")
    cfg = json.loads((folder / "config.json").read_text())
    cfg.update(model_type="shipped", auto_map={"AutoConfig": "modeling_shipped.ShippedConfig",
                                               "AutoModelForCausalLM": "modeling_shipped.ShippedForCausalLM"})
    (folder / "config.json").write_text(json.dumps(cfg))


def test_shipped_code_runs_only_with_trust_remote_code(tmp_path):
    """A checkpoint shipping its own model code: not imported by default; with ``trust_remote_code=True`` it
    loads (its class passes the architecture gate: a Llama subclass)."""
    marker = tmp_path / "ran"
    _model("llama").save_pretrained(tmp_path)
    ship_model_code(tmp_path, marker)
    with pytest.raises(ValueError, match="trust_remote_code"):
        load_model(tmp_path)
    assert not marker.exists()
    model = load_model(tmp_path, trust_remote_code=True)
    assert marker.exists() and type(model).__name__ == "ShippedForCausalLM"
    ids = torch.randint(0, 97, (1, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        torch.testing.assert_close(forward(model.eval(), ids).logits, forward(_model("llama"), ids).logits)


def test_unsupported_architectures_are_refused(tmp_path):
    gpt2 = GPT2Config(vocab_size=97, n_embd=32, n_layer=1, n_head=2, n_positions=64)
    with pytest.raises(ValueError, match=r"unsupported architecture model_type='gpt2': no rotary position "
                                         r"embeddings .*supported: llama, qwen2, qwen3, mistral"):
        check_architecture(gpt2)
    torch.manual_seed(0)
    GPT2LMHeadModel(gpt2).save_pretrained(tmp_path / "gpt2")
    with pytest.raises(ValueError, match="unsupported architecture model_type='gpt2'"):
        load_model(tmp_path / "gpt2")

    class NoPositions(torch.nn.Module):
        def forward(self, input_ids, attention_mask=None):
            return input_ids

    with pytest.raises(ValueError, match=r"model_type='llama': NoPositions.forward takes no position_ids.*"
                                         r"supported: llama, qwen2, qwen3, mistral"):
        check_architecture(LlamaConfig(), NoPositions)
