"""Building the tiny Llama, loading any HF causal LM, and the one forward path.

Masking policy of :func:`forward` (pinned by ``tests/test_models.py``; see the
two transformers 5.23 traps in docs/own_model.md):

* plain rows: an explicit all-ones ``attention_mask`` (fully causal), so jumps
  in custom ``position_ids`` (PoSE, LongRecipe, skip views) are NOT read as
  packed-document boundaries;
* packed rows whose positions restart per document: ``attention_mask=None``
  with the restarting ``position_ids`` and ``use_cache=False``; transformers
  builds the block-diagonal mask for sdpa and eager, ``sdpa_varlen``
  (:mod:`repro.attention.doc_masked`) reads the restarts and attends within
  each document alone, and the flash-attn implementations also get the
  boundaries as ``cu_seq_lens_q/k`` kwargs (transformers reads packing from
  ``position_ids`` there only at batch 1);
* packed rows with transformed positions: an explicit additive float 4-D mask
  (a boolean 4-D mask is misread by the eager kernel).
"""

from __future__ import annotations

import contextlib
import json
import math
from pathlib import Path
from typing import Iterator

import torch
from huggingface_hub.errors import StrictDataclassError
from safetensors import SafetensorError
from transformers import AutoConfig, AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM
from transformers import __version__ as transformers_version
from transformers.models.auto.configuration_auto import CONFIG_MAPPING
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.modeling_rope_utils import ROPE_INIT_FUNCTIONS
from transformers.utils import logging as hf_logging

from repro.attention.doc_masked import boundary_kwargs, check_attn_implementation
from repro.data.packing import is_packed_restart
from repro.devices import resolve_device, resolve_dtype
from repro.families import FAMILIES, check_architecture, check_sizes
from repro.parallel.rows import active, decoder_hidden, head_logits, head_weight
from repro.profiles import ModelConfig


def tiny_config(cfg: ModelConfig, vocab_size: int, max_positions: int, bos_id: int, eos_id: int,
                pad_id: int) -> LlamaConfig:
    """The ``LlamaConfig`` of ``cfg`` with the tokenizer's vocabulary and special ids; ``vocab_size`` and
    ``max_positions`` must be integers >= 1 (:func:`check_sizes`)."""
    check_sizes(vocab_size, max_positions)
    return LlamaConfig(
        vocab_size=vocab_size, hidden_size=cfg.hidden_size, intermediate_size=cfg.intermediate_size,
        num_hidden_layers=cfg.num_layers, num_attention_heads=cfg.num_heads, num_key_value_heads=cfg.num_kv_heads,
        max_position_embeddings=max_positions, rope_parameters={"rope_type": "default", "rope_theta": cfg.rope_theta},
        tie_word_embeddings=cfg.tie_embeddings, initializer_range=cfg.init_std,
        bos_token_id=bos_id, eos_token_id=eos_id, pad_token_id=pad_id, use_cache=False,
        attn_implementation=cfg.attn_implementation)


def build_tiny(cfg: ModelConfig, vocab_size: int, max_positions: int, bos_id: int, eos_id: int, pad_id: int,
               seed: int = 0) -> LlamaForCausalLM:
    """A freshly initialised Llama-architecture model (seeded)."""
    torch.manual_seed(seed)
    return LlamaForCausalLM(tiny_config(cfg, vocab_size, max_positions, bos_id, eos_id, pad_id))


def n_params(model: torch.nn.Module) -> int:
    """Parameter count with tied weights counted once."""
    return sum(p.numel() for p in {id(p): p for p in model.parameters()}.values())


def rope_parameters(rope_type: str, theta: float, factor: float | None = None,
                    original_max: int | None = None) -> dict:
    """A ``config.rope_parameters`` dict (``default``, ``linear``, ``dynamic``, ``yarn``, ...)."""
    params: dict = {"rope_type": rope_type, "rope_theta": float(theta)}
    if rope_type != "default":
        if factor is None or factor < 1:
            raise ValueError(f"rope_type={rope_type!r} needs factor >= 1, got factor={factor!r}")
        params["factor"] = float(factor)
        if original_max is not None:
            params["original_max_position_embeddings"] = int(original_max)
    return params


