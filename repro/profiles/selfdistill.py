"""RoPE-perturbed self-distillation's settings (:class:`SelfDistillConfig`) and its arm lists
(:data:`RP_MAIN_ARMS`, :data:`RP_ABLATION_ARMS`)."""

from __future__ import annotations

from dataclasses import dataclass


RP_MAIN_ARMS: tuple[str, ...] = ("rp_standard", "rp_longce", "rp_pose", "rp_cyclic", "rp_skip", "rp_skip_longce")
"""Self-distillation Tables 1-5: Standard (full-length training), LongCE, PoSE, cyclic, skip, skip + LongCE."""
RP_ABLATION_ARMS: tuple[str, ...] = (
    "rp_standard_early", "rp_skip_early", "rp_fwd_kl", "rp_clm", "rp_fixed_skip", "rp_dropout", "rp_attn_noise",
    "rp_y050", "rp_y200", "rp_nope", "rp_dilation", "rp_chunk_perm", "rp_lam020", "rp_lam050", "rp_lam200")
"""Self-distillation Tables 8-11 (all at the early checkpoint): Baseline and Ours at it, then the controls."""


COST_PROXIES: tuple[str, ...] = ("none", "llama-3-8b", "smoke")
"""Names of the proxy sets of RP-Cost and CD-Cost (``none`` and :data:`repro.bench.cost_proxies.PROXY_SETS`)."""


@dataclass(frozen=True)
class SelfDistillConfig:
    """RoPE-perturbed self-distillation (its §2-3): the arms of its comparison and what they share.

    Every arm continues the base at the target window on full-length rows (the standard view is FLT's data)
    with the same raised RoPE base, precision and schedule (``extend``'s steps, batch, lr); the arms differ
    only in the objective (:mod:`repro.methods.arms`, ``RP_ARMS``)."""

    rope_theta: float = 64_000.0
    """RoPE base of every arm (ABF, as the paper raises Llama-3's 5e5 to 8e6 = 16x for an 8x longer window; at
    4x we raise by 16^(2/3) = 6.4x: 1e4 -> 6.4e4)."""
    bf16: bool = True
    """bf16 autocast for every arm (the paper trains in bf16; 1.8x the fp32 steps/s at 1024, ``TB-Throughput``)."""
    main_arms: tuple[str, ...] = RP_MAIN_ARMS
    """Arms of the main tables (RP-Tab1/2, 4/5, 14, 15, Fig1a, Fig2), trained ``extend.steps`` steps."""
    replicate_arms: tuple[str, ...] = ("rp_standard", "rp_skip")
    """Main arms also trained with extra training seeds (``extend.seed_replicates`` in all)."""
    ablation_arms: tuple[str, ...] = RP_ABLATION_ARMS
    """Arms of the ablation tables (RP-Tab8-11), trained on the main schedule and stopped at ``ablation_steps``."""
    matched_arms: tuple[str, ...] = ("rp_standard_matched",)
    """RP-Fig4's compute-matched Standard (empty: no RP-Fig4 training)."""
    ablation_steps: int = 40
    """The ablations' early checkpoint (the paper: step 200 of 1000, 20%)."""
    matched_steps_ratio: float = 2.25
    """RP-Fig4: Standard trained this many times ``extend.steps``, so that its curve reaches past the skip arm's
    wall-clock: above skip's measured step-time ratio to Standard (RP-Cost: 1.9-2.1x on the tiny model's CPU steps;
    1.56-1.78x for Llama-3.2-1B on an H200, figures/gpu; the paper: about 1.6x). At 1.5 Standard's curve ended at
    0.78x skip's wall-clock."""
    curve_every: int = 50
    """RP-Fig4: steps between the checkpoints evaluated along the way (Standard-long and skip)."""
    longce_window: int = 256
    """LongCE short-context length (official: 4096 at 64K-class training; here the base window) ..."""
    longce_stride: int = 64
    """... and the stride of its sliding windows (official 1024: a quarter of the window)."""
    eval_lengths: tuple[int, ...] = (512, 1024)
    """Lengths of the RULER and NIAH-position grid of the main arms (the paper: half the target and the target)."""
    yarn_factors: tuple[float, ...] = (2.0, 4.0)
    """RP-Tab4/5: YaRN at these multiples of the target."""
    yarn_samples: int = 4
    """Prompts per (task, depth) cell of the YaRN columns."""
    ablation_samples: int = 16
    """Prompts per (task, depth) cell of the ablations' RULER grid at the target."""
    cost_steps: int = 6
    """RP-Cost: timed steps per arm (interleaved rounds) of the step-time benchmark."""
    cost_proxy: str = "llama-3-8b"
    """RP-Cost: the paper-shaped proxies its arms are also timed on (:data:`repro.bench.cost_proxies.PROXY_SETS`:
    ``llama-3-8b``, ``smoke``; ``none``: no proxy table)."""
    proxy_steps: int = 6
    """RP-Cost: timed rounds per proxy (after one warm-up round)."""
