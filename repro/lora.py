"""LoRA adapters through peft, for every method: wrap, save, load, merge.

:func:`apply_lora` wraps any HF causal LM in a peft LoRA model (the base weights frozen, the adapters and the
chosen :attr:`LoraSpec.trainable` extras trainable). The wrapped model goes through the repo's one forward path
(:mod:`repro.models`) and every method's loss unchanged: peft forwards ``config``, ``get_decoder()``,
``get_input_embeddings()`` and ``get_output_embeddings()`` to the base model. :class:`repro.train.Trainer`
optimises only ``requires_grad`` parameters, and writes the merged model plus ``final/adapter/`` at the end
(:func:`save_final`). For evaluation, :func:`merge_lora` folds the adapters into a plain transformers model.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file

from repro.io import atomic_dir

DEFAULT_TARGETS: tuple[str, ...] = ("q_proj", "k_proj", "v_proj", "o_proj")
"""The attention projections of Llama-style models (LoRA's and LongLoRA's targets)."""
LONGLORA_TRAINABLE: tuple[str, ...] = ("embed_tokens", "norm")
"""LongLoRA's extra trainable parameters (Chen et al. 2024, "LoRA+"): the embeddings and every norm."""
EXTRAS_FILE = "trainable.safetensors"
"""File of :func:`save_adapter` holding the trainable parameters outside the adapters (names of the base model)."""


@dataclass(frozen=True)
class LoraSpec:
    """The LoRA settings of a run."""

    r: int = 8
    """Rank of the update ``B @ A`` (an int >= 1)."""
    alpha: float = 16.0
    """Scale numerator: the update is ``(alpha / r) * B @ A`` (a finite value > 0)."""
    dropout: float = 0.0
    """Dropout on the adapters' input (0 <= dropout < 1)."""
    target_modules: tuple[str, ...] = DEFAULT_TARGETS
    """Module names that get an adapter, matched as peft does: the full module name or its last part(s)."""
    trainable: tuple[str, ...] = ()
    """Extra parameters left trainable, matched as substrings of the base model's parameter names
    (:data:`LONGLORA_TRAINABLE` for LongLoRA's embeddings and norms)."""

    def __post_init__(self):
        if isinstance(self.r, bool) or not isinstance(self.r, int) or self.r < 1:
            raise ValueError(f"r={self.r!r}; allowed: an int >= 1")
        if not (isinstance(self.alpha, (int, float)) and math.isfinite(self.alpha) and self.alpha > 0):
            raise ValueError(f"alpha={self.alpha!r}; allowed: a finite value > 0")
        if not (isinstance(self.dropout, (int, float)) and 0 <= self.dropout < 1):
            raise ValueError(f"dropout={self.dropout!r}; allowed: 0 <= dropout < 1")
        for name in ("target_modules", "trainable"):
            value = getattr(self, name)
            if isinstance(value, str) or not all(isinstance(v, str) and v for v in value):
                raise ValueError(f"{name}={value!r}; allowed: a tuple of non-empty module/parameter names")
            object.__setattr__(self, name, tuple(value))
        if not self.target_modules:
            raise ValueError("target_modules=(); allowed: at least one module name, e.g. "
                             f"{', '.join(DEFAULT_TARGETS)}")


def is_lora(model: torch.nn.Module) -> bool:
    """True when ``model`` is a peft model (wrapped by :func:`apply_lora` or :func:`load_adapter`)."""
    if "peft" not in sys.modules:  # no peft model can exist; spares the import
        return False
    from peft import PeftModel  # heavy: peft takes seconds to import; only LoRA runs need it

    return isinstance(model, PeftModel)


def linear_module_names(model: torch.nn.Module) -> list[str]:
    """The distinct last names of the model's linear layers (what ``target_modules`` can name)."""
    return sorted({n.rsplit(".", 1)[-1] for n, m in model.named_modules() if isinstance(m, torch.nn.Linear)})


def _check_targets(model: torch.nn.Module, targets: tuple[str, ...]) -> None:
    names = [n for n, _ in model.named_modules() if n]
    missing = [t for t in targets if not any(n == t or n.endswith("." + t) for n in names)]
    if missing:
        raise ValueError(f"target_modules {missing} match no module of {type(model).__name__}; its linear modules: "
                         f"{', '.join(linear_module_names(model))}")


def apply_lora(model: torch.nn.Module, spec: LoraSpec, seed: int = 0) -> torch.nn.Module:
    """``model`` wrapped in LoRA adapters (peft ``get_peft_model``; the base model is changed in place): only the
    adapters and the parameters named by ``spec.trainable`` have ``requires_grad``. The adapters start at zero
    (``B = 0``), so the wrapped model computes what ``model`` did; ``A`` is drawn from ``seed`` (the same adapters
    in every run and every process; the caller's random state is left as it was)."""
    from peft import LoraConfig, get_peft_model  # heavy: peft takes seconds to import; only LoRA runs need it

    _check_targets(model, spec.target_modules)
    config = LoraConfig(r=spec.r, lora_alpha=spec.alpha, lora_dropout=spec.dropout,
                        target_modules=list(spec.target_modules), bias="none", task_type="CAUSAL_LM")
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        peft_model = get_peft_model(model, config)
    adapters = {id(p) for p in peft_model.parameters() if p.requires_grad}
    extras = [(n, p) for n, p in peft_model.get_base_model().named_parameters() if id(p) not in adapters]
    for pattern in spec.trainable:
        hits = [p for n, p in extras if pattern in n]
        if not hits:
            raise ValueError(f"trainable={pattern!r} matches no parameter of {type(model).__name__}; parameter "
                             f"names look like {', '.join(n for n, _ in extras[:4])}")
        for p in hits:
            p.requires_grad_(True)
    return peft_model


