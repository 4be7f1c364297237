"""The :class:`Profile`: one section per settings class, and :meth:`Profile.override`, a validated copy."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field, replace
from typing import Any

from repro.profiles.cdt import CDTConfig
from repro.profiles.longrecipe import LongRecipeConfig
from repro.profiles.prolong import ProLongConfig
from repro.profiles.real import RealModelConfig
from repro.profiles.run import RunConfig
from repro.profiles.selfdistill import SelfDistillConfig
from repro.profiles.testbed import (BaseTrainConfig, CorpusConfig, EvalConfig, ExtendConfig, ModelConfig,
                                    TokenizerConfig)
from repro.profiles.validation import validate


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
    real: RealModelConfig = field(default_factory=RealModelConfig)
    """A pretrained base analysed and evaluated as it is (the ``smol`` profile); off in the others."""
    run: RunConfig = field(default_factory=RunConfig)
    """Where the stages run: device and precision (in no cache key)."""

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
