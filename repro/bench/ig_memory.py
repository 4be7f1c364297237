"""CD-Mem from the command line: ``python -m repro.bench.ig_memory`` runs :func:`repro.analysis.ig_memory.main`
(the measurement lives with the IG scores it measures, so the cached CD-Mem stage can run it too)."""

from repro.analysis.ig_memory import main

if __name__ == "__main__":
    raise SystemExit(main())
