"""The pretrained base evaluated as it is (a profile with ``real.enabled``, ``smol``): NIAH by needle depth within
its window and RoPE-scaled beyond it, the way ``python -m repro evaluate`` runs it.

:func:`evaluate_as_is` is ``evaluate``'s own evaluation (:func:`repro.evaluate.prediction_rows`: the chat template
as ``--chat-template`` decides, RULER's prediction rows) on the model's own config: its ``max_position_embeddings``
are never raised, and a training-free RoPE scaling (``real.scalings``: ``linear:F``, ``dynamic:F``, ``yarn:F``) is
the evaluation's explicit setting, recorded with every row. One cached JSON record per (scaling, grid) under
``<run_dir>/<profile>/eval/``.
"""

from __future__ import annotations

import time
from pathlib import Path

from transformers import AutoConfig

from repro.data.tokenizer import load_tokenizer
from repro.evaluate import prediction_rows
from repro.models import load_model, scaled_rope
from repro.profiles import Profile
from repro.profiles.real import parse_scaling
from repro.stages.cache import as_profile, cached_json, checkpoint_id, eval_path, stage_key
from repro.stages.checkpoints import checkpoint_path

TASK = "niah_single_1"
"""RULER's single needle (a 7-digit value under a word key in essays of the haystack): the task of both grids."""


def evaluate_as_is(profile: Profile | str, lengths: tuple[int, ...], samples: int, scaling: str = "none",
                   run_dir: str | Path = "runs", force: bool = False, progress: bool = True) -> dict:
    """The base (``model.pretrained``) on :data:`TASK` at ``lengths``, ``samples`` prompts per length with depths
    taken in turn from ``eval.depths`` (seeds ``eval.seed ..``: the same prompts for every scaling), RoPE scaled by
    ``scaling`` (``none`` or ``kind:F``, :func:`repro.profiles.real.parse_scaling`) on top of the model's own,
    the chat template per ``real.chat_template``. Returns the cached record: ``rows`` (``evaluate``'s prediction rows),
    ``skipped``, ``seconds``, ``rope_scaling``, ``rope_parameters`` (None: the model's own), ``max_position_embeddings``
    (the model's, unchanged), ``chat_template`` (``on``/``off``) and ``chat_template_flag``."""
    p = as_profile(profile)
    kind, factor = parse_scaling(scaling)
    path = checkpoint_path(p, "base", run_dir)
    ev, real = p.eval, p.real
    key = stage_key("eval", {"ckpt": checkpoint_id(path, run_dir), "task": TASK, "lengths": lengths,
                             "depths": ev.depths, "samples": samples, "seed": ev.seed, "scaling": scaling,
                             "chat": real.chat_template, "as_is": True})

    def compute() -> dict:
        tok = load_tokenizer(path)
        chat = chat_on(tok, real.chat_template, path)
        cfg = AutoConfig.from_pretrained(str(path))
        rope = None if factor is None else scaled_rope(cfg, kind, factor)
        model = load_model(path, rope=rope, **p.run.load_kwargs()).eval()  # its own positions: never raised
        t0 = time.perf_counter()
        rows, skipped = prediction_rows(model, tok, [TASK], list(lengths), list(ev.depths), samples, ev.seed,
                                    ev.batch_size, progress, chat, scaling)
        return {"checkpoint": str(path), "seconds": time.perf_counter() - t0, "rows": rows, "skipped": skipped,
                "rope_scaling": scaling, "rope_parameters": rope,
                "max_position_embeddings": getattr(cfg, "max_position_embeddings", None),
                "chat_template": "on" if chat else "off", "chat_template_flag": real.chat_template}

    return cached_json(eval_path(run_dir, p, f"asis-{scaling.replace(':', '')}-{key}"), force, compute)


def chat_on(tok, mode: str, path: Path) -> bool:
    """Whether prompts go through ``tok``'s chat template under ``real.chat_template`` ``mode``, as ``evaluate
    --chat-template`` decides (``auto``: when it has one); ``on`` without one is a ValueError."""
    has = bool(getattr(tok, "chat_template", None))
    if mode == "on" and not has:
        raise ValueError(f"real.chat_template='on': the tokenizer of {str(path)!r} has no chat template; allowed: "
                         "auto or off")
    return has if mode == "auto" else mode == "on"


def niah_by_depth(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
                  progress: bool = True) -> dict:
    """``TB-NIAH`` of the base as it is: every ``eval.lengths`` (within its window), ``eval.samples`` prompts per
    depth of ``eval.depths``, no RoPE scaling (:func:`evaluate_as_is`)."""
    p = as_profile(profile)
    return evaluate_as_is(p, p.eval.lengths, p.eval.samples * len(p.eval.depths), "none", run_dir, force, progress)


def scaled_niah(profile: Profile | str, run_dir: str | Path = "runs", force: bool = False,
                progress: bool = True) -> dict[str, dict]:
    """``RP-Tab4/5`` without training: ``real.scaled_lengths`` beyond the window, ``real.scaled_samples`` prompts
    each, once per ``real.scalings`` entry; scaling -> record (:func:`evaluate_as_is`)."""
    p = as_profile(profile)
    r = p.real
    if not r.scaled_lengths:
        return {}
    return {s: evaluate_as_is(p, r.scaled_lengths, r.scaled_samples, s, run_dir, force, progress) for s in r.scalings}
