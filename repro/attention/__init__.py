"""Attention implementations: :mod:`repro.attention.spans` (packed documents' boundaries: spans, flash-attn's
``cu_seqlens``, the mask function of the per-document implementations), :mod:`repro.attention.doc_masked`
(``sdpa_varlen``, document-masked attention that computes each document alone on CPU, registered in transformers'
attention registry; which implementation each device gets) , :mod:`repro.attention.flex` (``flex_doc``, flex
attention with a block mask per document), :mod:`repro.attention.suffix` (the prefix-shared pass's packed suffixes
over their prefixes) and :mod:`repro.attention.switch` (a model's implementation switched for a block)."""