SCALING_TYPES: tuple[str, ...] = ("linear", "dynamic", "yarn")
"""The training-free RoPE scalings :func:`scaled_rope` builds (transformers' ``rope_type`` names; ``dynamic`` is
dynamic NTK)."""


def scaled_rope(config, kind: str, factor: float) -> dict:
    """The ``rope_parameters`` of ``config`` (a loaded ``PretrainedConfig``) with the training-free scaling ``kind``
    (:data:`SCALING_TYPES`) by ``factor`` > 1 on top of the model's own ``rope_theta``. YaRN also gets
    ``original_max_position_embeddings`` = the model's ``max_position_embeddings`` (the window it was trained on);
    linear and dynamic take no such key (dynamic NTK reads ``max_position_embeddings`` itself, so the config's
    positions must stay the model's own). A ValueError for another kind, a factor <= 1, or a config with one RoPE
    per layer type."""
    if kind not in SCALING_TYPES:
        raise ValueError(f"RoPE scaling {kind!r}; allowed: {', '.join(SCALING_TYPES)}")
    if not (isinstance(factor, (int, float)) and math.isfinite(factor) and factor > 1):
        raise ValueError(f"RoPE scaling factor {factor!r}; allowed: a finite number > 1")
    own = getattr(config, "rope_parameters", None) or {}
    if own and all(isinstance(v, dict) for v in own.values()):
        raise ValueError(f"{type(config).__name__} has one RoPE per layer type ({', '.join(own)}); allowed: a model "
                         "with one rope_parameters set")
    theta = own.get("rope_theta", getattr(config, "rope_theta", None))
    if theta is None:
        raise ValueError(f"{type(config).__name__} has no rope_theta; allowed: a RoPE model")
    params = rope_parameters(kind, theta, factor, config.max_position_embeddings if kind == "yarn" else None)
    if "partial_rotary_factor" in own:  # the share of each head that rotates is the model's, as its base
        params["partial_rotary_factor"] = own["partial_rotary_factor"]
    return params


