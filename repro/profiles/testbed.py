"""The testbed's settings, shared by every paper: corpus, tokenizer, model, base curriculum, extension, evaluation.

:class:`CorpusConfig`, :class:`TokenizerConfig`, :class:`ModelConfig`, :class:`BaseTrainConfig`,
:class:`ExtendConfig` and :class:`EvalConfig` are the sections of :class:`repro.profiles.profile.Profile` that
every paper's arms share; the task lists (:data:`TRAIN_TASKS`, :data:`BASE_TRAIN_TASKS`, :data:`SUITE_TASKS`) are
their defaults, :data:`REPLICATE_SEED_STRIDE` and :data:`EXTEND_RUN_FIELDS` how replicates and cache keys read
``extend``.
"""

from __future__ import annotations

from dataclasses import dataclass


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
    not depend on it: a serial and a concurrent run give the same bits. The arms whose step times RP-Cost and
    CD-Cost report (:data:`repro.recipes.plans.TIMED_ARMS`) train alone, with ``workers x threads`` threads."""
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
    """Ranks that share one row (sequence parallelism, >= 1, dividing the number of processes; 1: none), copied
    into ``TrainConfig.sequence_parallel``: each rank runs the decoder on ``T / sequence_parallel`` tokens of every
    row with the row's own position ids, and each method's objective is computed on the full rows
    (:mod:`repro.parallel.rows`; ``docs/sequence_parallel.md``). Left out of cache keys when 1."""


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