def trainable_parameter_names(model: torch.nn.Module) -> list[str]:
    """Names of the parameters with ``requires_grad`` (what the trainer optimises), in model order."""
    return [n for n, p in model.named_parameters() if p.requires_grad]


def _extras(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """Trainable parameters outside the adapters, by their base-model names."""
    return {n: p.detach().contiguous().clone() for n, p in model.get_base_model().named_parameters()
            if p.requires_grad and ".lora_" not in n}


def save_adapter(model: torch.nn.Module, path: str | Path) -> Path:
    """Write the adapters of a peft ``model`` to the folder ``path`` atomically: peft's ``adapter_config.json`` and
    ``adapter_model.safetensors``, plus :data:`EXTRAS_FILE` with the trainable extras (if any)."""
    if not is_lora(model):
        raise TypeError(f"save_adapter needs a peft model (apply_lora); got {type(model).__name__}")
    with atomic_dir(path) as tmp:
        model.save_pretrained(tmp, safe_serialization=True, save_embedding_layers=False)
        extras = _extras(model)
        if extras:
            save_file(extras, tmp / EXTRAS_FILE)
    return Path(path)


def load_adapter(base_model: torch.nn.Module, path: str | Path, trainable: bool = False) -> torch.nn.Module:
    """``base_model`` with the adapters of :func:`save_adapter` at ``path`` (and its trainable extras loaded into
    the base weights). ``trainable``: adapters and extras get ``requires_grad`` (to train on); else all frozen."""
    from peft import PeftModel  # heavy: peft takes seconds to import; only LoRA runs need it

    path = Path(path)
    if not (path / "adapter_config.json").exists():
        raise FileNotFoundError(f"adapter folder {str(path)!r} has no adapter_config.json; expected a folder "
                                "written by save_adapter (e.g. runs/<...>/final/adapter)")
    model = PeftModel.from_pretrained(base_model, str(path), is_trainable=trainable)
    if (path / EXTRAS_FILE).exists():
        extras = load_file(path / EXTRAS_FILE)
        params = dict(model.get_base_model().named_parameters())
        bad = sorted(set(extras) - set(params))
        if bad:
            raise ValueError(f"{path / EXTRAS_FILE} holds parameters the model lacks: {bad}")
        with torch.no_grad():
            for n, t in extras.items():
                params[n].copy_(t)
                params[n].requires_grad_(trainable)
    return model


def merge_lora(model: torch.nn.Module) -> torch.nn.Module:
    """The plain transformers model with the adapters folded into its weights (peft ``merge_and_unload``; in place:
    the peft wrapper is used up), for evaluation and ``save_pretrained``."""
    if not is_lora(model):
        raise TypeError(f"merge_lora needs a peft model (apply_lora); got {type(model).__name__}")
    return model.merge_and_unload()


def merged_state_dict(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    """The base model's state dict with the active adapters folded in, as :func:`merge_lora` would give, without
    changing ``model`` (the adapters stay trainable): ``W + delta`` per adapted layer, peft's own delta."""
    from peft.tuners.lora import LoraLayer  # heavy: peft takes seconds to import; only LoRA runs need it

    base = model.get_base_model()
    layers = {n: m for n, m in base.named_modules() if isinstance(m, LoraLayer)}
    out: dict[str, torch.Tensor] = {}
    for key, value in base.state_dict().items():
        if ".lora_" in key:
            continue
        owner, _, leaf = key.rpartition(".")
        if owner.endswith(".base_layer"):
            owner = owner[: -len(".base_layer")]
            key = f"{owner}.{leaf}"
            if leaf == "weight" and owner in layers:
                layer = layers[owner]
                value = value.detach().clone()
                for name in layer.active_adapters:
                    if name in layer.lora_A:
                        value += layer.get_delta_weight(name).to(value.dtype)
        out[key] = value
    return out


def save_final(model: torch.nn.Module, folder: Path) -> None:
    """The trainer's final weights in ``folder`` (inside its atomic write): ``save_pretrained``; for a peft model
    the merged model (loadable by :func:`repro.models.load_model`) and its adapters in ``folder/adapter``."""
    if not is_lora(model):
        model.save_pretrained(folder)
        return
    model.get_base_model().save_pretrained(folder, state_dict=merged_state_dict(model))
    save_adapter(model, folder / "adapter")
