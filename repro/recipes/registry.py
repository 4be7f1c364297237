"""The recipe registry: which recipe trains an arm, and the four questions every recipe answers.

A :class:`Recipe` turns a profile (:class:`repro.profiles.Profile`) and an arm name into what training the arm
needs: the method (:func:`build_method`), the keyword arguments of :func:`repro.models.load_model`
(:func:`model_settings`: RoPE base and scaling, position range, config overrides such as dropout), the
:class:`repro.train.TrainConfig` (:func:`train_config`) and what the method changes on the loaded model
(:func:`prepare_model`). Nothing here reads or writes a file: the cached pipeline (:mod:`repro.stages`) and the
command line (:mod:`repro.cli`) call these functions with the data they loaded.

A new method is one method module (registered with :func:`repro.methods.register_method`), one
:class:`Recipe` and one :func:`register_recipe` line (``tests/recipes/test_new_method.py`` does exactly that and
trains it through ``python -m repro train``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

from repro.profiles import Profile

DATA_KINDS = ("rows", "streams")
"""What a recipe's method reads: ``rows`` (:class:`repro.data.synthetic.CorpusRows` of one corpus) or
``streams`` (named :class:`repro.data.streams.TokenStream` objects, ProLong's sources)."""


@dataclass(frozen=True)
class Inputs:
    """The data a method is built on, loaded by the caller (a cached stage or the command line)."""

    corpus_rows: Any = None
    """:class:`repro.data.synthetic.CorpusRows` (recipes whose ``data`` is ``rows``)."""
    streams: Any = None
    """A stream folder (:func:`repro.data.streams.save_streams`) or :class:`repro.data.streams.TokenStream`
    objects named as ``prolong.sources`` (recipes whose ``data`` is ``streams``)."""
    anchors: Any = None
    """Anchor token ids (int array) of arms that select anchor sentences (LongRecipe), else None."""


def _default_settings(p: Profile, arm: str) -> dict[str, Any]:
    return {"rope": None}


def _default_train_config(p: Profile, arm: str, **overrides: Any):
    from repro.train import TrainConfig

    return TrainConfig.from_section(p.extend, overrides.pop("max_steps", p.extend.steps),
                                    **{"schedule": "cosine", **overrides})


def _no_curve(p: Profile, name: str) -> int:
    return 0


def _nothing(p: Profile, arm: str) -> dict[str, Any]:
    return {}


@dataclass(frozen=True)
class Recipe:
    """How one family of arms trains. Only ``name``, ``owns`` and ``method`` are required; the defaults train
    like FLT (the model's own RoPE, ``extend``'s steps with a cosine schedule, no curve checkpoints)."""

    name: str
    """The family's name (``extension``, ``selfdistill``, ``cdt``, ``prolong``, or a user's own)."""
    owns: Callable[[str], bool]
    """``owns(arm)``: True for the arm names (without a ``@seed<k>`` suffix) this recipe trains."""
    method: Callable[..., Any]
    """``method(p, arm, tokenizer, inputs: Inputs, seed)``: the :class:`repro.train.Method` of the arm."""
    data: str = "rows"
    """What the method reads: one of :data:`DATA_KINDS`."""
    cli: dict[str, str] = field(default_factory=dict)
    """``python -m repro train --method`` names -> the arm each trains."""
    model_settings: Callable[[Profile, str], dict[str, Any]] = _default_settings
    """``model_settings(p, arm)``: keyword arguments of :func:`repro.models.load_model` (``rope``, and where the
    arm needs them ``max_positions`` and config ``overrides``)."""
    train_config: Callable[..., Any] = _default_train_config
    """``train_config(p, arm, **overrides)``: the arm's :class:`repro.train.TrainConfig`; ``overrides`` replace
    fields (``max_steps`` too)."""
    steps: Callable[[Profile, str], int] | None = None
    """``steps(p, arm)``: optimizer steps actually trained (None: ``train_config``'s ``max_steps``); the batches
    built ahead of training cover these."""
    curve_every: Callable[[Profile, str], int] = _no_curve
    """``curve_every(p, name)`` (``name`` with its seed suffix): keep a loadable checkpoint every that many steps
    for a training curve (0: none)."""
    final_config: Callable[[Profile, str], dict[str, Any]] = _nothing
    """``final_config(p, arm)``: config fields written into the trained model's ``config.json`` (a training-only
    setting switched off for evaluation, e.g. attention dropout)."""
    needs_anchors: Callable[[str], bool] = lambda arm: False
    """``needs_anchors(arm)``: the arm selects anchor sentences (its method needs ``Inputs.anchors``)."""
    key_fields: Callable[[Profile, str], dict[str, Any]] = _nothing
    """``key_fields(p, arm)``: what of the profile beyond ``extend`` and the base the arm's weights depend on (it
    enters the arm's cache key in the pipeline; the papers' recipes have theirs in ``repro.stages.keys``)."""

    def __post_init__(self) -> None:
        if self.data not in DATA_KINDS:
            raise ValueError(f"recipe {self.name!r}: data={self.data!r}; allowed: {', '.join(DATA_KINDS)}")


BUILTIN = ("prolong", "cdt", "selfdistill", "extension")
"""The recipes of the four papers (and the shared extension baselines), registered by :mod:`repro.recipes`."""

RECIPES: dict[str, Recipe] = {}
"""Registered recipes, in the order an arm's owner is looked up (the first whose ``owns`` accepts it)."""


def register_recipe(recipe: Recipe, *, first: bool = True) -> Recipe:
    """Register ``recipe`` (replacing one of the same name). ``first``: looked up before the recipes already
    registered (:mod:`repro.recipes` registers the extension family first, so it is looked up last); a
    command-line name another recipe has is refused."""
    clash = {c: r.name for r in RECIPES.values() if r.name != recipe.name for c in recipe.cli if c in r.cli}
    if clash:
        raise ValueError(f"recipe {recipe.name!r}: command-line names {sorted(clash)} already belong to "
                         f"{sorted(set(clash.values()))}; allowed: new names")
    others = {k: v for k, v in RECIPES.items() if k != recipe.name}
    RECIPES.clear()
    RECIPES.update({recipe.name: recipe, **others} if first else {**others, recipe.name: recipe})
    return recipe


def unregister_recipe(name: str) -> None:
    """Remove a registered recipe (a test's own)."""
    RECIPES.pop(name, None)


def recipe_of(arm: str) -> Recipe:
    """The recipe that trains ``arm`` (a ``@seed<k>`` suffix allowed); ValueError naming the allowed arms."""
    from repro.methods.arms import split_seed

    stem = split_seed(arm)[0]
    for r in RECIPES.values():
        if r.owns(stem):
            return r
    from repro.methods import extension_spec

    extra = [c for r in RECIPES.values() if r.name not in BUILTIN for c in r.cli.values()]
    try:
        extension_spec(stem)  # the message names the allowed extension arms
    except ValueError as e:
        raise ValueError(f"{e}; or an arm of the registered recipes: {', '.join(extra)}" if extra else str(e)) \
            from None
    raise ValueError(f"arm {arm!r} has no registered recipe; allowed: {', '.join(cli_methods().values())}")


def family(arm: str) -> str:
    """The name of the recipe that trains ``arm`` (``prolong``, ``cdt``, ``selfdistill``, ``extension``...)."""
    return recipe_of(arm).name


def cli_methods() -> dict[str, str]:
    """``python -m repro train --method`` names -> the arm each trains, over every registered recipe."""
    return {c: a for r in reversed(list(RECIPES.values())) for c, a in r.cli.items()}


def build_method(p: Profile, arm: str, tokenizer, corpus_rows=None, streams=None, anchors=None,
                 seed: int | None = None):
    """The method of arm ``arm`` with ``p``'s settings (``seed``: ``extend.seed``). ``corpus_rows`` feed the
    recipes that read rows, ``streams`` those that read streams (ProLong); ``anchors`` are the anchor token ids of
    the arms that select anchor sentences."""
    r = recipe_of(arm)
    if r.data == "streams" and streams is None:
        raise ValueError(f"arm {arm!r} reads streams; allowed: streams= a stream folder or TokenStream objects")
    if r.data == "rows" and corpus_rows is None:
        raise ValueError(f"arm {arm!r} needs corpus_rows (repro.data.synthetic.CorpusRows)")
    return r.method(p, arm, tokenizer, Inputs(corpus_rows, streams, anchors), seed)


def model_settings(p: Profile, arm: str) -> dict[str, Any]:
    """Keyword arguments of :func:`repro.models.load_model` for arm ``arm`` (see :attr:`Recipe.model_settings`)."""
    return recipe_of(arm).model_settings(p, arm)


def train_config(p: Profile, arm: str, **overrides: Any):
    """The arm's :class:`repro.train.TrainConfig` on the profile's device (``run.device``); ``overrides`` replace
    fields (``max_steps`` too)."""
    return recipe_of(arm).train_config(p, arm, **{"device": p.run.device, **overrides})


def trained_steps(p: Profile, arm: str) -> int:
    """Optimizer steps arm ``arm`` trains (an early-stopped arm stops before its schedule's end)."""
    r = recipe_of(arm)
    return r.steps(p, arm) if r.steps is not None else r.train_config(p, arm).max_steps


def prepare_model(p: Profile, method, model) -> None:
    """What a method changes on the model before training: with document masks (ProLong) under ``sdpa``, each
    packed document is attended alone (:func:`repro.attention.doc_masked.use_doc_masked_attention`: flash-attn
    varlen or else flex attention's block mask on CUDA, ``sdpa_varlen`` on the CPU)."""
    attn = getattr(model.config, "_attn_implementation", None) or p.model.attn_implementation
    if getattr(method, "doc_masks", False) and attn == "sdpa":
        from repro.attention.doc_masked import use_doc_masked_attention

        use_doc_masked_attention(model)
