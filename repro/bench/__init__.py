"""Benchmarks that live with the code: ``python -m repro bench`` (:mod:`repro.bench.throughput`)."""
