"""Training methods: the protocol, the registry and one module per method family.

- :mod:`repro.methods.protocol`: what the trainer needs from a method (:class:`~repro.methods.protocol.Method`) and
  its optional hooks; :mod:`repro.methods.metrics`: the teacher-forced ``train_em`` and an objective's metrics;
- :mod:`repro.methods.base`: the base model's curriculum (copy, then retrieval at growing
  lengths) and LongRecipe's replay stream (its last stage);
- :mod:`repro.methods.extension`: context extension by a position transform (FLT, PoSE, RPES,
  LongRecipe and its ablations);
- :mod:`repro.methods.selfdistill`: RoPE-perturbed self-distillation and its controls (views in
  :mod:`repro.positions.views`, the two passes in :mod:`repro.methods.two_view`, non-index perturbations
  in :mod:`repro.methods.perturb`);
- :mod:`repro.methods.longce`: LongCE's loss (Fang et al., 2025; as the official LongPPL code computes
  it): short-window losses, the clipped weights and the weighted CLM step, for a method's ``loss`` hook;
- :mod:`repro.methods.cdt`: Context Denoising Training: embedding-gradient detection of noise tokens (Eq. 2),
  their denoised embeddings (Eq. 3) and the CE on them (Eq. 4), online every step;
- :mod:`repro.methods.prolong`: ProLong's rows: a mixture of named streams (code repositories, books, ShortMix,
  task rows) packed with or without document masks;
- :mod:`repro.methods.arms`: the names of the trained arms (``pose``, ``longrecipe_r20``,
  ``flt+replay``, ...) and the one parser for them.

The methods the stages build by name (the base curriculum, replay, extension) are registered with
:func:`register_method` in their modules; importing this package fills :data:`METHODS`. The objectives on their
rows (self-distillation, CDT, ProLong's mix) are built from their classes.
"""

from repro.methods.registry import METHODS, get_method, register_method

# Importing the method modules registers their factories.
from repro.methods import base, cdt, extension, prolong, selfdistill  # noqa: E402,F401  isort: skip
from repro.methods.arms import EXTENSION_METHODS, ArmName, extension_spec, parse_arm, ratio_arm  # noqa: E402
from repro.methods.base import BaseCurriculum  # noqa: E402
from repro.methods.extension import Extension, ExtensionSpec  # noqa: E402

__all__ = ["METHODS", "get_method", "register_method", "BaseCurriculum", "Extension", "ExtensionSpec",
           "EXTENSION_METHODS", "ArmName", "extension_spec", "parse_arm", "ratio_arm"]
