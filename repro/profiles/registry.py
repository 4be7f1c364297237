"""The profiles, registered in one place: :data:`SMOKE`, :data:`TINY`, :data:`PAPER`, :data:`SMOL` in
:data:`PROFILES` (the pipeline's), :data:`PRETRAINED` beside them in :data:`TRAIN_PROFILES` (``train`` on a
pretrained model), their one-line :data:`DESCRIPTIONS`, and :func:`get_profile`."""

from __future__ import annotations

from repro.profiles.cdt import CDTConfig
from repro.profiles.longrecipe import LongRecipeConfig
from repro.profiles.profile import Profile
from repro.profiles.prolong import ProLongConfig
from repro.profiles.real import RealModelConfig
from repro.profiles.run import RunConfig
from repro.profiles.selfdistill import SelfDistillConfig
from repro.profiles.testbed import (BaseTrainConfig, CorpusConfig, EvalConfig, ExtendConfig, ModelConfig,
                                    TokenizerConfig)
from repro.profiles.validation import validate


SMOKE = Profile(
    name="smoke",
    corpus=CorpusConfig(max_bytes_per_source=150_000, synthetic_docs=200),
    tokenizer=TokenizerConfig(vocab_size=512, train_bytes=400_000),
    model=ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2),
    base=BaseTrainConfig(window=192, train_tasks=("niah_single_1",), task_weights=None, copy_rows=8, copy_max_steps=4,
                         retrieval_lengths=(192,),
                         min_steps_per_length=2, max_steps_per_length=3, final_steps=1,
                         tokens_per_step=768, warmup_steps=2, checkpoint_every=3, copy_fraction=0.25,
                         lm_fraction=0.25, bf16=False, threads=2),
    extend=ExtendConfig(target_window=384, steps=3, train_tasks=("niah_single_1",), batch_size=2, warmup_steps=1,
                        checkpoint_every=2, threads=2, workers=1, replicate_arms=("flt",), seed_replicates=2),
    eval=EvalConfig(lengths=(192, 384), depths=(0.0, 1.0), samples=2, batch_size=4, suite_depths=(0.5,),
                    suite_samples=1, seeds=(0, 1), decile_samples=1, base_depths=(0.5,), base_samples=1),
    longrecipe=LongRecipeConfig(sample_ratio=0.5, ratios=(0.5,), analysis_texts=3, analysis_source="code",
                                anchor_min_count=1,
                                pos_bins=4, replay_methods=("longrecipe",), eval_samples=1, yarn_samples=1,
                                short_lm_windows=4, cost_steps=1),
    selfdistill=SelfDistillConfig(rope_theta=40_000.0, bf16=False, replicate_arms=("rp_skip",), ablation_steps=2,
                                  ablation_arms=("rp_standard_early", "rp_skip_early", "rp_clm", "rp_dropout",
                                                 "rp_attn_noise", "rp_nope"),
                                  curve_every=2, longce_window=192, longce_stride=48, eval_lengths=(384,),
                                  yarn_factors=(2.0,), yarn_samples=1, ablation_samples=1, cost_steps=1,
                                  cost_proxy="none"),  # the smoke proxies: tests/bench/test_cost_proxies.py
    cdt=CDTConfig(replicate_arms=(), curve_every=2, task="multihop_2", task_steps=4, task_curve_every=2,
                  analysis_samples=4, top_k=8, lr_sweep=(1e-2, 1.0), map_chunks=8, map_samples=1,
                  # CD-Mem at one length (two child processes): the sweep over doubling lengths is tested on its own
                  mem_lengths=(128,), mem_cap_gib=4.0, cost_steps=1, longppl_docs=2,
                  cost_proxy="none"),  # as selfdistill's: the proxies' timing and tables are tested on their own
    prolong=ProLongConfig(eval_samples=1, heldout_docs=2, throughput_steps=1, throughput_workers=(2,)),
)
"""CI: proves every code path runs in seconds; asserts structure, not science."""

TINY = Profile(name="tiny")
"""The default: a 0.8M-parameter model trained here at 256 tokens, extended to 1024."""

