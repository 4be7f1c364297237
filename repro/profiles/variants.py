"""A profile resized to one run: another target window (the command line's runs, the dry run's one-step checks)."""

from __future__ import annotations

from typing import Any

from repro.profiles.profile import Profile


def scaled_profile(p: Profile, target: int, *, base_window: int | None = None, batch_size: int | None = None,
                   steps: int | None = None, lr: float | None = None, seed: int | None = None,
                   **sections: dict[str, Any]) -> Profile:
    """``p`` at target window ``target`` (base window ``base_window``, default ``min(base.window, target)``), with
    ``extend``'s batch, steps, lr and seed replaced when given, and the fields tied to them moved along: the
    evaluation lengths, the base curriculum's last length, LongCE's window (at most the base window, stride a
    quarter of it), the self-distillation evaluation lengths and early stop, ProLong's long-training factor (1
    when it does not divide the batch). ``sections`` are further overrides (``extend={"threads": 0}``)."""
    if target < 2:
        raise ValueError(f"target={target}; allowed: >= 2 tokens")
    window = min(base_window or p.base.window, target)
    e = {"target_window": target, **{k: v for k, v in (("batch_size", batch_size), ("steps", steps), ("lr", lr),
                                                       ("seed", seed)) if v is not None}}
    e.update(sections.pop("extend", {}))
    n_steps, n_batch = e.get("steps", p.extend.steps), e.get("batch_size", p.extend.batch_size)
    sd_window = min(p.selfdistill.longce_window, window)
    factor = p.prolong.train_length_factor if n_batch % p.prolong.train_length_factor == 0 else 1
    parts: dict[str, dict[str, Any]] = {
        "base": {"window": window, "retrieval_lengths": (window,)},
        "extend": e,
        "eval": {"lengths": tuple(sorted({window, target}))},
        "selfdistill": {"longce_window": sd_window, "longce_stride": max(1, min(p.selfdistill.longce_stride,
                                                                               sd_window // 4 or 1)),
                        "eval_lengths": (target,), "ablation_steps": min(p.selfdistill.ablation_steps, n_steps)},
        "prolong": {"train_length_factor": factor},
    }
    for sec, values in sections.items():
        parts[sec] = {**parts.get(sec, {}), **values}
    return p.override(**parts)
