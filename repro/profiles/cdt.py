"""Context Denoising Training's settings (:class:`CDTConfig`) and CD-Mem's default lengths
(:data:`CD_MEM_LENGTHS`)."""

from __future__ import annotations

from dataclasses import dataclass


CD_MEM_LENGTHS: tuple[int, ...] = (1024, 32_768)
"""CD-Mem: from 1K to 32K tokens, doubling (the IG score's peak memory and time, naive eager vs memory-linear)."""


@dataclass(frozen=True)
class CDTConfig:
    """Context Denoising Training (CDT §3-4, §6, App. B-C): its arms, its analysis model and the analyses.

    The comparison (CD-Tab2) is CE, LongCE and CDT from the same base: CE and LongCE are the self-distillation
    comparison's ``rp_standard`` and ``rp_longce`` (full-length rows at the target, ``selfdistill.rope_theta``,
    ``selfdistill.bf16``, ``extend``'s steps), and CDT trains on the same rows with the same settings, only the
    objective differs (:mod:`repro.methods.cdt`). The token-type analyses (CD-Fig3/4/5/7/8/10) need a model that
    answers the multi-hop task right on some samples and wrong on others, which the base does not (0% in
    ``TB-Base``): the *task model* is the base fine-tuned on ``task`` rows at its own window (training key pool),
    with CE (the model analysed) and with CDT (CD-Fig10's EM curve beside CE's)."""

    beta: float = 3e3
    """Eq. 3's denoising strength. The paper: 5 for Llama 3 at lr 1e-5 (lr x beta = 5e-5, below where its Fig. 8
    saturates). Tiny: 3e3, so that lr x beta = 3 at the peak lr 1e-3, the step where CD-Fig8's sweep (beta = 1, on
    the task model) gives critical tokens the most attention (+2% after the denoising step); below it nothing
    changes (embedding-gradient norms are ~1e-2 against embedding norms ~1), above it the attention moves to
    irrelevant tokens."""
    threshold: str = "document"
    """Eq. 2's mean per ``document`` (default) or per packed ``row`` (the authors' trainer)."""
    arms: tuple[str, ...] = ("cdt",)
    """CDT arms trained ``extend.steps`` steps (:data:`repro.methods.arms.CD_ARMS`)."""
    compare_arms: tuple[str, ...] = ("rp_standard", "rp_longce")
    """CE and LongCE of CD-Tab2: the self-distillation arms of the same objectives (trained by that stage)."""
    replicate_arms: tuple[str, ...] = ("cdt",)
    """CDT arms also trained with extra training seeds (``extend.seed_replicates`` in all)."""
    curve_every: int = 50
    """Steps between the CDT arm's checkpoints kept along training (CD-Fig10 at the target)."""
    task: str = "multihop_2"
    """The analysis task (CDT's multi-hop task with its token-type labels)."""
    task_steps: int = 600
    """Optimizer steps of the task model's fine-tune (CE and CDT alike)."""
    task_lr: float = 1e-3
    """Peak learning rate of the task fine-tune (cosine, ``extend``'s warmup and batch)."""
    task_curve_every: int = 100
    """Steps between the task fine-tunes' checkpoints (CD-Fig10)."""
    analysis_pool: str = "train"
    """Key pool of the analysis prompts. ``train``: the task model answers 60-75% of fresh prompts (evaluation seeds,
    disjoint from the training seeds) drawn with the training characters, objects and locations, and about 0% with
    the evaluation pool (it does not copy unseen location names); the analyses need right and wrong answers."""
    analysis_samples: int = 48
    """Multi-hop prompts (at the base window) scored for CD-Fig3/5/7 (split by right/wrong answer)."""
    top_k: int = 30
    """Tokens per answer row counted by the FR score and by the top-k detectors of CD-Fig7 (the paper: 30)."""
    top_heads: int = 3
    """Heads of App. B's top-head FR (clipped to the model's head count). The paper: 30 of Llama's 1,024 heads
    (3%); tiny: 3 of 12, a quarter (30 would be every head)."""
    lr_sweep: tuple[float, ...] = (0.1, 1.0, 3.0, 10.0, 30.0, 100.0)
    """CD-Fig8: learning rates of the denoising step at beta = 1 (i.e. the step size lr x beta of Eq. 3)."""
    map_chunks: int = 46
    """CD-Fig14: chunks of the chunked attention map (the paper: 46)."""
    map_samples: int = 8
    """CD-Fig14: prompts averaged per map."""
    mem_lengths: tuple[int, ...] = CD_MEM_LENGTHS
    """CD-Mem: the sweep's shortest and longest length (doubling in between; each method until it fails)."""
    mem_cap_gib: float = 16.0
    """CD-Mem: memory cap of each measurement (a run above it is stopped and reported as out of memory)."""
    cost_steps: int = 6
    """CD-Cost: timed steps per arm (interleaved rounds)."""
    cost_proxy: str = "llama-3-8b"
    """CD-Cost: the paper-shaped proxies its arms are also timed on (:data:`repro.bench.cost_proxies.PROXY_SETS`:
    ``llama-3-8b``, ``smoke``; ``none``: no proxy table)."""
    proxy_steps: int = 6
    """CD-Cost: timed rounds per proxy (after one warm-up round)."""
    longppl_evaluator: str = "flt"
    """Checkpoint whose short-vs-long loss gap picks LongPPL's key tokens (the paper: Qwen2-72B; here FLT, trained
    from the same base but in none of the compared arms)."""
    longppl_docs: int = 16
    """Held-out documents (cut at the target) for LongPPL and PPL."""
