"""LongRecipe's settings (:class:`LongRecipeConfig`): its analysis, token ratios, replay, merging and tables."""

from __future__ import annotations

from dataclasses import dataclass


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
    cost_steps: int = 8
    """LR-Cost: timed optimizer steps per arm (interleaved rounds, after 2 warm-up steps) of the step-cost
    benchmark."""
    general_benchmarks: tuple[str, ...] = ()
    """lm-evaluation-harness tasks for general abilities (paper: mmlu, gsm8k, humaneval; empty: stand-ins)."""
