"""The evaluation plans (:mod:`repro.recipes.plans`): what each checkpoint is evaluated on. The arms themselves
(method, model settings, train config) are built through the one table :mod:`repro.arms`."""
