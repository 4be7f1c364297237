"""Position-index transforms that simulate long context from short samples, and their metrics.

Modules (every public name is re-exported here, so ``from repro import positions as P; P.pose(...)``):

- :mod:`repro.positions.sample`: :class:`PositionSample`, sentence boundaries, samples from text or a corpus.
- :mod:`repro.positions.transforms`: FLT, PI, PoSE, RPES, LongRecipe Eq. 7 / Alg. 1 (and the
  authors' code behaviours as named options: PoSE ``first_chunk="official"``, ``longrecipe_official``), and the
  registry (:data:`TRANSFORM_INFO`, :func:`get_transform`, :func:`apply_transform`).
- :mod:`repro.positions.views`: self-distillation views (:class:`ViewPair`, ``*_view``).
- :mod:`repro.positions.metrics`: LongRecipe Fig. 2 statistics and window coverage.
"""

from repro.positions.sample import (
    OFFICIAL_SENTENCE_ENDS,
    SENTENCE_DELIMITERS,
    SPLIT_RULES,
    PositionSample,
    sample_from_documents,
    sample_from_text,
    sentence_starts_by_rule,
    sentence_starts_from_offsets,
    sentence_starts_from_pieces,
)
from repro.positions.views import (
    ViewPair,
    chunk_permutation_view,
    cyclic_view,
    dilation_view,
    nope_view,
    skip_view,
)
from repro.positions.transforms import (
    POSE_FIRST_CHUNK,
    TRANSFORM_INFO,
    TRANSFORMS,
    TransformInfo,
    apply_transform,
    flt,
    get_transform,
    longrecipe_alg1,
    longrecipe_alg1_trace,
    longrecipe_eq7,
    longrecipe_official,
    pi,
    pi_rope_parameters,
    pose,
    rpes,
    transform_params,
)
from repro.positions.metrics import (
    LR_FIG2_COLUMNS,
    LR_FIG2_METHODS,
    LR_FIG2_PAPER_SEGMENT,
    LR_FIG2_SPECS,
    LR_FIG2_TEXTS,
    Coverage,
    avg_token_distance,
    coverage,
    coverages,
    distance_counts,
    examples,
    lr_fig2_rows,
    lr_fig2_summary,
    mean_segment_length,
    mean_segment_steps,
    method_spec,
    position_counts,
    segment_lengths,
)

__all__ = [
    # sample
    "SENTENCE_DELIMITERS", "OFFICIAL_SENTENCE_ENDS", "SPLIT_RULES", "PositionSample", "sentence_starts_from_pieces",
    "sentence_starts_from_offsets", "sentence_starts_by_rule", "sample_from_text", "sample_from_documents",
    # transforms
    "flt", "pi", "pi_rope_parameters", "pose", "POSE_FIRST_CHUNK", "rpes", "longrecipe_eq7", "longrecipe_alg1",
    "longrecipe_alg1_trace", "longrecipe_official",
    # views
    "ViewPair", "skip_view", "cyclic_view", "dilation_view", "chunk_permutation_view", "nope_view",
    # registry
    "TransformInfo", "TRANSFORM_INFO", "TRANSFORMS", "get_transform", "transform_params", "apply_transform",
    # metrics
    "avg_token_distance", "segment_lengths", "mean_segment_length", "mean_segment_steps", "position_counts",
    "distance_counts", "Coverage", "coverage", "coverages", "LR_FIG2_SPECS", "LR_FIG2_METHODS", "LR_FIG2_TEXTS",
    "LR_FIG2_PAPER_SEGMENT", "LR_FIG2_COLUMNS", "method_spec", "lr_fig2_rows", "examples", "lr_fig2_summary",
]
