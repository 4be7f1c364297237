"""Run profiles: ``smoke`` (CI), ``tiny`` (the default, any CPU), ``paper`` (GPUs) and ``smol`` (a real pretrained
model as it is, on a CPU); ``pretrained`` (``train`` on a pretrained model of your own).

One code path, three sizes. Every field is documented; :func:`get_profile`
validates ranges so a bad value fails before any work starts.

- :mod:`repro.profiles.testbed`: the settings every paper shares (corpus, tokenizer, model, base curriculum,
  extension, evaluation grid) and the task lists they default to;
- :mod:`repro.profiles.longrecipe`, :mod:`~repro.profiles.selfdistill`, :mod:`~repro.profiles.cdt`,
  :mod:`~repro.profiles.prolong`: one module per paper's own settings;
- :mod:`repro.profiles.real`: a pretrained model analysed and evaluated as it is (the ``smol`` profile);
- :mod:`repro.profiles.run`: where the stages run (device, precision);
- :mod:`repro.profiles.profile`: the :class:`Profile` (one field per section) and its ``override``;
- :mod:`repro.profiles.validation`: every range and cross-field check;
- :mod:`repro.profiles.registry`: ``smoke``, ``tiny``, ``paper`` and ``smol``, the one place profiles are registered;
- :mod:`repro.profiles.variants`: a profile resized to one run (:func:`scaled_profile`);
- :mod:`repro.profiles.overrides`: ``section.field=value`` strings (the command line) parsed to field types.

Everything is importable from ``repro.profiles`` itself.
"""

from repro.profiles.cdt import CD_MEM_LENGTHS, CDTConfig
from repro.profiles.longrecipe import LongRecipeConfig
from repro.profiles.profile import Profile
from repro.profiles.prolong import PL_ARM_NAMES, PL_MIX, PL_SOURCES, ProLongConfig
from repro.profiles.real import RealModelConfig
from repro.profiles.registry import (DESCRIPTIONS, PAPER, PRETRAINED, PROFILES, SMOKE, SMOL, TINY, TRAIN_PROFILES,
                                    get_profile)
from repro.profiles.run import RunConfig
from repro.profiles.selfdistill import RP_ABLATION_ARMS, RP_MAIN_ARMS, SelfDistillConfig
from repro.profiles.testbed import (BASE_TASK_WEIGHTS, BASE_TRAIN_TASKS, EXTEND_RUN_FIELDS, REPLICATE_SEED_STRIDE,
                                    SUITE_TASKS, TRAIN_TASKS, BaseTrainConfig, CorpusConfig, EvalConfig, ExtendConfig,
                                    ModelConfig, TokenizerConfig)
from repro.profiles.validation import validate
from repro.profiles.variants import scaled_profile

__all__ = [
    "BASE_TASK_WEIGHTS", "BASE_TRAIN_TASKS", "CD_MEM_LENGTHS", "DESCRIPTIONS", "EXTEND_RUN_FIELDS", "PAPER",
    "PL_ARM_NAMES", "PL_MIX", "PL_SOURCES", "PRETRAINED", "PROFILES", "REPLICATE_SEED_STRIDE", "RP_ABLATION_ARMS",
    "RP_MAIN_ARMS", "SMOKE", "SMOL", "SUITE_TASKS", "TINY", "TRAIN_PROFILES", "TRAIN_TASKS", "BaseTrainConfig",
    "CDTConfig", "CorpusConfig", "EvalConfig", "ExtendConfig", "LongRecipeConfig", "ModelConfig", "ProLongConfig",
    "Profile", "RealModelConfig", "RunConfig", "SelfDistillConfig", "TokenizerConfig", "get_profile", "scaled_profile",
    "validate",
]
