"""The extension stage: every arm continues the same base checkpoint towards the target window."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from repro.data.synthetic import CorpusRows
from repro.distributed import is_launched, make_accelerator
from repro.io import read_jsonl
from repro.profiles import Profile
from repro.stages.base import train_base
from repro.stages.cache import as_profile, compute_once, stage_dir
from repro.stages.corpus import build_corpus
from repro.stages.keys import extension_key, replicate_profile


def train_extension(profile: Profile | str, method: str = "flt", run_dir: str | Path = "runs", force: bool = False,
                    progress: bool = True) -> Path:
    """Extend the base model to the target window with a named arm (:mod:`repro.methods.arms`);
    returns ``final``. Arms that select anchor sentences run the impactful-token analysis first (on the plain
    FLT). ``<arm>@seed<k>`` trains replicate ``k`` of the arm: the same base and analysis, its own data and
    step seeds (:func:`repro.stages.keys.replicate_profile`).

    Started by a multi-process launcher (``WORLD_SIZE`` > 1, :mod:`repro.distributed`), the arm trains on every
    process through DeepSpeed with ``extend.deepspeed_config`` (DDP without one), rank 0 preparing the earlier
    stages and the data first; a single process trains as without a launcher and leaves ``deepspeed_config`` unused
    (an engine of one process adds nothing to the single-process trainer)."""
    from repro.methods import extension_spec
    from repro.methods.prepared import PreparedBatches
    from repro.train import Trainer, TrainConfig

    from repro.methods.arms import rp_arm

    from repro.methods.arms import cd_arm, pl_arm

    p = as_profile(profile)
    if pl_arm(method) is not None:  # ProLong's recipe and ablations: rows from its data mixture
        from repro.stages.prolong import train_prolong

        return train_prolong(p, method, run_dir, force, progress)
    if cd_arm(method) is not None:  # CDT trains as the self-distillation comparison's Standard, its own objective
        from repro.stages.cdt import train_cdt

        return train_cdt(p, method, run_dir, force, progress)
    if rp_arm(method) is not None:  # the self-distillation comparison has a stage of its own
        from repro.stages.selfdistill import train_selfdistill

        return train_selfdistill(p, method, run_dir, force, progress)
    rp, arm = replicate_profile(p, method)  # a training-seed replicate trains its arm at its own seed
    spec = extension_spec(arm)
    out = stage_dir(run_dir, p, f"extend-{method}", extension_key(p, method))
    with compute_once(out, "final", force) as done:
        if done is not None:
            return done
        e = rp.extend
        accelerator = None
        if is_launched():
            from repro.pipeline import REPO

            ds = e.deepspeed_config and (Path(e.deepspeed_config) if Path(e.deepspeed_config).is_absolute()
                                         else REPO / e.deepspeed_config)
            accelerator = make_accelerator(ds or None, global_batch=e.batch_size)
        with main_process_first(accelerator):
            model, m, tok, data = _extension_inputs(p, rp, method, arm, spec, run_dir, progress)
        cfg = TrainConfig.from_section(e, e.steps, schedule="cosine")
        final = Trainer(model, PreparedBatches(data, inner=m), cfg, out, progress=progress,
                        accelerator=accelerator).train()
        if accelerator is None or accelerator.is_main_process:
            tok.save_pretrained(final)
        if accelerator is not None:
            accelerator.wait_for_everyone()
        return final


def main_process_first(accelerator):
    """``accelerator.main_process_first()`` (rank 0 builds shared files, the others then read them); a no-op
    context for a single process."""
    import contextlib

    return contextlib.nullcontext() if accelerator is None else accelerator.main_process_first()


def _extension_inputs(p: Profile, rp: Profile, method: str, arm: str, spec, run_dir: str | Path, progress: bool):
    """(model loaded from the base with the arm's RoPE, the arm's method, the corpus tokenizer, its prepared data
    folder)."""
    from repro.data.tokenizer import load_tokenizer
    from repro.models import load_model
    from repro.stages.builders import model_settings

    anchors = None
    if spec.selection == "anchors":
        # imported here: the analysis stage itself trains FLT through this module
        from repro.stages.analysis import impactful_tokens

        anchors = impactful_tokens(p, run_dir, progress=progress)["anchors"]
    base = train_base(p, run_dir, progress=progress)
    model = load_model(base, attn_implementation=p.model.attn_implementation, **model_settings(rp, arm))
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    m = extension_method(rp, arm, tok, corpus.rows(), anchors)
    return model, m, tok, prepare_extension_data(p, method, m, run_dir)


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


def extension_method(p: Profile, method: str, tokenizer, corpus_rows: CorpusRows, anchors: np.ndarray | None = None,
                     seed: int | None = None):
    """The :class:`repro.methods.Extension` of a named arm with the profile's settings (``seed``
    overrides ``extend.seed``); ``anchors`` are needed by arms that select anchor sentences."""
    from repro.methods import extension_spec, get_method

    spec, e = extension_spec(method), p.extend
    return get_method("extension", name=method, spec=spec, target=e.target_window, batch_size=e.batch_size,
                      retrieval_fraction=e.retrieval_fraction, tokenizer=tokenizer, corpus=corpus_rows,
                      seed=e.seed if seed is None else seed, context_weight=e.context_weight,
                      train_tasks=e.train_tasks,
                      sample_len=spec.resolve_len(e.target_window, p.longrecipe.sample_ratio),
                      anchors=anchors)


def extension_arms(profile: Profile | str, paper: str = "all") -> tuple[str, ...]:
    """The extension arms the training notebook trains for ``paper`` (:mod:`repro.papers`).

    FLT is the testbed's shared extension (every paper compares against it); LongRecipe adds its
    Table 1 and Table 3 arms and the token-ratio arms of ``longrecipe.ratios`` (Table 4). The arms in
    ``extend.replicate_arms`` follow with their training-seed replicates ``<arm>@seed1`` ... (``extend.seed_replicates``
    seeds in all). Self-distillation adds ``selfdistill.main_arms``, ``matched_arms`` and ``ablation_arms``, then
    the replicates of ``selfdistill.replicate_arms``. CDT adds its CE and LongCE (``cdt.compare_arms``, with their
    replicates; trained once when self-distillation is also run) and ``cdt.arms`` with their replicates. ProLong
    adds ``prolong.arms`` and the replicates of ``prolong.replicate_arms``.
    """
    from repro.methods import EXTENSION_METHODS, ratio_arm
    from repro.methods.arms import SEED_MARK
    from repro.papers import includes

    p = as_profile(profile)
    if not includes(paper, "longrecipe"):
        arms = ["flt"]
    else:
        arms = list(EXTENSION_METHODS)
        arms += [n for n in (ratio_arm(r, p.longrecipe.sample_ratio) for r in p.longrecipe.ratios) if n not in arms]
    arms += [f"{a}{SEED_MARK}{k}" for a in p.extend.replicate_arms if a in arms
             for k in range(1, p.extend.seed_replicates)]
    if includes(paper, "selfdistill"):
        sd = p.selfdistill
        rp = [*sd.main_arms, *sd.matched_arms, *sd.ablation_arms]
        arms += rp + [f"{a}{SEED_MARK}{k}" for a in sd.replicate_arms for k in range(1, p.extend.seed_replicates)]
    if includes(paper, "cdt"):
        cd, sd, k_all = p.cdt, p.selfdistill, range(1, p.extend.seed_replicates)
        compare = [*cd.compare_arms, *(f"{a}{SEED_MARK}{k}" for a in cd.compare_arms if a in sd.replicate_arms
                                       for k in k_all)]
        arms += [a for a in compare if a not in arms]
        arms += [*cd.arms, *(f"{a}{SEED_MARK}{k}" for a in cd.replicate_arms for k in k_all)]
    if includes(paper, "prolong"):
        pl, k_all = p.prolong, range(1, p.extend.seed_replicates)
        arms += [*pl.arms, *(f"{a}{SEED_MARK}{k}" for a in pl.replicate_arms for k in k_all)]
    return tuple(arms)


def metrics(path: Path) -> list[dict]:
    """The metrics log of a training stage (``path`` is its ``final`` folder or the stage folder)."""
    d = path.parent if path.name == "final" else path
    return read_jsonl(d / "metrics.jsonl")


def extension_tokens(path: Path) -> int:
    """Tokens an extension run trained on (sample tokens, padding excluded), from its metrics."""
    rows = metrics(path)
    last = rows[-1]
    return int(last.get("method_tokens", sum(r["tokens"] for r in rows)))
