"""Sequence parallelism: sharding rows with their custom position ids (:mod:`repro.parallel.sequence`),
Ulysses attention (:mod:`repro.parallel.ulysses`), a shard's forward (:mod:`repro.parallel.step`), the two-process
gloo check (:mod:`repro.parallel.check`) and accelerate's ``ParallelismConfig`` (:mod:`repro.parallel.config`)."""
