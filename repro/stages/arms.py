"""The one training stage of every trained arm: the base continued with the arm's recipe, cached.

:func:`train_arm` asks :mod:`repro.recipes` for the arm's model settings, method and
:class:`repro.train.TrainConfig`, loads what the recipe reads (the corpus rows, or ProLong's streams), builds every
batch once ahead of training (:func:`prepare_extension_data`) and trains. Arms that select anchor sentences get
their anchors from the caller (:func:`repro.stages.extension.train_extension` runs LongRecipe's analysis first).

Started by a multi-process launcher (``WORLD_SIZE`` > 1, :mod:`repro.distributed`), an arm trains on every process
through DeepSpeed with ``extend.deepspeed_config`` (DDP without one), rank 0 preparing the earlier stages and the
data first; a single process leaves ``deepspeed_config`` unused (an engine of one process adds nothing).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from repro.distributed import is_launched, make_accelerator
from repro.profiles import Profile
from repro.recipes.plans import TIMED_ARMS, timed_threads
from repro.stages.base import train_base
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.corpus import build_corpus
from repro.stages.keys import extension_key


def main_process_first(accelerator):
    """``accelerator.main_process_first()`` (rank 0 builds shared files, the others then read them); a no-op
    context for a single process."""
    return contextlib.nullcontext() if accelerator is None else accelerator.main_process_first()


def prepare_extension_data(p: Profile, method: str, m, run_dir: str | Path = "runs", force: bool = False,
                           steps: int | None = None) -> Path:
    """Every training batch of arm ``method`` (``steps``, default ``extend.steps``) built once before training
    (cached next to the arm's stage folder, same key): its data time per step becomes a read (LongRecipe
    selects its samples offline)."""
    from repro.methods.prepared import prepare_batches

    out = stage_dir(run_dir, p, f"data-{method}", extension_key(p, method))
    with compute_once(out, "prepared.json", force) as done:
        if done is not None:
            return out
        return prepare_batches(m, steps or p.extend.steps, out, workers=p.extend.data_workers)


def _accelerator(p: Profile):
    """The engine of a launched run (None for a single process)."""
    if not is_launched():
        return None
    from repro.paths import REPO

    e = p.extend
    ds = e.deepspeed_config and (Path(e.deepspeed_config) if Path(e.deepspeed_config).is_absolute()
                                 else REPO / e.deepspeed_config)
    return make_accelerator(ds or None, global_batch=e.batch_size)


def _inputs(p: Profile, rp: Profile, recipe, arm: str, run_dir: str | Path, anchors, progress: bool):
    """(model loaded from the base with the arm's settings, the arm's method, the corpus tokenizer)."""
    from repro.data.tokenizer import load_tokenizer
    from repro.models import load_model
    from repro import recipes

    base = train_base(p, run_dir, progress=progress)
    model = load_model(base, attn_implementation=p.model.attn_implementation, **recipes.model_settings(rp, arm))
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    if recipe.data == "streams":
        from repro.stages.prolong import build_streams

        m = recipes.build_method(rp, arm, tok, streams=build_streams(p, run_dir))
    else:
        m = recipes.build_method(rp, arm, tok, corpus_rows=corpus.rows(), anchors=anchors)
    recipes.prepare_model(p, m, model)  # e.g. document masks: each packed document attended alone
    return model, m, tok


def train_arm(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True, anchors=None) -> Path:
    """Train (or reuse) arm ``name`` (``<arm>@seed<k>`` for a replicate: the same base, its own data and step
    seeds, :func:`repro.recipes.replicate_profile`); returns its ``final`` folder. ``anchors``: the anchor token
    ids of an arm that selects anchor sentences."""
    from repro import recipes
    from repro.methods.prepared import PreparedBatches
    from repro.train import Trainer

    p = as_profile(profile)
    rp, arm = recipes.replicate_profile(p, name)
    recipe = recipes.recipe_of(arm)
    if recipe.needs_anchors(arm) and anchors is None:
        raise ValueError(f"arm {name!r} selects anchor sentences; allowed: anchors= the analysis's token ids "
                         "(repro.stages.extension.train_extension computes them)")
    out = stage_dir(run_dir, p, f"extend-{name}", extension_key(p, name))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        accelerator = _accelerator(rp)
        with main_process_first(accelerator):
            model, m, tok = _inputs(p, rp, recipe, arm, run_dir, anchors, progress)
            data = prepare_extension_data(p, name, m, run_dir, steps=recipes.trained_steps(rp, arm))
        every = recipe.curve_every(p, name)
        keep = {"checkpoint_every": every, "keep_checkpoints": 10**6} if every else {}
        if name in TIMED_ARMS:  # its step time is reported: trained alone on all the cores (stages.schedule)
            keep["threads"] = timed_threads(p)
        cfg = recipes.train_config(rp, arm, **keep)
        final = Trainer(model, PreparedBatches(data, inner=m), cfg, out, progress=progress,
                        accelerator=accelerator).train()
        if accelerator is None or accelerator.is_main_process:
            _finish(rp, recipe, arm, out, final, tok, every)
        if accelerator is not None:
            accelerator.wait_for_everyone()
        return final


def _finish(p: Profile, recipe, arm: str, out: Path, final: Path, tok, every: int) -> None:
    """The trained folder made whole: evaluation-time config fields, the tokenizer, the curve's folders."""
    fields = recipe.final_config(p, arm)
    if fields:
        from repro.io import atomic_write_json, read_json

        atomic_write_json(final / "config.json", {**read_json(final / "config.json"), **fields})
    tok.save_pretrained(final)
    if every:
        from repro.stages.curves import export_curve

        export_curve(out, final)

