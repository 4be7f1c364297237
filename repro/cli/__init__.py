"""The command line, one module per command; ``python -m repro <command>`` dispatches to them from
:data:`repro.__main__.COMMANDS`.

- ``reproduce`` (:mod:`repro.cli.reproduce`): every figure and table through the notebooks, or ``--dry-run``
  (:mod:`repro.cli.dry_run`): every stage's config, data sources, accelerator configs and one step per method;
- ``train`` (:mod:`repro.cli.train`): one method on a local model and a data source;
- ``evaluate`` (:mod:`repro.cli.evaluate`): the synthetic tasks, RULER-style predictions and a summary;
- ``analyze`` (:mod:`repro.cli.analyze`): IG scores, attention distances, impactful tokens;
- ``models`` (:mod:`repro.cli.models`): pretrained models by name (fetch, list);
- ``profiles``, ``bench``, ``base-search`` (:mod:`repro.cli.misc`).

Errors and Ctrl-C are reported by :func:`repro.__main__.main` (one ``error:`` line, exit status 2; exit status 130).
"""