def load_model(path: str | Path, rope: dict | None = None, attn_implementation: str | None = None,
               max_positions: int | None = None, overrides: dict | None = None,
               trust_remote_code: bool = False, device: str | torch.device | None = None,
               dtype: str | torch.dtype | None = None) -> torch.nn.Module:
    """Load a causal LM from a local folder (our checkpoints) or an HF id.

    ``rope`` replaces ``config.rope_parameters`` (e.g. YaRN at evaluation time) and
    ``max_positions`` raises ``max_position_embeddings``; both go through the
    config passed to ``from_pretrained``, so the rotary embedding is built with them. ``overrides`` sets
    other config fields the same way (e.g. ``attention_dropout``); an unknown field is a ValueError.

    Safe by default: weights are read from safetensors only (a folder holding only pickled ``*.bin`` / ``*.pt``
    / ``*.pth`` weights is a ValueError), code shipped with a checkpoint runs only with
    ``trust_remote_code=True``, and the architecture must be one the methods can train
    (:func:`repro.families.check_architecture`: RoPE and a forward taking ``position_ids``).

    ``device`` (``auto``, ``cpu``, ``cuda``, ``cuda:N``; :func:`repro.devices.resolve_device`) is where the weights
    go, ``dtype`` (``auto``: bfloat16 on CUDA, float32 on the CPU; ``float32``; ``bfloat16``) what they are loaded
    as; None for both keeps the checkpoint's dtype on the CPU (``train`` asks for ``float32``: weights and optimizer
    states are float32 whatever the checkpoint holds, and its saved config says so).

    Checked once at load, each a one-line ValueError naming what is wrong: code shipped in any file of the folder
    (:func:`refuse_shipped_code`) unless ``trust_remote_code``; a RoPE type transformers does not know, or a
    ``rope_theta`` that is not a finite number >= 1 (:func:`check_rope`); tensors missing from the weight files or
    not of the model (a tied output head excepted); weights that are NaN or infinite (:func:`check_finite`).
    """
    p = Path(path)
    if not p.exists() and (str(path).startswith((".", "/")) or "runs" in p.parts):
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist; train it first "
                                "(python -m repro reproduce) or pass an existing folder / HF model id")
    if p.exists() and not (p / "config.json").exists():
        raise FileNotFoundError(f"checkpoint folder {str(path)!r} has no config.json; expected a folder "
                                "written by save_pretrained (e.g. runs/<profile>/<stage>/final)")
    if p.exists():
        _refuse_pickled_weights(p)
    if p.exists():
        check_config_json(p)
        if not trust_remote_code:
            refuse_shipped_code(p)
    cfg = AutoConfig.from_pretrained(str(path), trust_remote_code=trust_remote_code)
    check_architecture(cfg)
    check_rope(getattr(cfg, "rope_parameters", None), f"{str(p / 'config.json')!r}")
    if rope is not None:
        check_rope(rope, "the RoPE settings asked for (rope=, --rope-theta)")
        cfg.rope_parameters = rope
    if max_positions is not None:
        cfg.max_position_embeddings = max(cfg.max_position_embeddings, max_positions)
    for k, v in (overrides or {}).items():
        if not hasattr(cfg, k):
            raise ValueError(f"overrides: {type(cfg).__name__} has no field {k!r}; allowed: fields of its config.json")
        setattr(cfg, k, v)
    cfg.use_cache = False
    kwargs: dict = {"config": cfg, "use_safetensors": True, "trust_remote_code": trust_remote_code}
    target = None
    if device is not None or dtype is not None:
        target = resolve_device(device) if device is not None else torch.device("cpu")
        if dtype is not None:
            kwargs["dtype"] = resolve_dtype(dtype, target)
    if attn_implementation:
        try:
            kwargs["attn_implementation"] = check_attn_implementation(attn_implementation)
        except RuntimeError as e:  # flash-attn asked for where it cannot run (no GPU, not installed): one line
            raise ValueError(" ".join(str(e).split())) from e
    try:
        with quiet_transformers():  # its load report is replaced by the one-line errors below
            model, info = AutoModelForCausalLM.from_pretrained(str(path), output_loading_info=True, **kwargs)
    except (OSError, ValueError, RuntimeError, SafetensorError) as e:
        if not p.exists() or isinstance(e, torch.OutOfMemoryError):
            raise
        raise ValueError(_weights_error(p, e)) from e
    check_architecture(model.config, type(model))
    check_loaded_keys(path, info)
    check_finite(model, path)
    return model if target is None else model.to(target)


@contextlib.contextmanager
def quiet_transformers() -> Iterator[None]:
    """transformers' warnings silenced inside (its loading report table, which the checks replace)."""
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def _names(keys, limit: int = 5) -> str:
    """The first ``limit`` of ``keys`` (sorted), with how many more."""
    keys = sorted(keys)
    return ", ".join(keys[:limit]) + (f" (+{len(keys) - limit} more)" if len(keys) > limit else "")


def check_loaded_keys(path: str | Path, info: dict) -> None:
    """A ValueError naming the tensors the weights of ``path`` lack (they would stay randomly initialised) or hold
    beyond the model's (``from_pretrained``'s loading ``info``); transformers leaves a tied output head out of both."""
    missing, unexpected = set(info.get("missing_keys") or ()), set(info.get("unexpected_keys") or ())
    mismatched = [str(m[0]) if isinstance(m, (tuple, list)) else str(m) for m in info.get("mismatched_keys") or ()]
    if missing or unexpected or mismatched:
        parts = [f"{what} {_names(keys)}" for what, keys in (("missing", missing), ("unexpected", unexpected),
                                                              ("of another shape", mismatched)) if keys]
        raise ValueError(f"checkpoint folder {str(path)!r}: its weights do not match its config.json: tensors "
                         f"{'; '.join(parts)}; allowed: weights with every tensor of the model (save_pretrained "
                         "writes them; a tied lm_head may be left out)")


