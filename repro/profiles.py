"""Run profiles: ``smoke`` (CI), ``tiny`` (the default, any CPU) and ``paper`` (GPUs).

One code path, three sizes. Every field is documented; :func:`get_profile`
validates ranges so a bad value fails before any work starts.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field, replace
from typing import Any


TRAIN_TASKS: tuple[str, ...] = ("niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1",
                                 "niah_multikey_2", "niah_multivalue", "qa_1")
"""Retrieval families of the extension runs' retrieval rows (and of the v1 base); keys/seeds disjoint from
evaluation."""

BASE_TRAIN_TASKS: tuple[str, ...] = (
    "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "json_kv", "niah_position", "vt", "cwe", "fwe", "qa_1", "qa_2",
    "multihop_2", "multihop_3", "multihop_4")
"""Every task family of the evaluation suite (plus JSON KV), as the base's training rows (``train`` key pool,
training seeds)."""

BASE_TASK_WEIGHTS: tuple[float, ...] = (1.0, 1.0, 3.0, 2.0, 2.0, 1.0, 2.0, 2.0, 2.0, 2.0, 1.0, 0.5, 0.5, 1.0, 1.0,
                                        2.0, 0.5, 0.5)
"""Share of each :data:`BASE_TRAIN_TASKS` family: 2-3 for the families with a >= 60% goal in ``TB-Base``
(uuid values 3), 1 for the rest, 0.5 for CWE, FWE and 3-4 hop multi-hop (report-only)."""


@dataclass(frozen=True)
class CorpusConfig:
    """Which documents the tokenizer and the language-modelling rows come from."""

    sources: tuple[str, ...] = ("code", "prose", "synthetic")
    """Source specs: ``code``, ``prose``, ``synthetic``, ``folder:<path>``, ``hf_disk:<path>``."""
    max_bytes_per_source: int | None = None
    """Stop reading a built-in source after this many bytes (None: all of it)."""
    synthetic_docs: int = 2000
    """Number of generated needle documents in the ``synthetic`` source."""
    seed: int = 0
    """Seed of the synthetic source."""


@dataclass(frozen=True)
class TokenizerConfig:
    """The tokenizer: trained here (byte-level BPE) or loaded from a pretrained model."""

    vocab_size: int = 2048
    """BPE vocabulary size including bytes, digits and special tokens."""
    train_bytes: int | None = 8_000_000
    """Cap on the corpus bytes the BPE trainer reads (None: all)."""
    pretrained: str | None = None
    """HF model id or path whose tokenizer is used instead of training one (paper profile)."""


@dataclass(frozen=True)
class ModelConfig:
    """A Llama-architecture model: built from scratch here, or a pretrained HF checkpoint."""

    pretrained: str | None = None
    """HF model id or local path (paper profile); None builds the tiny model below."""
    hidden_size: int = 128
    """Residual width."""
    intermediate_size: int = 512
    """MLP width."""
    num_layers: int = 3
    """Transformer blocks (3: the base search's pick, ``TB-BaseSearch``)."""
    num_heads: int = 4
    """Attention heads (head dim = hidden_size / num_heads)."""
    num_kv_heads: int = 4
    """Key/value heads (grouped-query attention when below num_heads)."""
    rope_theta: float = 10_000.0
    """RoPE base of the base model."""
    tie_embeddings: bool = True
    """Share input and output embeddings."""
    init_std: float = 0.02
    """Std of the normal weight init."""
    attn_implementation: str = "sdpa"
    """``sdpa`` (CPU default), ``eager`` (attention weights for analyses) or ``flash_attention_2`` (GPU)."""


@dataclass(frozen=True)
class BaseTrainConfig:
    """Pretraining curriculum of the tiny base model: dense copy, then retrieval at growing lengths."""

    window: int = 256
    """The base model's context window (the last curriculum length)."""
    copy_row_len: int = 64
    """Length of one copy row."""
    copy_rows: int = 32
    """Copy rows per step in the copy phase."""
    copy_period: tuple[int, int] = (8, 16)
    """Min/max length of the random segment that a copy row repeats."""
    copy_done_loss: float = 0.3
    """The copy phase ends when the running copy loss falls below this ..."""
    copy_max_steps: int = 2500
    """... or after this many steps (3-4 layers form the copy mechanism after 1,250-1,800 steps)."""
    train_tasks: tuple[str, ...] = BASE_TRAIN_TASKS
    """Task families of the retrieval rows (``train`` key pool, training seeds)."""
    task_weights: tuple[float, ...] | None = BASE_TASK_WEIGHTS
    """Relative share of each ``train_tasks`` family among the retrieval rows (None: equal)."""
    retrieval_lengths: tuple[int, ...] = (128, 192, 256)
    """Curriculum of retrieval row lengths; the last must equal ``window``."""
    advance_em: float = 0.8
    """Advance to the next length when the running training exact match reaches this ..."""
    min_steps_per_length: int = 40
    """... after at least this many steps at the current length ..."""
    max_steps_per_length: int = 600
    """... or unconditionally after this many."""
    final_steps: int = 1000
    """Extra steps at ``window`` once the last length reached ``advance_em`` (or timed out)."""
    final_min_lr_ratio: float = 0.05
    """The learning rate decays (cosine) over the final steps to this fraction of ``lr`` (1.0: stays
    constant). Measured here: uuid retrieval (``niah_single_3``) at 256 went from 2/24 to 4/24 with it."""
    tokens_per_step: int = 4096
    """Retrieval tokens per step (rows = tokens_per_step / length)."""
    copy_fraction: float = 0.1
    """Copy rows added in the retrieval phase, as a fraction of the retrieval rows."""
    lm_fraction: float = 0.15
    """Corpus language-modelling rows added in the retrieval phase, fraction of retrieval rows."""
    lm_weight: float = 0.1
    """Loss weight of corpus language-modelling tokens."""
    context_weight: float = 0.05
    """Loss weight of non-answer tokens of retrieval rows (answer tokens weigh 1)."""
    lr: float = 1e-3
    """Peak learning rate (constant after warmup)."""
    warmup_steps: int = 50
    """Linear warmup steps."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    bf16: bool = True
    """bf16 autocast (2x the fp32 tokens/s here; the copy-phase loss matched fp32's to 3 decimals over 1,050
    steps of the 4-layer search candidates)."""
    threads: int = 2
    """torch threads of this stage, pinned and recorded (0: leave the process setting): the same count on the
    same CPU type gives bit-identical weights. Two: the base trains alone, and one 2-thread process steps in
    0.20 s where each of two 1-thread processes side by side takes 0.32 s (``TB-Throughput``, 256 x 16)."""
    checkpoint_every: int = 200
    """Checkpoint interval in steps."""
    seed: int = 0
    """Seed of the model init and the data stream."""


@dataclass(frozen=True)
class ExtendConfig:
    """Context extension from the base checkpoint (shared by every method)."""

    target_window: int = 1024
    """Target context window (4x the base window in ``tiny``)."""
    steps: int = 200
    """Optimizer steps."""
    batch_size: int = 8
    """Sequences per step."""
    lr: float = 1e-3
    """Peak learning rate."""
    min_lr_ratio: float = 0.1
    """Cosine decay floor as a fraction of ``lr``."""
    warmup_steps: int = 10
    """Linear warmup steps."""
    grad_clip: float = 1.0
    """Gradient-norm clip."""
    retrieval_fraction: float = 0.75
    """Fraction of rows that are retrieval examples (the rest: corpus documents)."""
    train_tasks: tuple[str, ...] = TRAIN_TASKS
    """Task families of the retrieval rows (``train`` key pool, training seeds)."""
    context_weight: float = 0.05
    """Loss weight of non-answer tokens of retrieval rows."""
    rope_type: str = "default"
    """RoPE scaling applied for extension (``default``, ``linear``, ``dynamic``, ``yarn``...)."""
    rope_factor: float | None = None
    """RoPE scaling factor (None when rope_type is ``default``)."""
    rope_theta: float | None = None
    """RoPE base for the extended model (None keeps the base model's)."""
    bf16: bool = False
    """bf16 autocast."""
    threads: int = 1
    """torch threads of each extension stage, pinned and recorded (0: leave the process setting). One, so that
    ``workers`` stages side by side fill the cores (2 x 1 thread did 1.29x the tokens/s of 1 x 2 threads at
    256 and 1.12x at 1024, ``TB-Throughput``)."""
    checkpoint_every: int = 50
    """Checkpoint interval in steps."""
    data_workers: int = 1
    """Processes that build an arm's batches before its training (``repro.methods.prepared``)."""
    workers: int = 2
    """Independent stages (extension arms, replays, evaluations of different checkpoints) run this many at a
    time, each in its own process (:mod:`repro.stages.concurrent`). With ``threads`` pinned the weights do
    not depend on it: a serial and a concurrent run give the same bits."""
    replicate_arms: tuple[str, ...] = ("flt", "longrecipe")
    """Arms also trained with extra training seeds, as ``<arm>@seed<k>`` (:mod:`repro.methods.arms`) ..."""
    seed_replicates: int = 3
    """... this many training seeds per such arm in all (the plain name is seed 0; 1: no replicates).
    Replicate ``k`` trains with ``seed + REPLICATE_SEED_STRIDE * k`` (data stream and init of the step RNG)."""
    seed: int = 1
    """Seed of the data stream."""
    deepspeed_config: str | None = None
    """Path of a DeepSpeed JSON config (paper profile; needs GPUs)."""
    sequence_parallel: int = 1
    """Ranks that share one row (sequence parallelism, >= 1, dividing the number of processes; 1: none). Each
    rank holds ``T / sequence_parallel`` tokens of a row with the row's own position ids and shifted targets
    (:mod:`repro.parallel.sequence`); :func:`repro.parallel.config.profile_parallelism` turns it into accelerate's
    ``ParallelismConfig`` (DeepSpeed Ulysses/ALST, GPUs). Left out of cache keys when 1."""


REPLICATE_SEED_STRIDE = 1000
"""Replicate ``k`` of an arm trains with ``extend.seed + REPLICATE_SEED_STRIDE * k``."""

EXTEND_RUN_FIELDS: tuple[str, ...] = ("checkpoint_every", "data_workers", "workers", "replicate_arms",
                                      "seed_replicates")
"""``extend`` fields that change how a run is scheduled, not its weights (left out of cache keys)."""


SUITE_TASKS: tuple[str, ...] = (
    "niah_single_1", "niah_single_2", "niah_single_3", "niah_multikey_1", "niah_multikey_2", "niah_multikey_3",
    "niah_multivalue", "niah_multiquery", "vt", "cwe", "fwe", "qa_1", "qa_2",
    "multihop_2", "multihop_3", "multihop_4",
    "niah_position:ordinal=first", "niah_position:ordinal=second", "niah_position:ordinal=third",
    "niah_position:ordinal=last")
"""The full evaluation suite: RULER's 13 tasks, CDT's multi-hop task at 2/3/4 hops, NIAH-position per ordinal."""


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation grid."""

    lengths: tuple[int, ...] = (256, 512, 1024, 2048)
    """Prompt lengths in tokens (base window, 2x, target, 2x target)."""
    depths: tuple[float, ...] = (0.0, 0.25, 0.5, 0.75, 1.0)
    """Needle depths (fraction of the haystack before the needle)."""
    samples: int = 20
    """Examples per (task, length, depth) cell."""
    batch_size: int = 8
    """Generation batch size."""
    seed: int = 0
    """First evaluation seed (seeds are disjoint from training)."""
    suite_tasks: tuple[str, ...] = SUITE_TASKS
    """Task specs of the evaluation suite (RULER's 13, multi-hop 2/3/4, NIAH-position per ordinal)."""
    suite_depths: tuple[float, ...] = (0.1, 0.5, 0.9)
    """Evidence depths of the suite grid (every task x length x depth)."""
    suite_samples: int = 16
    """Examples per suite cell (task, length, depth). 16: RP's RULER-doable headline has a worst-case
    (score std 0.5) standard error of 2.6 points, below 2 once accuracies are off 50% (``repro.reports.sizing``)."""
    seeds: tuple[int, ...] = (0, 1, 2)
    """Evaluation seeds; the first is the suite's, the rest re-draw RULER at the target window (variance)."""
    decile_task: str = "niah_multikey_2"
    """Task of the accuracy-by-answer-position curve (RoPE-perturbed self-distillation Fig. 1a)."""
    decile_samples: int = 10
    """Examples per depth decile (depths 0.05, 0.15, ..., 0.95) at the target window."""
    yarn_factors: tuple[float, ...] = (2.0,)
    """YaRN extrapolation at evaluation time: RULER at factor x the target window (empty: none)."""
    suite_checkpoints: tuple[str, ...] = ("base", "flt")
    """Checkpoints that get the full suite (when trained); the other arms get the LongRecipe grid."""
    doable_threshold: float = 0.3
    """Base-model accuracy at its own window below which a task is flagged as one the base cannot do."""
    base_tasks: tuple[str, ...] = SUITE_TASKS + ("json_kv",)
    """Tasks of ``TB-Base``: the base model at its own window (the suite plus JSON KV, ProLong's recall)."""
    base_depths: tuple[float, ...] = (0.1, 0.3, 0.5, 0.7, 0.9)
    """Evidence depths of ``TB-Base`` ..."""
    base_samples: int = 20
    """... and prompts per depth (5 x 20 = 100 per task: a binomial SE of at most 5 points)."""


@dataclass(frozen=True)
class LongRecipeConfig:
    """LongRecipe (its §4): impactful-token analysis, sentence selection, replay, merging, and its tables."""

    sample_ratio: float = 0.3
    """Tokens per training sample of the position-transform arms, as a fraction of the target (§5.3: 30%)."""
    ratios: tuple[float, ...] = (0.1, 0.2, 0.3, 0.4)
    """Token ratios of the LR-Tab4 sweep (100% is FLT); each must have an arm ``longrecipe_r<pct>``."""
    analysis_texts: int = 32
    """Held-out corpus texts (at the target length) scored by base and FLT for the logit analysis (§4.1)."""
    analysis_source: str = "prose"
    """Corpus source the analysis texts come from (POS tags need natural-language text)."""
    top_fraction: float = 0.2
    """Share of tokens kept as 'impactful' at each position (§4.1: top 20%)."""
    anchor_enrichment: float = 2.0
    """A token type is an anchor when its share of occurrences among the top tokens is >= this x top_fraction ..."""
    anchor_min_count: int = 5
    """... it occurs at least this often in the analysis texts ..."""
    max_anchor_types: int | None = 200
    """... ranked by Delta(t) (Eq. 4) and capped at this many types (None: no cap)."""
    pos_bins: int = 16
    """Position bins of LR-Fig3 (POS frequency vs position)."""
    replay_token_fraction: float = 0.075
    """Replay tokens as a fraction of the extension run's tokens (§5.3: 5-10%)."""
    replay_lr_ratio: float = 0.1
    """Replay learning rate as a fraction of ``extend.lr`` (§5.3: 5e-6 after 5e-5)."""
    merge_lambdas: tuple[float, float] = (0.5, 0.5)
    """(lambda1, lambda2) of Eq. 8: weights of the original (base) and the replayed model."""
    replay_methods: tuple[str, ...] = ("flt", "rpes", "pose", "longrecipe")
    """Arms that get a replay stage and a merge (LR-Tab2)."""
    eval_samples: int = 20
    """Examples per (task, depth) cell of the LongRecipe grid (RULER-13 at the target, suite depths). 20: the
    RULER-13 average has a worst-case standard error of 1.8 points (``repro.reports.sizing``)."""
    yarn_samples: int = 3
    """Examples per cell of the YaRN 2x column of LR-Tab1."""
    short_lm_windows: int = 64
    """Windows of the base window whose LM loss stands in for general abilities (held-out stdlib test
    modules; corpus windows when Python ships without its tests)."""
    general_benchmarks: tuple[str, ...] = ()
    """lm-evaluation-harness tasks for general abilities (paper: mmlu, gsm8k, humaneval; empty: stand-ins)."""


RP_MAIN_ARMS: tuple[str, ...] = ("rp_standard", "rp_longce", "rp_pose", "rp_cyclic", "rp_skip", "rp_skip_longce")
"""Self-distillation Tables 1-5: Standard (full-length training), LongCE, PoSE, cyclic, skip, skip + LongCE."""
RP_ABLATION_ARMS: tuple[str, ...] = (
    "rp_standard_early", "rp_skip_early", "rp_fwd_kl", "rp_clm", "rp_fixed_skip", "rp_dropout", "rp_attn_noise",
    "rp_y050", "rp_y200", "rp_nope", "rp_dilation", "rp_chunk_perm", "rp_lam020", "rp_lam050", "rp_lam200")
"""Self-distillation Tables 8-11 (all at the early checkpoint): Baseline and Ours at it, then the controls."""


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
    matched_steps_ratio: float = 1.5
    """RP-Fig4: Standard trained this many times ``extend.steps`` (the skip arm's expected step-time ratio)."""
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
    longppl_evaluator: str = "flt"
    """Checkpoint whose short-vs-long loss gap picks LongPPL's key tokens (the paper: Qwen2-72B; here FLT, trained
    from the same base but in none of the compared arms)."""
    longppl_docs: int = 16
    """Held-out documents (cut at the target) for LongPPL and PPL."""


PL_SOURCES: tuple[tuple[str, str], ...] = (("code", "corpus:code"), ("books", "corpus:books"),
                                           ("short", "corpus:short"))
PL_MIX: tuple[tuple[str, float], ...] = (("code", 0.3), ("books", 0.3), ("short", 0.4))
PL_ARM_NAMES: tuple[str, ...] = ("prolong", "pl_long0", "pl_long20", "pl_long40", "pl_long80", "pl_long100",
                                 "pl_nomask", "pl_rope_orig", "pl_rope_ntk", "pl_rope_ntk4", "pl_train2x")


@dataclass(frozen=True)
class ProLongConfig:
    """ProLong (§3-§6, App. A.3, B): the data recipe, its ablations and the training-efficiency stack.

    Every ProLong arm continues the same base at the target for ``extend.steps`` steps of ``extend.batch_size`` rows
    (``extend``'s lr, schedule and precision). A ``task_share`` of the rows are the testbed's task rows (the base
    keeps the tasks the evaluation measures; ProLong itself has none); the rest come from ``sources`` in the
    proportions of ``mix`` (:mod:`repro.data.mixing`), with document masks and the RoPE base of the recipe. The
    ablation arms (:data:`repro.methods.arms.PL_ARMS`) change one thing each."""

    sources: tuple[tuple[str, str], ...] = PL_SOURCES
    """Stream name -> source spec (:mod:`repro.data.long_sources`: ``corpus:code|books|short`` from the testbed
    corpus, ``folder:<path>``, ``hf_disk:<path>``)."""
    long_streams: tuple[str, ...] = ("code", "books")
    """Streams of long data: they read only documents of at least the long threshold; the others only shorter ones."""
    mix: tuple[tuple[str, float], ...] = PL_MIX
    """Stream name -> share of the non-task rows (ProLong: code repos 30%, books 30%, ShortMix 40%). A long-share
    ablation arm keeps the ratio among the long streams and gives the rest to the short ones."""
    long_threshold: int = 0
    """Tokens from which a document is long (0: the target window; the paper counts documents of 64K and more)."""
    task_share: float = 0.5
    """Share of the rows that are the testbed's retrieval rows (``extend.train_tasks``, training key pool)."""
    doc_masks: bool = True
    """Document masks in attention (positions restart per document; ProLong B.2)."""
    rope_ntk_multiple: float = 2.0
    """The recipe's RoPE base as a multiple of the dynamic-NTK suggestion ``theta * t^(d/(d-2))`` (t = target /
    base window, d = head dimension). ProLong found 2x best (8e6 against NTK's 4e6 at 64K)."""
    arms: tuple[str, ...] = PL_ARM_NAMES
    """ProLong arms trained (``prolong`` is the recipe; the others are its ablations)."""
    replicate_arms: tuple[str, ...] = ("prolong",)
    """Arms also trained with extra training seeds (``extend.seed_replicates`` in all): their spread is the noise
    the ablations' gaps are read against."""
    train_length_factor: int = 2
    """PL-Tab7: the long-training arm trains at this multiple of the target (the same tokens per step: fewer
    rows), evaluated at the target."""
    heldout_docs: int = 16
    """Held-out long documents (stdlib test modules, cut at the target) for PL-Fig1's long-document perplexity
    (loss on each window's second half, as the paper scores the last 32K tokens of 64K documents)."""
    eval_samples: int = 16
    """Prompts per task and depth of the ablations' evaluation at the target."""
    throughput_steps: int = 4
    """PL-Tab15: timed steps per arm (interleaved rounds)."""
    throughput_workers: tuple[int, ...] = (2, 4, 8)
    """PL-Tab15: data-parallel worker counts of the reordering simulator."""


@dataclass(frozen=True)
class Profile:
    """Everything a run needs; the name keys run directories and the figures index."""

    name: str
    """Profile name."""
    corpus: CorpusConfig = field(default_factory=CorpusConfig)
    """Corpus sources."""
    tokenizer: TokenizerConfig = field(default_factory=TokenizerConfig)
    """Tokenizer."""
    model: ModelConfig = field(default_factory=ModelConfig)
    """Model architecture or pretrained path."""
    base: BaseTrainConfig = field(default_factory=BaseTrainConfig)
    """Base-model curriculum (skipped when ``model.pretrained`` is set)."""
    extend: ExtendConfig = field(default_factory=ExtendConfig)
    """Context extension."""
    eval: EvalConfig = field(default_factory=EvalConfig)
    """Evaluation grid."""
    longrecipe: LongRecipeConfig = field(default_factory=LongRecipeConfig)
    """LongRecipe arms, analysis, replay and merging."""
    selfdistill: SelfDistillConfig = field(default_factory=SelfDistillConfig)
    """RoPE-perturbed self-distillation arms, ablations and their evaluation."""
    cdt: CDTConfig = field(default_factory=CDTConfig)
    """Context Denoising Training arms, its analysis model and analyses."""
    prolong: ProLongConfig = field(default_factory=ProLongConfig)
    """ProLong's data recipe, its ablations and the training-efficiency stack."""

    def override(self, **sections: dict[str, Any]) -> "Profile":
        """A copy with fields replaced, e.g. ``p.override(extend={"steps": 10})``."""
        out = self
        for sec, values in sections.items():
            if sec not in {f.name for f in dataclasses.fields(self)} or sec == "name":
                allowed = [f.name for f in dataclasses.fields(self) if f.name != "name"]
                raise ValueError(f"unknown profile section {sec!r}; allowed: {', '.join(allowed)}")
            cur = getattr(out, sec)
            names = {f.name for f in dataclasses.fields(cur)}
            bad = set(values) - names
            if bad:
                raise ValueError(f"unknown field(s) {sorted(bad)} in section {sec!r}; allowed: {sorted(names)}")
            out = replace(out, **{sec: replace(cur, **values)})
        validate(out)
        return out


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
                                short_lm_windows=4),
    selfdistill=SelfDistillConfig(rope_theta=40_000.0, bf16=False, replicate_arms=("rp_skip",), ablation_steps=2,
                                  ablation_arms=("rp_standard_early", "rp_skip_early", "rp_clm", "rp_dropout",
                                                 "rp_attn_noise", "rp_nope"),
                                  curve_every=2, longce_window=192, longce_stride=48, eval_lengths=(384,),
                                  yarn_factors=(2.0,), yarn_samples=1, ablation_samples=1, cost_steps=1),
    cdt=CDTConfig(replicate_arms=(), curve_every=2, task="multihop_2", task_steps=4, task_curve_every=2,
                  analysis_samples=4, top_k=8, lr_sweep=(1e-2, 1.0), map_chunks=8, map_samples=1,
                  mem_lengths=(128, 256), mem_cap_gib=4.0, cost_steps=1, longppl_docs=2),
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
)
"""LongRecipe Table 6 (Llama3-8B-Instruct, 80K target): 24K-token samples for the
position-transform methods, dynamic-NTK factor 10 (RoPE base 48.9M), batch 96,
104 steps, lr 5e-5, bf16, DeepSpeed; needs GPUs and the model weights."""

PROFILES: dict[str, Profile] = {p.name: p for p in (SMOKE, TINY, PAPER)}

DESCRIPTIONS: dict[str, str] = {
    "smoke": "CI: every code path in seconds; asserts structure, not science",
    "tiny": "default: 0.8M-parameter Llama trained here at 256 tokens, extended to 1024 (any CPU)",
    "paper": "LongRecipe Table 6: Llama3-8B-Instruct to 80K, DeepSpeed + flash-attn (GPUs, model weights)",
}


def _range(value, lo, hi, what: str) -> None:
    if not (lo <= value <= hi):
        raise ValueError(f"{what}={value!r} out of range; allowed: {lo} <= {what} <= {hi}")


def validate(p: Profile) -> Profile:
    """Check every cross-field constraint; raise ValueError naming the bad value."""
    b, e, m, ev = p.base, p.extend, p.model, p.eval
    _range(p.tokenizer.vocab_size, 269, 1_000_000, "tokenizer.vocab_size")
    if m.pretrained is None and m.hidden_size % m.num_heads:
        raise ValueError(f"model.hidden_size={m.hidden_size} must be divisible by model.num_heads={m.num_heads}")
    if m.num_heads % m.num_kv_heads:
        raise ValueError(f"model.num_heads={m.num_heads} must be divisible by model.num_kv_heads={m.num_kv_heads}")
    if m.attn_implementation not in ("sdpa", "eager", "flash_attention_2"):
        raise ValueError(f"model.attn_implementation={m.attn_implementation!r}; "
                         "allowed: sdpa, eager, flash_attention_2")
    if not b.retrieval_lengths or b.retrieval_lengths[-1] != b.window:
        raise ValueError(f"base.retrieval_lengths={b.retrieval_lengths} must end at base.window={b.window}")
    if list(b.retrieval_lengths) != sorted(b.retrieval_lengths):
        raise ValueError(f"base.retrieval_lengths={b.retrieval_lengths} must be increasing")
    if b.task_weights is not None and (len(b.task_weights) != len(b.train_tasks) or min(b.task_weights) <= 0):
        raise ValueError(f"base.task_weights={b.task_weights}; allowed: one positive weight per base.train_tasks "
                         f"({len(b.train_tasks)}: {', '.join(b.train_tasks)})")
    lo, hi = b.copy_period
    if not 1 <= lo <= hi or 2 * hi > b.copy_row_len:
        raise ValueError(f"base.copy_period={b.copy_period}; "
                         f"allowed: 1 <= lo <= hi and 2*hi <= copy_row_len={b.copy_row_len}")
    for name in ("copy_fraction", "lm_fraction", "lm_weight", "context_weight", "advance_em"):
        _range(getattr(b, name), 0.0, 1.0, f"base.{name}")
    _range(e.retrieval_fraction, 0.0, 1.0, "extend.retrieval_fraction")
    for name in ("data_workers", "workers", "sequence_parallel"):
        if getattr(e, name) < 1:
            raise ValueError(f"extend.{name}={getattr(e, name)}; allowed: >= 1")
    _range(e.seed_replicates, 1, 100, "extend.seed_replicates")
    _range(e.min_lr_ratio, 0.0, 1.0, "extend.min_lr_ratio")
    if e.target_window < b.window:
        raise ValueError(f"extend.target_window={e.target_window} must be >= base.window={b.window}")
    for cfg, sec in ((b, "base"), (e, "extend")):
        if cfg.threads < 0:
            raise ValueError(f"{sec}.threads={cfg.threads}; allowed: 0 (leave the process setting) or >= 1")
        if cfg.lr <= 0 or cfg.lr > 1:
            raise ValueError(f"{sec}.lr={cfg.lr} out of range; allowed: 0 < lr <= 1")
    if e.steps < 1 or e.batch_size < 1:
        raise ValueError(f"extend.steps={e.steps}, extend.batch_size={e.batch_size}; allowed: >= 1")
    if e.rope_type != "default" and e.rope_factor is None:
        raise ValueError(f"extend.rope_type={e.rope_type!r} needs extend.rope_factor")
    if any(not 0.0 <= d <= 1.0 for d in ev.depths):
        raise ValueError(f"eval.depths={ev.depths}; allowed: values in [0, 1]")
    if any(not 0.0 <= d <= 1.0 for d in ev.base_depths) or not ev.base_depths or ev.base_samples < 1:
        raise ValueError(f"eval.base_depths={ev.base_depths}, eval.base_samples={ev.base_samples}; "
                         "allowed: at least one depth in [0, 1] and samples >= 1")
    if any(not 0.0 <= d <= 1.0 for d in ev.suite_depths):
        raise ValueError(f"eval.suite_depths={ev.suite_depths}; allowed: values in [0, 1]")
    if ev.suite_samples < 1 or ev.decile_samples < 1 or not ev.seeds or len(set(ev.seeds)) != len(ev.seeds):
        raise ValueError(f"eval.suite_samples={ev.suite_samples}, eval.decile_samples={ev.decile_samples}, "
                         f"eval.seeds={ev.seeds}; allowed: samples >= 1 and distinct seeds (at least one)")
    if any(f < 1 for f in ev.yarn_factors):
        raise ValueError(f"eval.yarn_factors={ev.yarn_factors}; allowed: factors >= 1")
    _range(ev.doable_threshold, 0.0, 1.0, "eval.doable_threshold")
    lr = p.longrecipe
    for name in ("sample_ratio", "top_fraction", "replay_token_fraction", "replay_lr_ratio"):
        value = getattr(lr, name)
        if not 0.0 < value <= 1.0:
            raise ValueError(f"longrecipe.{name}={value!r} out of range; allowed: 0 < {name} <= 1")
    if any(not 0.0 < r < 1.0 for r in lr.ratios):
        raise ValueError(f"longrecipe.ratios={lr.ratios}; allowed: values in (0, 1) (100% is FLT)")
    if lr.analysis_texts < 1 or lr.pos_bins < 1 or lr.anchor_min_count < 1 or lr.eval_samples < 1 \
            or lr.yarn_samples < 1 or lr.short_lm_windows < 1:
        raise ValueError(f"longrecipe.analysis_texts={lr.analysis_texts}, pos_bins={lr.pos_bins}, "
                         f"anchor_min_count={lr.anchor_min_count}, eval_samples={lr.eval_samples}, "
                         f"yarn_samples={lr.yarn_samples}, short_lm_windows={lr.short_lm_windows}; allowed: >= 1")
    if lr.anchor_enrichment <= 0:
        raise ValueError(f"longrecipe.anchor_enrichment={lr.anchor_enrichment}; allowed: > 0")
    if len(lr.merge_lambdas) != 2 or any(x < 0 for x in lr.merge_lambdas) or sum(lr.merge_lambdas) <= 0:
        raise ValueError(f"longrecipe.merge_lambdas={lr.merge_lambdas}; allowed: two weights >= 0, not both 0")
    sd = p.selfdistill
    if sd.rope_theta <= 0 or not 1 <= sd.ablation_steps <= e.steps or sd.matched_steps_ratio < 1 \
            or sd.curve_every < 1:
        raise ValueError(f"selfdistill.rope_theta={sd.rope_theta}, ablation_steps={sd.ablation_steps}, "
                         f"matched_steps_ratio={sd.matched_steps_ratio}, curve_every={sd.curve_every}; allowed: "
                         f"rope_theta > 0, 1 <= ablation_steps <= extend.steps={e.steps}, ratio >= 1, curve_every >= 1")
    if not 2 <= sd.longce_window <= e.target_window or not 1 <= sd.longce_stride <= sd.longce_window:
        raise ValueError(f"selfdistill.longce_window={sd.longce_window}, longce_stride={sd.longce_stride}; allowed: "
                         f"2 <= window <= extend.target_window={e.target_window}, 1 <= stride <= window")
    if set(sd.replicate_arms) - set(sd.main_arms):
        raise ValueError(f"selfdistill.replicate_arms={sd.replicate_arms}; allowed: arms of selfdistill.main_arms")
    if any(n > e.target_window or n < 1 for n in sd.eval_lengths) or any(f < 1 for f in sd.yarn_factors) \
            or sd.yarn_samples < 1 or sd.ablation_samples < 1 or sd.cost_steps < 1:
        raise ValueError(f"selfdistill.eval_lengths={sd.eval_lengths}, yarn_factors={sd.yarn_factors}, "
                         f"yarn_samples={sd.yarn_samples}, ablation_samples={sd.ablation_samples}, "
                         f"cost_steps={sd.cost_steps}; allowed: lengths in 1..extend.target_window, factors >= 1, "
                         "counts >= 1")
    cd = p.cdt
    if not (cd.beta >= 0 and math.isfinite(cd.beta)) or cd.threshold not in ("document", "row"):
        raise ValueError(f"cdt.beta={cd.beta}, cdt.threshold={cd.threshold!r}; allowed: a finite beta >= 0, "
                         "threshold document or row")
    if set(cd.replicate_arms) - set(cd.arms):
        raise ValueError(f"cdt.replicate_arms={cd.replicate_arms}; allowed: arms of cdt.arms={cd.arms}")
    for name in ("curve_every", "task_steps", "task_curve_every", "analysis_samples", "top_k", "top_heads",
                 "map_chunks", "map_samples", "cost_steps", "longppl_docs"):
        if getattr(cd, name) < 1:
            raise ValueError(f"cdt.{name}={getattr(cd, name)}; allowed: >= 1")
    if cd.analysis_pool not in ("train", "eval"):
        raise ValueError(f"cdt.analysis_pool={cd.analysis_pool!r}; allowed: train, eval")
    if not 0 < cd.task_lr <= 1 or not cd.lr_sweep or min(cd.lr_sweep) <= 0 or not cd.mem_lengths \
            or min(cd.mem_lengths) < 16 or cd.mem_cap_gib <= 0:
        raise ValueError(f"cdt.task_lr={cd.task_lr}, lr_sweep={cd.lr_sweep}, mem_lengths={cd.mem_lengths}, "
                         f"mem_cap_gib={cd.mem_cap_gib}; allowed: 0 < task_lr <= 1, learning rates > 0, lengths >= 16, "
                         "cap > 0")
    _validate_prolong(p)
    if e.target_window not in ev.lengths:
        raise ValueError(f"extend.target_window={e.target_window} must be one of eval.lengths={ev.lengths}")
    if ev.samples < 1 or ev.batch_size < 1:
        raise ValueError(f"eval.samples={ev.samples}, eval.batch_size={ev.batch_size}; allowed: >= 1")
    return p


def _validate_prolong(p: Profile) -> None:
    pl = p.prolong
    names = [n for n, _ in pl.sources]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"prolong.sources={pl.sources}; allowed: one (name, spec) pair per stream, names unique")
    if bad := sorted(set(pl.long_streams) - set(names)):
        raise ValueError(f"prolong.long_streams names unknown stream(s) {bad}; allowed: {', '.join(names)}")
    mix = dict(pl.mix)
    if sorted(mix) != sorted(names) or any(not 0 <= v <= 1 for v in mix.values()) \
            or abs(sum(mix.values()) - 1) > 1e-6:
        raise ValueError(f"prolong.mix={pl.mix}; allowed: a share in [0, 1] for each of {names}, summing to 1")
    _range(pl.task_share, 0.0, 0.95, "prolong.task_share")
    _range(pl.long_threshold, 0, 10**9, "prolong.long_threshold")
    _range(pl.rope_ntk_multiple, 0.0, 1e4, "prolong.rope_ntk_multiple")
    _range(pl.train_length_factor, 1, 64, "prolong.train_length_factor")
    for name in ("heldout_docs", "eval_samples", "throughput_steps"):
        _range(getattr(pl, name), 1, 10**6, f"prolong.{name}")
    if bad := sorted(set(pl.arms) - set(PL_ARM_NAMES)):
        raise ValueError(f"prolong.arms names unknown arm(s) {bad}; allowed: {', '.join(PL_ARM_NAMES)}")
    if bad := sorted(set(pl.replicate_arms) - set(pl.arms)):
        raise ValueError(f"prolong.replicate_arms={pl.replicate_arms}; allowed: arms of prolong.arms")
    if p.extend.batch_size % pl.train_length_factor:
        raise ValueError(f"extend.batch_size={p.extend.batch_size} is not divisible by prolong.train_length_factor="
                         f"{pl.train_length_factor}; allowed: a factor dividing the batch (same tokens per step)")
    if any(w < 1 for w in pl.throughput_workers):
        raise ValueError(f"prolong.throughput_workers={pl.throughput_workers}; allowed: counts >= 1")


def get_profile(name: str) -> Profile:
    """The named profile, validated; unknown names list the allowed ones."""
    if name not in PROFILES:
        raise ValueError(f"unknown profile {name!r}; allowed: {', '.join(PROFILES)}")
    return validate(PROFILES[name])
