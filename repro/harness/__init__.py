"""lm-evaluation-harness, offline, on models loaded the suite's way (``python -m repro evaluate --harness lm-eval``).

- :mod:`~repro.harness.offline`: the offline switches, a ``punkt_tab`` sentence splitter, the essay haystack;
- :mod:`~repro.harness.tasks`: ``--tasks`` names to lm-eval's leaf tasks and the config each runs with offline;
- :mod:`~repro.harness.ruler`: RULER's samples from lm-eval's own generators (our haystack, the model's tokenizer)
  and the check that its ``vt``/``cwe`` generators can fill the length;
- :mod:`~repro.harness.run`: one evaluation (lm-eval's ``simple_evaluate`` on the loaded model);
- :mod:`~repro.harness.results`: lm-eval's logged samples as the suite's prediction rows;
- :mod:`~repro.harness.parity` and :mod:`~repro.harness.parity_doc`: lm-eval's RULER prompts beside ours, measured
  and documented (``docs/evaluation_suite.md``).
"""