def check_finite(model: torch.nn.Module, path: str | Path) -> None:
    """A ValueError naming the tensors of ``model`` (loaded from ``path``) that hold NaN or infinite values."""
    bad = [name for name, t in model.state_dict().items()
           if t.is_floating_point() and not bool(torch.isfinite(t).all())]
    if bad:
        raise ValueError(f"checkpoint folder {str(path)!r}: tensor(s) {_names(bad)} hold NaN or infinite values; "
                         "allowed: finite weights (re-save the checkpoint from a run that did not diverge)")


ROPE_TYPES: tuple[str, ...] = ("default", *ROPE_INIT_FUNCTIONS)
"""The RoPE types transformers builds (``rope_parameters["rope_type"]``)."""


def check_rope(params: dict | None, where: str) -> None:
    """A ValueError naming ``where`` when ``params`` (``rope_parameters``, or one per layer type) has a RoPE type
    transformers does not build or a ``rope_theta`` that is not a finite number >= 1 (a theta below 1 turns the
    rotary frequencies into overflowing values and the loss into NaN)."""
    if not isinstance(params, dict):
        return
    if all(isinstance(v, dict) for v in params.values()) and params:  # one set per layer type (e.g. Gemma 3)
        for v in params.values():
            check_rope(v, where)
        return
    kind = params.get("rope_type", params.get("type", "default"))
    if kind not in ROPE_TYPES:
        raise ValueError(f"{where}: rope_type {str(kind)[:80]!r} is not a RoPE type transformers builds; allowed: "
                         f"{', '.join(ROPE_TYPES)}")
    theta = params.get("rope_theta")
    if theta is not None and not (isinstance(theta, (int, float)) and math.isfinite(theta) and theta >= 1):
        raise ValueError(f"{where}: rope_theta={str(theta)[:40]}; allowed: a finite number >= 1 (Llama's is 10000; "
                         "smaller values overflow the rotary frequencies)")


SHIPPED_CODE_FILES: tuple[str, ...] = ("config.json", "tokenizer_config.json", "processor_config.json",
                                       "preprocessor_config.json", "feature_extractor_config.json",
                                       "image_processor_config.json", "video_preprocessor_config.json",
                                       "generation_config.json")
"""The files of a checkpoint folder whose ``auto_map`` (or a generation config's ``custom_generate``) makes
transformers import Python code from the folder (model, tokenizer, processor, generation config)."""


