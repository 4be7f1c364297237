"""Analyses of trained models and the data choices they drive.

- :mod:`repro.analysis.tokens`: LongRecipe's impactful-token analysis (§4.1: logit changes
  between a base and an extended model, top tokens per position, POS tags, anchor types);
- :mod:`repro.analysis.selection`: LongRecipe's sentence selection by anchor tokens (§4.2);
- :mod:`repro.analysis.attention_distance`: the attention rows of the last queries (recorded through
  transformers' attention registry, O(queries x T) memory) and their histogram by query-key distance
  (RoPE-perturbed self-distillation Fig. 2);
- :mod:`repro.analysis.longppl`: LongPPL (Fang et al., 2025; CDT Table 2): an evaluator's key tokens by LSD/LCL
  over the official LongCE windows, the perplexity on them and the official aggregation over documents;
  :mod:`repro.analysis.longppl_align` carries key tokens across tokenizers by character offsets.

The CDT issue adds IG/FR scores per token type here, and the chunked attention maps.
"""
