"""Benchmarks that live with the code: ``python -m repro bench`` (:mod:`repro.bench.throughput`), ``python -m repro
bench gpu``, the one-GPU benchmark at Llama-3.2-1B and Llama-3-8B shapes (:mod:`repro.bench.gpu`), and CD-Mem, the
IG scores' peak memory and time, naive against memory linear: ``python -m repro.bench.ig_memory``
(:mod:`repro.bench.ig_memory`), PL-Tab15, tokens/s of a training step with full, dense document-masked and
per-document (``sdpa_varlen``) attention: ``python -m repro.bench.doc_attention`` (:mod:`repro.bench.doc_attention`),
and PL-Tab15's reordering, micro-batches sorted by sum of squared document lengths against unsorted on data-parallel
workers, simulated and on 2 processes: ``python -m repro.bench.reorder`` (:mod:`repro.bench.reorder`)."""
