"""Sequence parallelism: training any method with its rows split (:mod:`repro.parallel.rows`), sharding rows with
their custom position ids (:mod:`repro.parallel.sequence`), Ulysses attention (:mod:`repro.parallel.ulysses`), a
shard's forward (:mod:`repro.parallel.step`), the gloo checks (:mod:`repro.parallel.check`; every method:
``tests/parallel/method_worker.py``), accelerate's ``ParallelismConfig`` (:mod:`repro.parallel.config`), the
per-GPU memory on paper (:mod:`repro.parallel.memory`) and the degrees a model's heads allow
(:mod:`repro.parallel.heads`)."""