PAPER = Profile(
    name="paper",
    corpus=CorpusConfig(sources=("folder:data/long_corpus",), synthetic_docs=0),
    tokenizer=TokenizerConfig(pretrained="meta-llama/Meta-Llama-3-8B-Instruct", train_bytes=None),
    model=ModelConfig(pretrained="meta-llama/Meta-Llama-3-8B-Instruct", hidden_size=4096, intermediate_size=14336,
                      num_layers=32, num_heads=32, num_kv_heads=8, rope_theta=500_000.0, tie_embeddings=False,
                      attn_implementation="flash_attention_2"),
    base=BaseTrainConfig(window=8192, retrieval_lengths=(8192,), bf16=True, threads=0),
    extend=ExtendConfig(target_window=81_920, steps=104, batch_size=96, lr=5e-5, min_lr_ratio=0.1, warmup_steps=0,
                        retrieval_fraction=0.0, rope_type="dynamic", rope_factor=10.0, rope_theta=48_900_000.0,
                        bf16=True, threads=0, checkpoint_every=26, deepspeed_config="configs/deepspeed_zero3.json",
                        workers=1, replicate_arms=(), seed_replicates=1),
    eval=EvalConfig(lengths=(8192, 16_384, 32_768, 65_536, 81_920, 163_840), depths=tuple(i / 10 for i in range(11)),
                    samples=50, batch_size=1),
    longrecipe=LongRecipeConfig(general_benchmarks=("mmlu", "gsm8k", "humaneval")),
    selfdistill=SelfDistillConfig(rope_theta=8_000_000.0, replicate_arms=(), ablation_steps=20, curve_every=26,
                                  longce_window=4096, longce_stride=1024, eval_lengths=(40_960, 81_920),
                                  yarn_samples=50, ablation_samples=50),
    cdt=CDTConfig(beta=5.0, top_heads=30, lr_sweep=(1e-5, 2e-5, 4e-5, 8e-5, 1.6e-4), replicate_arms=(), curve_every=26,
                  task_lr=1e-5, mem_lengths=(1024, 65_536), mem_cap_gib=80.0),
    prolong=ProLongConfig(sources=(("code", "folder:data/code_repos"), ("books", "folder:data/books"),
                                   ("short", "hf_disk:data/shortmix")), long_threshold=65_536, task_share=0.0,
                          replicate_arms=(), eval_samples=50, heldout_docs=64),
    run=RunConfig(device="cuda", dtype="bfloat16"),
)
"""LongRecipe Table 6 (Llama3-8B-Instruct, 80K target): 24K-token samples for the
position-transform methods, dynamic-NTK factor 10 (RoPE base 48.9M), batch 96,
104 steps, lr 5e-5, bf16, DeepSpeed; needs GPUs (``run.device="cuda"``: on a machine without one it stops with an
error rather than training on the CPU) and the model weights."""

PRETRAINED = Profile(
    name="pretrained",
    base=BaseTrainConfig(window=4096, retrieval_lengths=(4096,), context_weight=1.0),  # train: the model's window
    extend=ExtendConfig(target_window=16_384,  # train: --target
                        lr=1e-5,  # ProLong Table 9 (1e-5, 10% warmup, cosine to 1e-6); CDT Table 6 (1e-5)
                        min_lr_ratio=0.1,  # ProLong: cosine decay to 1e-6 from 1e-5
                        warmup_steps=20,  # ProLong's 10% warmup of the 200 steps (train: of --steps)
                        retrieval_fraction=0.0,  # --data only: no synthetic retrieval rows unless asked
                        context_weight=1.0,  # every token weighs 1 (the papers' plain next-token loss)
                        bf16=False),  # --dtype auto on the CPU: float32; on CUDA bf16, as the papers train
    eval=EvalConfig(lengths=(4096, 16_384)),
    selfdistill=SelfDistillConfig(rope_theta=160_000.0,  # ABF 16x model.rope_theta: Llama-3's 5e5 -> 8e6 (RP §3.1)
                                  bf16=False, longce_window=4096, longce_stride=1024),  # LongCE's official 4K / 1K
    cdt=CDTConfig(beta=5.0, task_lr=1e-5),  # the paper profile's beta for Llama 3 at lr 1e-5 (CDTConfig.beta)
    prolong=ProLongConfig(task_share=0.0),  # ProLong trains on its data alone: no task rows
)
"""Fine-tuning a pretrained model of your own (``train``'s default for a model that is not one of the project's
own, :func:`repro.cli.own_settings.chosen_profile`): the papers' fine-tuning settings (peak lr 1e-5 with 10%
warmup and cosine decay to 1e-6 as ProLong and CDT; the user's ``--data`` only, every token weighing 1; CDT's
beta 5; self-distillation's ABF multiple 16x for ``--rope-theta paper``). ``train`` resizes it to the model's own
window (``max_position_embeddings``, as ``--base-window``) and the ``--target``; the model keeps its own RoPE.
Not a pipeline profile (no base model to build): ``train`` alone takes it."""

