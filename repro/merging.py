"""Model merging by weighted parameter averaging (LongRecipe §4.3, Eq. 8).

``Θ_merge = λ1·Θ_o + λ2·Θ_replay``: Θ_o is the original model (before context
extension), Θ_replay the extended model after pretraining-data replay. The
paper uses λ1 = λ2 = 0.5. Works on state dicts, on our checkpoints and on any
HF causal-LM folder or id with the same architecture.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Mapping, Sequence

import torch

from repro.io import atomic_dir
from repro.models import load_model


def merge_state_dicts(states: Sequence[Mapping[str, torch.Tensor]],
                      lambdas: Sequence[float]) -> dict[str, torch.Tensor]:
    """``sum_k lambdas[k] * states[k]`` key by key (floating tensors; others must be equal and are copied).

    Raises ValueError naming the offending key when the keys or shapes differ,
    and when the number of weights does not match the number of models.
    """
    if len(states) < 1 or len(states) != len(lambdas):
        raise ValueError(f"got {len(states)} state dicts and {len(lambdas)} weights; allowed: one weight per model")
    keys = list(states[0])
    for k, sd in enumerate(states[1:], 1):
        if set(sd) != set(keys):
            extra, missing = sorted(set(sd) - set(keys)), sorted(set(keys) - set(sd))
            raise ValueError(f"model {k} has mismatched keys: extra {extra[:5]}, missing {missing[:5]}")
    out: dict[str, torch.Tensor] = {}
    for key in keys:
        ts = [sd[key] for sd in states]
        for k, t in enumerate(ts[1:], 1):
            if t.shape != ts[0].shape:
                raise ValueError(f"parameter {key!r}: shape {tuple(t.shape)} in model {k} vs {tuple(ts[0].shape)} "
                                 "in model 0; allowed: identical shapes")
        if not ts[0].is_floating_point():
            if any(not torch.equal(t, ts[0]) for t in ts[1:]):
                raise ValueError(f"non-float buffer {key!r} differs between models; cannot average it")
            out[key] = ts[0].clone()
            continue
        acc = torch.zeros(ts[0].shape, dtype=torch.float64)
        for lam, t in zip(lambdas, ts):
            acc += float(lam) * t.to(torch.float64)
        out[key] = acc.to(ts[0].dtype)
    return out


def merge_checkpoints(original: str | Path, tuned: str | Path, out: str | Path,
                      lambdas: tuple[float, float] = (0.5, 0.5)) -> Path:
    """Eq. 8 on two checkpoints (our folders or HF ids); writes ``out`` atomically.

    The merged model takes the tuned model's config (its RoPE and window) and
    tokenizer files; ``lambdas = (λ1, λ2)`` weigh ``original`` and ``tuned``.
    """
    orig, tune = load_model(original), load_model(tuned)
    merged = merge_state_dicts([orig.state_dict(), tune.state_dict()], lambdas)
    tune.load_state_dict(merged)
    out = Path(out)
    with atomic_dir(out) as tmp:
        tune.save_pretrained(tmp)
        for name in ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json"):
            if (Path(tuned) / name).exists():
                shutil.copy(Path(tuned) / name, tmp / name)
    return out