def shipped_code(folder: str | Path) -> tuple[str, str] | None:
    """``(file, what)`` of the first file of :data:`SHIPPED_CODE_FILES` in ``folder`` that names code shipped with
    the checkpoint (``auto_map``, ``custom_generate``, or a ``.py`` of an ``auto_map``), or None. A file that is
    not a JSON object names none (its own reader reports it)."""
    folder = Path(folder)
    for name in SHIPPED_CODE_FILES:
        f = folder / name
        if not f.is_file():
            continue
        try:
            raw = json.loads(f.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            continue
        if not isinstance(raw, dict):
            continue
        for key in ("auto_map", "custom_generate"):
            if raw.get(key):
                return name, f"{key}: {str(raw[key])[:120]}"
    return None


def refuse_shipped_code(folder: str | Path, flag: str = "--model") -> None:
    """A ValueError naming the file of ``folder`` that ships code (:func:`shipped_code`) and the flag that allows
    it; checked before transformers reads the folder, so no code is imported and no terminal question is asked."""
    found = shipped_code(folder)
    if found is not None:
        raise ValueError(f"{flag} {str(folder)!r} ships its own model code ({found[0]}: {found[1]}); allowed: "
                         "--trust-remote-code (trust_remote_code=True) to run it, for a folder you trust, or a "
                         "checkpoint of transformers' own classes")


def check_config_json(folder: str | Path) -> None:
    """A one-line ValueError naming ``folder/config.json`` when it is not a JSON object or a field has the wrong
    type (``"hidden_size": "64"``; transformers' own error spans lines). Other problems (code shipped with the
    model, an unknown ``model_type``) are left to :func:`load_model`, which knows ``trust_remote_code``. The
    commands call this before any work (:func:`repro.cli.common.model_dir`)."""
    local = Path(folder) / "config.json"
    try:
        raw = json.loads(local.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError) as e:
        raise ValueError(f"{str(local)!r} is not readable JSON ({type(e).__name__}: {e}); allowed: a JSON object "
                         "as save_pretrained writes it") from e
    if not isinstance(raw, dict):
        raise ValueError(f"{str(local)!r} holds a JSON {type(raw).__name__}, not an object; allowed: a JSON object "
                         "of config fields as save_pretrained writes it")
    model_type = raw.get("model_type")
    if not raw.get("auto_map") and model_type is not None and model_type not in CONFIG_MAPPING:
        raise ValueError(f"{str(local)!r}: model_type {str(model_type)[:80]!r} is not an architecture transformers "
                         f"{transformers_version} knows; supported: {', '.join(FAMILIES)} (tested), or another causal "
                         "LM with RoPE whose forward takes position_ids")
    try:
        with quiet_transformers():
            AutoConfig.from_pretrained(str(folder), trust_remote_code=False)
    except StrictDataclassError as e:
        text = " ".join(str(e).split())
        if "validate_architecture" in text:  # a relation between fields (heads dividing the hidden size), not a type
            raise ValueError(f"{str(local)!r}: {text.split('ValueError: ')[-1].rstrip('.')}; allowed: sizes that fit "
                             "together (hidden_size a multiple of num_attention_heads, num_attention_heads a multiple "
                             "of num_key_value_heads)") from e
        raise ValueError(f"{str(local)!r}: {text}; allowed: each field of the type its config class declares (e.g. an "
                         "integer hidden_size, not a string)") from e
    except (ValueError, OSError, KeyError):
        return


PICKLED_WEIGHTS: tuple[str, ...] = ("*.bin", "*.pt", "*.pth")
"""Weight files :func:`load_model` refuses: loading them unpickles, which can run arbitrary code."""


def _weights_error(folder: Path, err: Exception) -> str:
    """One line naming the local checkpoint whose weights do not load, and why."""
    if "size mismatch" in str(err).lower() or "ignore_mismatched_sizes" in str(err):
        return (f"checkpoint folder {str(folder)!r}: the weights do not match its config.json (size mismatch for "
                f"some parameters, e.g. hidden_size / vocab_size changed after saving); allowed: weights saved "
                f"with that config (save_pretrained writes both)")
    files = ", ".join(sorted(f.name for f in folder.glob("*.safetensors"))) or "no *.safetensors"
    reason = str(err).splitlines()[0] if str(err) else type(err).__name__
    return (f"checkpoint folder {str(folder)!r}: cannot read its weights ({files}: {reason}); allowed: complete "
            f"safetensors files as save_pretrained writes them (re-copy or re-save a truncated file)")


def _refuse_pickled_weights(folder: Path) -> None:
    """ValueError when ``folder`` holds pickled weights and no safetensors ones."""
    if any(folder.glob("*.safetensors")):
        return
    pickled = sorted({f.name for pattern in PICKLED_WEIGHTS for f in folder.glob(pattern)})
    if pickled:
        raise ValueError(f"checkpoint folder {str(folder)!r} holds only pickled weights ({', '.join(pickled)}); "
                         "loading them would unpickle (arbitrary code). Allowed: safetensors weights "
                         "(model.safetensors or sharded *.safetensors): load it once where you trust its source "
                         "and re-save it with save_pretrained, which writes safetensors")


def causal_doc_mask(doc_ids: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Additive (B, 1, T, T) mask: causal, and only within the same document."""
    T = doc_ids.shape[-1]
    causal = torch.tril(torch.ones(T, T, dtype=torch.bool, device=doc_ids.device))
    allowed = causal & (doc_ids[:, :, None] == doc_ids[:, None, :])
    return torch.zeros(allowed.shape, dtype=dtype, device=doc_ids.device).masked_fill(
        ~allowed, torch.finfo(dtype).min)[:, None]


def single_document(doc_ids: torch.Tensor | None) -> bool:
    """True when every row holds one document (no ``doc_ids``, or one id per row): plain causal attention."""
    return doc_ids is None or bool((doc_ids == doc_ids[:, :1]).all())


def _attention_mask(model: torch.nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None,
                    doc_ids: torch.Tensor | None) -> torch.Tensor | None:
    """The ``attention_mask`` of the masking policy in the module docstring."""
    if single_document(doc_ids):
        return torch.ones_like(input_ids)
    if position_ids is not None and is_packed_restart(position_ids.cpu().numpy()) and \
            _restarts_match(position_ids, doc_ids):
        return None
    return causal_doc_mask(doc_ids, next(model.parameters()).dtype)


def check_batch(batch: dict, min_length: int = 1) -> None:
    """The tensors of a training batch as the Python API takes them, checked before any forward: ``input_ids`` of
    shape (B >= 1, T >= ``min_length``), and ``weights`` (when given) of the same shape, finite and >= 0; a
    ValueError naming the argument otherwise. Objectives that need two tokens per row (a next-token loss) pass
    ``min_length=2``."""
    ids = batch.get("input_ids")
    if not isinstance(ids, torch.Tensor) or ids.ndim != 2 or ids.shape[0] < 1 or ids.shape[1] < min_length:
        shape = tuple(ids.shape) if isinstance(ids, torch.Tensor) else type(ids).__name__
        raise ValueError(f"input_ids of shape {shape}; allowed: a (rows, tokens) tensor with rows >= 1 and tokens >= "
                         f"{min_length}")
    w = batch.get("weights")
    if w is None:
        return
    if not isinstance(w, torch.Tensor) or tuple(w.shape) != tuple(ids.shape):
        shape = tuple(w.shape) if isinstance(w, torch.Tensor) else type(w).__name__
        raise ValueError(f"weights of shape {shape}; allowed: the shape of input_ids {tuple(ids.shape)}")
    if w.is_floating_point() and not bool(torch.isfinite(w).all()):
        raise ValueError(f"weights hold {int((~torch.isfinite(w)).sum())} NaN or infinite value(s); allowed: finite "
                         "values >= 0")
    if bool((w < 0).any()):
        raise ValueError(f"weights hold {int((w < 0).sum())} negative value(s) (min {float(w.min())}); allowed: "
                         "finite values >= 0")


def _check_rows(input_ids: torch.Tensor) -> None:
    """A ValueError for an ``input_ids`` that is not a non-empty (B, T) tensor (transformers' own error is a
    reshape deep inside)."""
    if input_ids is not None and (input_ids.ndim != 2 or 0 in input_ids.shape):
        raise ValueError(f"input_ids of shape {tuple(input_ids.shape)}; allowed: a (rows, tokens) tensor with rows "
                         ">= 1 and tokens >= 1")


def forward(model: torch.nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None,
            doc_ids: torch.Tensor | None = None, **kwargs):
    """Run the model with the masking policy in the module docstring; returns the HF output. With
    ``inputs_embeds=`` (B, T, H) in ``kwargs`` the model runs on those instead of its embedding lookup of
    ``input_ids`` (which then only shape the mask). An empty batch is a ValueError."""
    _check_rows(input_ids)
    if (rows := active()) is not None:  # sequence parallelism: this rank's tokens, the full rows' logits
        keep = int(kwargs.pop("logits_to_keep", 0) or 0)
        hidden = decoder_hidden(model, input_ids, position_ids, doc_ids, rows, **kwargs)
        hidden = hidden[:, -keep:] if keep else hidden
        return CausalLMOutputWithPast(logits=head_logits(model.get_output_embeddings(), hidden))
    kwargs.setdefault("use_cache", False)
    mask = _attention_mask(model, input_ids, position_ids, doc_ids)
    if mask is None:  # packed restarts: flash-attn gets the boundaries as kwargs (boundary_kwargs)
        kwargs = {**boundary_kwargs(model, position_ids), **kwargs}
    if kwargs.get("inputs_embeds") is not None:  # the embeddings replace the lookup; the ids only shape the mask
        input_ids = None
    return model(input_ids=input_ids, position_ids=position_ids, attention_mask=mask, **kwargs)


def forward_hidden(model: torch.nn.Module, input_ids: torch.Tensor, position_ids: torch.Tensor | None = None,
                   doc_ids: torch.Tensor | None = None, **kwargs) -> torch.Tensor:
    """Like :func:`forward` but stops before the LM head: the final hidden states (B, T, H), through the
    model's public ``get_decoder()`` (for :func:`repro.loss.chunked_clm_loss`). Inside
    :func:`repro.parallel.rows.split_rows` the decoder runs on this rank's tokens and the full rows come back."""
    _check_rows(input_ids)
    if (rows := active()) is not None:
        return decoder_hidden(model, input_ids, position_ids, doc_ids, rows, **kwargs)
    kwargs.setdefault("use_cache", False)
    mask = _attention_mask(model, input_ids, position_ids, doc_ids)
    if mask is None:
        kwargs = {**boundary_kwargs(model, position_ids), **kwargs}
    if kwargs.get("inputs_embeds") is not None:
        input_ids = None
    return model.get_decoder()(input_ids=input_ids, position_ids=position_ids, attention_mask=mask,
                               **kwargs).last_hidden_state


def recomputes_layers(model: torch.nn.Module) -> bool:
    """True when ``model`` is training with activation checkpointing on (``activation_checkpointing_enable``, also
    through a peft wrapper): its decoder layers then run without a key/value cache (transformers drops it)."""
    return bool(model.training and getattr(model, "is_activation_checkpointing", False))


PLAIN_HEAD_FAMILIES: tuple[str, ...] = ("llama", "mistral", "mixtral", "qwen2", "qwen3")
"""``config.model_type`` values whose logits are exactly ``final hidden @ lm_head.weight^T`` (no bias, scale
or soft-capping in their forward); the chunked loss is used for these only."""


def plain_head_weight(model: torch.nn.Module) -> torch.Tensor | None:
    """The (V, H) output-embedding matrix when the model's logits are just ``hidden @ W^T``
    (:data:`PLAIN_HEAD_FAMILIES`, bias-free head, not partitioned by ZeRO-3); None otherwise (the loss then uses the
    model's logits)."""
    if getattr(getattr(model, "config", None), "model_type", None) not in PLAIN_HEAD_FAMILIES:
        return None
    head = model.get_output_embeddings()
    if not isinstance(head, torch.nn.Linear) or head.bias is not None:
        return None
    if hasattr(head.weight, "ds_id"):  # partitioned by DeepSpeed ZeRO-3: only whole inside the head's own forward
        return None
    return head_weight(head.weight)  # under sequence parallelism: its gradient shared over the group


def _restarts_match(position_ids: torch.Tensor, doc_ids: torch.Tensor) -> bool:
    new_doc = torch.zeros_like(doc_ids, dtype=torch.bool)
    new_doc[:, 1:] = doc_ids[:, 1:] != doc_ids[:, :-1]
    new_doc[:, 0] = True
    return bool(((position_ids == 0) == new_doc).all())
