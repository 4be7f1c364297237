"""Cached pipeline stages, one module per concern, sharing one caching helper.

Data flows one way: corpus + tokenizer (:mod:`~repro.stages.corpus`) -> base model
(:mod:`~repro.stages.base`) -> every trained arm (:mod:`~repro.stages.arms`, built through :mod:`repro.arms`;
:mod:`~repro.stages.extension` runs LongRecipe's analysis first for the anchor arms) -> LongRecipe's analysis
(:mod:`~repro.stages.analysis`), replay and merging (:mod:`~repro.stages.replay`), CDT's task model
(:mod:`~repro.stages.cdt`), ProLong's data streams (:mod:`~repro.stages.prolong`) -> evaluations
(:mod:`~repro.stages.evaluation`, over the grids of :mod:`repro.recipes.plans`) and attention-distance histograms
(:mod:`~repro.stages.attention`); a pretrained base used as it is (the ``smol`` profile) is evaluated by
:mod:`~repro.stages.as_is`. Every stage is keyed by :mod:`~repro.stages.keys` and cached through
:mod:`~repro.stages.cache`: a finished stage is reused, an unfinished training stage resumes from its last
checkpoint, ``force=True`` recomputes.

The public functions are importable from here (``from repro import stages; stages.train_base(...)``); the
arm functions the notebooks call through ``stages`` (``extension_arms``, ``rp_steps``, ...) are
:mod:`repro.arms`' and the builders' (:mod:`repro.methods.selfdistill`, :mod:`repro.methods.prolong`, ...).
"""

from repro.arms import extension_arms
from repro.methods.extension import extension_method
from repro.methods.prolong import arm_proportions, arm_rope_theta, ntk_theta
from repro.methods.selfdistill import rp_schedule, rp_steps
from repro.stages.analysis import analysis_texts, impactful_tokens, load_analysis
from repro.stages.as_is import evaluate_as_is, niah_by_depth, scaled_niah
from repro.stages.arms import prepare_extension_data, train_arm
from repro.stages.attention import AttentionDistanceConfig, checkpoint_distances, model_distances
from repro.stages.base import train_base
from repro.stages.cache import STAGE_VERSION, as_profile, stage_dir, stage_key
from repro.stages.cdt import train_task_model
from repro.stages.cdt_analysis import cd_attention_maps, cd_curve, cd_memory, cd_scores
from repro.stages.checkpoints import available_checkpoints, checkpoint_path, checkpoint_rope_theta
from repro.stages.corpus import Corpus, build_corpus, get_corpus, get_tokenizer
from repro.stages.curves import curve_checkpoints, task_checkpoints
from repro.stages.evaluation import (evaluate_base_window, evaluate_checkpoint, general_abilities, run_lr_suite,
                                     long_doc_ppl, longppl_scores, run_cd_suite, run_pl_suite, run_rp_curve,
                                     run_rp_suite, run_suite,
                                     short_lm_loss, short_lm_windows)
from repro.stages.extension import extension_tokens, metrics, train_extension
from repro.stages.keys import analysis_key, base_key, corpus_key, extension_key, merge_key, replay_key
from repro.stages.prolong import build_streams
from repro.stages.replay import merge_replayed, replay_method, replay_steps, train_replay
from repro.stages.schedule import arm_timing, evaluate_arms, replay_and_merge, train_arms

__all__ = [
    "Corpus", "STAGE_VERSION", "analysis_key", "analysis_texts", "as_profile", "available_checkpoints", "base_key",
    "arm_timing", "build_corpus", "checkpoint_path", "checkpoint_rope_theta", "corpus_key", "evaluate_arms",
    "evaluate_base_window", "evaluate_checkpoint", "extension_arms", "extension_key", "extension_method",
    "extension_tokens", "general_abilities", "get_corpus", "get_tokenizer", "impactful_tokens", "load_analysis",
    "merge_key", "merge_replayed", "metrics", "prepare_extension_data", "replay_and_merge", "replay_key",
    "replay_method", "replay_steps", "run_lr_suite", "run_rp_curve", "run_rp_suite", "run_suite", "short_lm_loss",
    "short_lm_windows", "stage_dir", "stage_key", "train_arm", "train_arms", "train_base", "train_extension",
    "train_replay", "curve_checkpoints", "rp_schedule", "rp_steps",
    "AttentionDistanceConfig", "checkpoint_distances", "model_distances",  # repro.stages.attention (RP-Fig2)
    "task_checkpoints", "train_task_model",  # repro.stages.cdt (CDT's task model)
    "cd_attention_maps", "cd_curve", "cd_memory", "cd_scores",  # repro.stages.cdt_analysis (the IG-scores notebook)
    "longppl_scores", "run_cd_suite",  # repro.stages.evaluation (CD-Tab2)
    "long_doc_ppl", "run_pl_suite",  # repro.stages.evaluation (ProLong's ablations)
    "arm_proportions", "arm_rope_theta", "build_streams", "ntk_theta",  # ProLong (repro.methods.prolong)
    "evaluate_as_is", "niah_by_depth", "scaled_niah",  # repro.stages.as_is (a pretrained base as it is: smol)
]
