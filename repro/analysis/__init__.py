"""Analyses of trained models and the data choices they drive.

- :mod:`repro.analysis.tokens`: LongRecipe's impactful-token analysis (§4.1: logit changes
  between a base and an extended model, top tokens per position, POS tags, anchor types);
- :mod:`repro.analysis.selection`: LongRecipe's sentence selection by anchor tokens (§4.2).

The CDT issue adds IG/FR scores per token type here, and the self-distillation issue the
attention-distance histograms and chunked attention maps.
"""
