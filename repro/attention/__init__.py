"""Attention implementations: :mod:`repro.attention.spans` (packed documents' boundaries: spans, flash-attn's
``cu_seqlens``) and :mod:`repro.attention.doc_masked` (``sdpa_varlen``, document-masked attention that computes
each document alone on CPU, registered in transformers' attention registry)."""
