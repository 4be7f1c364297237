"""The one training stage of every trained arm: the base continued with the arm's spec, cached.

:func:`train_arm` builds the arm through the table of :mod:`repro.arms` (:func:`arm_spec`: model settings, method,
:class:`repro.train.TrainConfig`, cache fields), loads what the arm reads (the corpus rows, or ProLong's streams),
builds every batch once ahead of training (:func:`prepare_extension_data`) and trains. Arms that select anchor
sentences get their anchors from the caller (:func:`repro.stages.extension.train_extension` runs LongRecipe's
analysis first).

Started by a multi-process launcher (``WORLD_SIZE`` > 1, :mod:`repro.distributed`), an arm trains on every process
through DeepSpeed with ``extend.deepspeed_config`` (DDP without one), rank 0 preparing the earlier stages and the
data first; a single process leaves ``deepspeed_config`` unused (an engine of one process adds nothing).
"""

from __future__ import annotations

import contextlib
from dataclasses import replace
from pathlib import Path

from repro.arms import ArmData, ArmSpec, build_arm, prepare_model
from repro.data.tokenizer import load_tokenizer
from repro.distributed import is_launched, make_accelerator
from repro.io import atomic_write_json, read_json
from repro.methods.prepared import PreparedBatches, prepare_batches
from repro.models import load_model
from repro.paths import REPO
from repro.profiles import Profile
from repro.recipes.plans import TIMED_ARMS, timed_threads
from repro.stages.base import train_base
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.corpus import build_corpus
from repro.stages.curves import export_curve
from repro.stages.keys import extension_key
from repro.stages.prolong import build_streams
from repro.train import Trainer


def main_process_first(accelerator):
    """``accelerator.main_process_first()`` (rank 0 builds shared files, the others then read them); a no-op
    context for a single process."""
    return contextlib.nullcontext() if accelerator is None else accelerator.main_process_first()


def prepare_extension_data(p: Profile, method: str, m, run_dir: str | Path = "runs", force: bool = False,
                           steps: int | None = None) -> Path:
    """Every training batch of arm ``method`` (``steps``, default ``extend.steps``) built once before training
    (cached next to the arm's stage folder, same key): its data time per step becomes a read (LongRecipe
    selects its samples offline)."""
    out = stage_dir(run_dir, p, f"data-{method}", extension_key(p, method))
    with compute_once(out, "prepared.json", force) as done:
        if done is not None:
            return out
        return prepare_batches(m, steps or p.extend.steps, out, workers=p.extend.data_workers)


def _accelerator(p: Profile):
    """The engine of a launched run (None for a single process)."""
    if not is_launched():
        return None
    e = p.extend
    ds = e.deepspeed_config and (Path(e.deepspeed_config) if Path(e.deepspeed_config).is_absolute()
                                 else REPO / e.deepspeed_config)
    return make_accelerator(ds or None, global_batch=e.batch_size)


def arm_spec(p: Profile, name: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """The spec the stage trains arm ``name`` with: :func:`repro.arms.build_arm`'s, the one the command line
    builds too (``tests/stages/test_arm_table.py`` checks they agree)."""
    return build_arm(p, name, tokenizer, data)


def run_config(p: Profile, spec: ArmSpec):
    """The stage's :class:`repro.train.TrainConfig` of ``spec``: a kept checkpoint every ``curve_every`` steps for
    the arms with a training curve, and all the cores the side-by-side stages share for the arms whose step time is
    reported (:data:`repro.recipes.plans.TIMED_ARMS`: trained alone, :mod:`repro.stages.schedule`)."""
    keep = {"checkpoint_every": spec.curve_every, "keep_checkpoints": 10**6} if spec.curve_every else {}
    if spec.name in TIMED_ARMS:
        keep["threads"] = timed_threads(p)
    return replace(spec.train, **keep)


def _inputs(p: Profile, name: str, run_dir: str | Path, anchors, progress: bool):
    """(the arm's spec with its method, the model loaded from the base with its settings, the corpus tokenizer)."""
    plan = arm_spec(p, name)
    base = train_base(p, run_dir, progress=progress)
    model = load_model(base, attn_implementation=p.model.attn_implementation, **plan.model)
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    data = (ArmData(streams=build_streams(p, run_dir)) if plan.data == "streams"
            else ArmData(corpus_rows=corpus.rows(), anchors=anchors))
    spec = arm_spec(p, name, tok, data)
    prepare_model(p, spec.method, model)  # e.g. document masks: each packed document attended alone
    return spec, model, tok


def train_arm(profile: Profile | str, name: str, run_dir: str | Path = "runs", force: bool = False,
              progress: bool = True, anchors=None) -> Path:
    """Train (or reuse) arm ``name`` (``<arm>@seed<k>`` for a replicate: the same base, its own data and step
    seeds, :func:`repro.arms.replicate_profile`); returns its ``final`` folder. ``anchors``: the anchor token
    ids of an arm that selects anchor sentences."""
    p = as_profile(profile)
    if arm_spec(p, name).needs_anchors and anchors is None:
        raise ValueError(f"arm {name!r} selects anchor sentences; allowed: anchors= the analysis's token ids "
                         "(repro.stages.extension.train_extension computes them)")
    out = stage_dir(run_dir, p, f"extend-{name}", extension_key(p, name))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        accelerator = _accelerator(p)
        with main_process_first(accelerator):
            spec, model, tok = _inputs(p, name, run_dir, anchors, progress)
            data = prepare_extension_data(p, name, spec.method, run_dir, steps=spec.steps)
        final = Trainer(model, PreparedBatches(data, inner=spec.method), run_config(p, spec), out, progress=progress,
                        accelerator=accelerator).train()
        if accelerator is None or accelerator.is_main_process:
            _finish(spec, out, final, tok)
        if accelerator is not None:
            accelerator.wait_for_everyone()
        return final


def _finish(spec: ArmSpec, out: Path, final: Path, tok) -> None:
    """The trained folder made whole: evaluation-time config fields, the tokenizer, the curve's folders."""
    if spec.final_config:
        atomic_write_json(final / "config.json", {**read_json(final / "config.json"), **spec.final_config})
    tok.save_pretrained(final)
    if spec.curve_every:
        export_curve(out, final)
