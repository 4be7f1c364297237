"""Analyses of trained models and the data choices they drive.

- :mod:`repro.analysis.tokens`: LongRecipe's impactful-token analysis (§4.1: logit changes
  between a base and an extended model, top tokens per position, POS tags, anchor types; the sentence
  selection by these anchors is :mod:`repro.data.selection`);
- :mod:`repro.analysis.attention_distance`: the attention rows of the last queries (recorded through
  transformers' attention registry, O(queries x T) memory) and their histogram by query-key distance
  (RoPE-perturbed self-distillation Fig. 2);
- :mod:`repro.analysis.ig`: Context Denoising Training's IG score (Eq. 1), FR score (attention top-k) and the
  embedding-gradient norms per token and per token type (§3.1, App. B.2), memory linear in T (answer rows only),
  with the direct Eq. 1 as the reference;
- :mod:`repro.analysis.attention_map`: CDT's chunk-to-chunk attention maps (App. F, Fig. 14), O(block x T) memory;
- :mod:`repro.analysis.capture`: the capturing attention both use (transformers' attention registry, sdpa);
- :mod:`repro.analysis.typed_samples` and :mod:`repro.analysis.cdt_scores`: CDT's labelled multi-hop samples and
  the per-sample analyses behind CD-Fig3/4/5/7/8;
- :mod:`repro.analysis.longppl`: LongPPL (Fang et al., 2025; CDT Table 2): an evaluator's key tokens by LSD/LCL
  over the official LongCE windows, the perplexity on them and the official aggregation over documents;
  :mod:`repro.analysis.longppl_align` carries key tokens across tokenizers by character offsets.
"""
