"""The declared headlines of the RoPE-perturbed self-distillation targets: the comparisons the paper's own
text rests each claim on.

Keys are target ids of :mod:`repro.targets`; values are :class:`repro.reports.headline.Headline` s whose
``source`` says where the paper makes the claim. The reports judge each target by its headline only
(:func:`repro.reports.headline.judge`); other pairs are shown beside it and never decide.
"""

from __future__ import annotations

from repro.reports.headline import Headline

HEADLINES: dict[str, Headline] = {}
