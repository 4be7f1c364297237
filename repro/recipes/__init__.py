"""One recipe per paper: a profile section (or the command line's arguments) -> each arm's method, model
settings and :class:`repro.train.TrainConfig`. No caching and no file layout: :mod:`repro.stages` (cached
pipeline, run folders) and :mod:`repro.cli` (arguments, output folders) both build every arm through here.

- :mod:`~repro.recipes.extension`: the shared extension baselines and LongRecipe's arms (FLT, PoSE, RPES,
  LongRecipe and its variants).
- :mod:`~repro.recipes.selfdistill`: RoPE-perturbed self-distillation's ``rp_*`` arms.
- :mod:`~repro.recipes.cdt`: Context Denoising Training's arms and the analysis task model.
- :mod:`~repro.recipes.prolong`: ProLong's recipe and its ablations.
- :mod:`~repro.recipes.registry`: :class:`Recipe`, :func:`register_recipe` and the dispatch by arm name
  (:func:`build_method`, :func:`model_settings`, :func:`train_config`, :func:`prepare_model`).
- :mod:`~repro.recipes.variants`: a profile resized to a run (:func:`scaled_profile`) or moved to a replicate's
  seed (:func:`replicate_profile`); :mod:`~repro.recipes.arms`: the arms a paper's run trains;
  :mod:`~repro.recipes.plans`: what each checkpoint is evaluated on.

The self-distillation recipe on your own model, in a few lines::

    from repro import recipes
    from repro.models import load_model
    from repro.profiles import get_profile
    from repro.train import Trainer
    p = recipes.scaled_profile(get_profile("tiny"), 4096, base_window=1024)
    method = recipes.build_method(p, "rp_skip", tokenizer, corpus_rows=rows)
    model = load_model(path, **recipes.model_settings(p, "rp_skip"))
    Trainer(model, method, recipes.train_config(p, "rp_skip"), out).train()
"""

from repro.recipes import cdt, extension, prolong, selfdistill
from repro.recipes.arms import extension_arms
from repro.recipes.registry import (BUILTIN, DATA_KINDS, RECIPES, Inputs, Recipe, build_method, cli_methods, family,
                                    model_settings, prepare_model, recipe_of, register_recipe, train_config,
                                    trained_steps, unregister_recipe)
from repro.recipes.variants import replicate_profile, scaled_profile

register_recipe(extension.RECIPE)
register_recipe(selfdistill.RECIPE)
register_recipe(cdt.RECIPE)
register_recipe(prolong.RECIPE)
# the papers' recipes: an arm's owner is looked up from the last registered (ProLong) to the first (the extension
# family, which owns the LongRecipe comparison's names)

__all__ = ["BUILTIN", "DATA_KINDS", "Inputs", "RECIPES", "Recipe", "build_method", "cli_methods", "extension_arms",
           "family", "model_settings", "prepare_model", "recipe_of", "register_recipe", "replicate_profile",
           "scaled_profile", "train_config", "trained_steps", "unregister_recipe"]