SMOL_MODEL = "smollm2-135m-instruct"
"""The pretrained model of :data:`SMOL`, by its name in :mod:`repro.model_store` (fetched on first use)."""

SMOL = Profile(
    name="smol",
    corpus=CorpusConfig(sources=("code", "prose"), max_bytes_per_source=1_000_000, synthetic_docs=0),
    tokenizer=TokenizerConfig(pretrained=SMOL_MODEL, train_bytes=None),
    model=ModelConfig(pretrained=SMOL_MODEL, hidden_size=576, intermediate_size=1536, num_layers=30, num_heads=9,
                      num_kv_heads=3, rope_theta=100_000.0),  # its config.json's, for the record (loaded as it is)
    base=BaseTrainConfig(window=512, retrieval_lengths=(512,)),  # the IG analysis's prompt length (CD-Fig3/5/7)
    extend=ExtendConfig(target_window=2048, workers=1, replicate_arms=(), seed_replicates=1),  # RP-Fig2's length
    eval=EvalConfig(lengths=(1024, 2048, 4096, 8192), depths=(0.1, 0.5, 0.9), samples=2, batch_size=1),
    longrecipe=LongRecipeConfig(analysis_texts=4),  # RP-Fig2: 4 texts
    cdt=CDTConfig(analysis_samples=24, top_heads=8, replicate_arms=()),  # top 8 of 270 heads: App. B's 30 of 1,024
    real=RealModelConfig(enabled=True, scaled_lengths=(16_384,), scaled_samples=3, denoising=False),  # 1 per depth
)
"""SmolLM2-135M-Instruct (:data:`SMOL_MODEL`, Q4_1 weights dequantized) as it is, on a CPU; nothing is trained.
``reproduce --profile smol`` runs the evaluation, ig_scores and attention_distance notebooks on it (figures in
``figures/smol/``): single-needle NIAH by needle depth at 1K-8K (``TB-NIAH``: 3 depths x 2 prompts per length), at
16K (twice its 8,192 positions) without RoPE scaling and with linear, dynamic-NTK and YaRN scaling by 2
(``RP-Tab4/5``: 3 prompts each, one per depth; the chat template as ``evaluate --chat-template auto``), IG and FR per
token type on 24 multi-hop prompts of 512 tokens (``CD-Fig3/5/7``; not CD-Fig4/8/10/Mem, which train or need the
tiny model) and the attention distances of 4 texts of 2,048 tokens (``RP-Fig2``). Measured per NIAH prompt on 2
nearly idle cores: 2.6 s at 1K, 4.8 s at 2K, 11.7 s at 4K, 31 s at 8K, 99 s at 16K; an IG prompt at 512 tokens
8 s. The whole run took 31 min 18 s on 2 idle cores (evaluation 27 min, IG 3.5 min, attention 40 s)."""

PROFILES: dict[str, Profile] = {p.name: p for p in (SMOKE, TINY, PAPER, SMOL)}

TRAIN_PROFILES: dict[str, Profile] = {**{n: p for n, p in PROFILES.items() if not p.real.enabled},
                                      PRETRAINED.name: PRETRAINED}
"""The profiles ``train --profile`` takes: the pipeline's that train (not :data:`SMOL`) and :data:`PRETRAINED`."""

DESCRIPTIONS: dict[str, str] = {
    "smoke": "CI: every code path at toy sizes (minutes on 2 cores, not seconds); asserts structure, not science",
    "tiny": "default: a Llama trained here at 256 tokens, extended to 1024 (any CPU)",
    "paper": "LongRecipe Table 6: Llama3-8B-Instruct to 80K, DeepSpeed + flash-attn (GPUs, model weights)",
    "smol": "SmolLM2-135M-Instruct as it is, nothing trained: NIAH 1K-16K with RoPE scaling, IG/FR, attention "
            "distances (CPU, 31 min on 2 cores)",
    "pretrained": "train only: fine-tuning your own pretrained model (lr 1e-5, --data only, the model's window)",
}



def get_profile(name: str, device: str = "", dtype: str = "") -> Profile:
    """The named profile, validated; unknown names list the allowed ones. ``device`` / ``dtype`` replace
    ``run.device`` / ``run.dtype`` when given (the ``reproduce`` command's ``--device`` / ``--dtype``)."""
    known = {**PROFILES, **TRAIN_PROFILES}
    if name not in known:
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(PROFILES)}")
    run = {k: v for k, v in (("device", device), ("dtype", dtype)) if v}
    return known[name].override(run=run) if run else validate(known[name])
