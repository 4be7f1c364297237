"""Cached pipeline stages, one module per concern, sharing one caching helper.

Data flows one way: corpus + tokenizer (:mod:`~repro.stages.corpus`) -> base model
(:mod:`~repro.stages.base`) -> extension arms (:mod:`~repro.stages.extension`) ->
LongRecipe's analysis (:mod:`~repro.stages.analysis`), replay and merging
(:mod:`~repro.stages.replay`), CDT's arms and task model (:mod:`~repro.stages.cdt`), ProLong's data streams and
arms (:mod:`~repro.stages.prolong`) -> evaluations
(:mod:`~repro.stages.evaluation`, over the
grids of :mod:`~repro.stages.plans`) and attention-distance histograms
(:mod:`~repro.stages.attention`). Every stage is keyed by :mod:`~repro.stages.keys`
and cached through :mod:`~repro.stages.cache`: a finished stage is reused, an unfinished
training stage resumes from its last checkpoint, ``force=True`` recomputes.

The public functions are importable from here (``from repro import stages;
stages.train_base(...)``).
"""

from repro.stages.analysis import analysis_texts, impactful_tokens, load_analysis
from repro.stages.attention import AttentionDistanceConfig, checkpoint_distances, model_distances
from repro.stages.base import train_base
from repro.stages.cache import STAGE_VERSION, as_profile, stage_dir, stage_key
from repro.stages.cdt import task_checkpoints, train_cdt, train_task_model
from repro.stages.cdt_analysis import cd_attention_maps, cd_curve, cd_memory, cd_scores
from repro.stages.checkpoints import available_checkpoints, checkpoint_path, checkpoint_rope_theta
from repro.stages.corpus import Corpus, build_corpus, get_corpus, get_tokenizer
from repro.stages.evaluation import (evaluate_base_window, evaluate_checkpoint, general_abilities, run_lr_suite,
                                     longppl_scores, run_cd_suite, run_rp_curve, run_rp_suite, run_suite,
                                     short_lm_loss, short_lm_windows)
from repro.stages.extension import (extension_arms, extension_method, extension_tokens, metrics,
                                    prepare_extension_data, train_extension)
from repro.stages.keys import analysis_key, base_key, corpus_key, extension_key, merge_key, replay_key
from repro.stages.prolong import arm_proportions, arm_rope_theta, build_streams, ntk_theta, train_prolong
from repro.stages.replay import merge_replayed, replay_method, replay_steps, train_replay
from repro.stages.schedule import evaluate_arms, replay_and_merge, train_arms
from repro.stages.selfdistill import curve_checkpoints, rp_schedule, rp_steps, train_selfdistill

__all__ = [
    "Corpus", "STAGE_VERSION", "analysis_key", "analysis_texts", "as_profile", "available_checkpoints", "base_key",
    "build_corpus", "checkpoint_path", "checkpoint_rope_theta", "corpus_key", "evaluate_arms",
    "evaluate_base_window", "evaluate_checkpoint", "extension_arms", "extension_key", "extension_method",
    "extension_tokens", "general_abilities", "get_corpus", "get_tokenizer", "impactful_tokens", "load_analysis",
    "merge_key", "merge_replayed", "metrics", "prepare_extension_data", "replay_and_merge", "replay_key",
    "replay_method", "replay_steps", "run_lr_suite", "run_rp_curve", "run_rp_suite", "run_suite", "short_lm_loss",
    "short_lm_windows", "stage_dir",
    "stage_key", "train_arms", "train_base", "train_extension", "train_replay", "curve_checkpoints", "rp_schedule",
    "rp_steps", "train_selfdistill",
    "AttentionDistanceConfig", "checkpoint_distances", "model_distances",  # repro.stages.attention (RP-Fig2)
    "task_checkpoints", "train_cdt", "train_task_model",  # repro.stages.cdt (CDT's arms and task model)
    "cd_attention_maps", "cd_curve", "cd_memory", "cd_scores",  # repro.stages.cdt_analysis (the IG-scores notebook)
    "longppl_scores", "run_cd_suite",  # repro.stages.evaluation (CD-Tab2)
    "arm_proportions", "arm_rope_theta", "build_streams", "ntk_theta", "train_prolong",  # repro.stages.prolong
]
