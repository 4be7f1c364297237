"""The evaluation tables of the four papers, computed from result rows (no plotting, no models).

One module per paper, plus the shared pieces:

* :mod:`~repro.reports.common`: :class:`Report`, :class:`Scores`, percent formatting, verdicts, standard errors;
* :mod:`~repro.reports.noise`: prompts paired across arms and the paired test every order verdict uses
  (a gap counts only beyond 2 standard errors, widened by the training-seed spread; less is a tie);
* :mod:`~repro.reports.seeds`: arms trained with several seeds (``flt@seed1``), shown as mean ± std;
* :mod:`~repro.reports.sizing`: samples per cell for a headline standard error of 2 points;
* :mod:`~repro.reports.testbed`: what the base model can do, tidy result rows, the testbed (TB-*) verdicts;
* :mod:`~repro.reports.selfdistill`: RoPE-perturbed self-distillation (RP-*);
* :mod:`~repro.reports.attention`: its attention-distance figure RP-Fig2 (from records of
  ``stages.attention``, not from evaluation suites);
* :mod:`~repro.reports.cdt`: Context Denoising Training (CD-*);
* :mod:`~repro.reports.longrecipe`: LongRecipe (LR-*);
* :mod:`~repro.reports.suite`: every RP and CD report of the evaluation suite (``all_reports``).

Input everywhere is a *suite*: ``{checkpoint: {part: record}}`` where a part is one entry of an
evaluation plan (:mod:`repro.recipes.plans`) and a record is what ``evaluate_checkpoint`` returns
with ``record=True`` (``results`` rows and ``skipped`` cells). Every builder returns a
:class:`Report`: table rows (scores in percent, as the papers print them), the paper's numbers
beside ours where a direct analog exists, a scale note, and an ``agrees`` verdict computed from
the numbers.

"A table of zeros teaches nothing": every table flags the tasks the base model cannot do at its own
window (accuracy below ``eval.doable_threshold``), and RULER averages are given over all 13 tasks and
over the tasks the base can do. A cell too short for its task reads ``n/a (min length X)``, never 0.

Adding a paper's tables: a module ``repro/reports/<paper>.py`` holding the paper's numbers keyed by our
checkpoint names and one function per target id (``repro.targets``) that returns a :class:`Report`;
it builds on :mod:`~repro.reports.common` and :mod:`~repro.reports.testbed` and the task groups of
:mod:`repro.tasks.summary`, and never imports the cached stages (the parts it reads are planned in
:mod:`repro.recipes.plans`, which never imports the reports). Its tests go in ``tests/reports/``.
"""

from repro.reports.common import Report, Scores, count_verdict, direction_agrees, pct, show  # noqa: F401
