"""``python -m repro train``: one method on a local model and a data source, with :class:`repro.train.Trainer`.

Writes ``<out>/metrics.jsonl`` (one line per step), ``<out>/final/`` (weights, config, tokenizer,
``train_summary.json``) and ``<out>/run.json`` (the arguments and the arm trained). The arm is built through the one
table :func:`repro.arms.build_arm` with the settings of ``--profile`` resized to the target
(:func:`repro.profiles.scaled_profile`) and the positional ``section.field=value`` overrides, exactly as the
pipeline's stages build it. ``--method`` takes a name of :data:`repro.arms.METHOD_NAMES` or any arm name of the
table.

:func:`build_parts` turns parsed arguments into the model, the arm's spec and the run's config; :func:`main` trains.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import tempfile
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Iterator

import torch.distributed as dist

from repro.arms import ALIASES, METHOD_NAMES, ArmData, ArmSpec, arm_names, build_arm, builder_of, prepare_model
from repro.cli import data as cli_data
from repro.cli.common import (CLIError, CommandInterrupted, RankAgreedError, add_device_args, check_out, choice,
                              device_args, launched_rank, load_cli_model, load_tokenizer_from, model_dir,
                              output_dir, positive_float, positive_int)
from repro.cli.data import DATA_KINDS, parse_data_spec
from repro.cli.own_settings import (base_window_of, chosen_profile, final_config, model_config, paper_rope,
                                    positions_note, rope_theta_arg, run_warmup, write_final_config)
from repro.cli.resume import check_start, stopped_error, stopping_errors
from repro.cli.train_checks import (MAX_STEPS, MAX_TARGET, MAX_TOKENS_PER_STEP, MIN_TARGET, PAPER_ROPE,  # noqa: F401
                                    SEED_LIMIT, check_counts, check_lora_rank, check_step_tokens, env_limit,
                                    fit_config, launch_hint, model_rope, notice, read_anchors, run_rope,
                                    upcast_note, zero_stage)
from repro.devices import resolve_device
from repro.distributed import free_port, is_launched, launched_world_size, make_accelerator
from repro.io import atomic_write_json
from repro.locks import StageLocked, lock_settings, stage_lock
from repro.lora import LoraSpec, apply_lora
from repro.profiles import TRAIN_PROFILES, get_profile, scaled_profile
from repro.profiles.overrides import parse_overrides
from repro.train import Trainer
from repro.train.checkpoints import latest_checkpoint

FLAG_FIELDS = {"extend.target_window": "--target", "base.window": "--base-window", "run.device": "--device",
               "run.dtype": "--dtype"}
"""Profile fields a flag sets (a positional override of them is refused, naming the flag)."""

def add_parser(sub) -> argparse.ArgumentParser:
    """The ``train`` subcommand's arguments."""
    t = sub.add_parser("train", help="train one method on a local model folder")
    t.add_argument("overrides", nargs="*", metavar="SECTION.FIELD=VALUE",
                   help="profile fields replaced for this run, e.g. cdt.beta=3 extend.steps=200 (python -m repro "
                        "profiles lists the sections; values are parsed to the field's type)")
    t.add_argument("--model", required=True, help="local model folder (config.json + weights)")
    t.add_argument("--method", required=True,
                   help=f"one of: {', '.join(f'{k} ({v})' if k != v else k for k, v in METHOD_NAMES.items())}; "
                        "ce (rp_standard: CDT's CE baseline); or any arm name (rp_cyclic, pl_long20, ...)")
    t.add_argument("--target", required=True, type=positive_int, help="target context window in tokens")
    t.add_argument("--data", required=True, help=f"source spec: {', '.join(DATA_KINDS)}")
    t.add_argument("--steps", type=positive_int, default=None, help="optimizer steps (default: the profile's)")
    t.add_argument("--lr", type=positive_float, default=None, help="peak learning rate (default: the profile's)")
    t.add_argument("--batch-size", type=positive_int, default=None, help="rows per step (default: the profile's)")
    t.add_argument("--seed", type=int, default=None, help="data and step seed (default: the profile's)")
    t.add_argument("--out", default=None, help="output folder (default: runs/train-<method>-<target>)")
    t.add_argument("--tokenizer", default=None, help="tokenizer folder or tokenizer.json (default: the model's)")
    t.add_argument("--rope-theta", type=rope_theta_arg, default=None, metavar="THETA|paper",
                   help="RoPE base of the trained model (default: the model's own, from its config.json). 'paper': "
                        "the method's paper value computed from this model: selfdistill/longce/ce/cdt ABF, the "
                        "model's base x selfdistill.rope_theta / model.rope_theta of the profile (16x in pretrained "
                        "and paper, as the paper raises Llama-3's 5e5 to 8e6; 6.4x in tiny); prolong 2x the "
                        "dynamic-NTK base theta x t^(d/(d-2)) from the model's base theta, head size d and t = "
                        "--target / base window (prolong.rope_ntk_multiple; ProLong: 8e6 for Llama-3 at 64K); the "
                        "other methods the profile's extend.rope_*. A one-line note says what changed")
    t.add_argument("--profile", default=None,
                   help=f"settings the method starts from: {', '.join(TRAIN_PROFILES)} (default: tiny for the "
                        "project's own models, those with the smoke or tiny profile's model shape; pretrained for "
                        "any other: lr 1e-5, --data only, the model's own window; a note says which)")
    t.add_argument("--base-window", type=positive_int, default=None,
                   help="the model's original window (default: the profile's, at most the target; pretrained: the "
                        "model's max_position_embeddings)")
    t.add_argument("--anchors", default=None,
                   help="longrecipe: JSON of anchor token ids (a list, or `analyze tokens`' anchors.json)")
    t.add_argument("--data-bytes", type=positive_int, default=2_000_000,
                   help="bytes read per built-in source of corpus:* specs (default 2,000,000)")
    t.add_argument("--checkpoint-every", type=int, default=0, help="checkpoint interval in steps (0: final only)")
    t.add_argument("--no-progress", action="store_true", help="no progress bar")
    t.add_argument("--lora", type=int, default=0, metavar="R",
                   help="train LoRA adapters of rank R through peft (0: full fine-tuning; repro.lora)")
    t.add_argument("--lora-alpha", type=positive_float, default=None, help="LoRA alpha (default 2 x rank)")
    t.add_argument("--lora-targets", default=None,
                   help="comma-separated module names that get adapters (default q_proj,k_proj,v_proj,o_proj)")
    t.add_argument("--lora-trainable", default=None,
                   help="comma-separated parameter-name parts trained in full beside the adapters "
                        "(LongLoRA: embed_tokens,norm)")
    t.add_argument("--deepspeed", default=None, metavar="CONFIG",
                   help="DeepSpeed JSON config (e.g. configs/deepspeed_zero3.json); with a launcher "
                        "(accelerate launch / torchrun) every process trains its share of each step's rows")
    t.add_argument("--sequence-parallel", type=positive_int, default=None, metavar="N",
                   help="processes that share every row (sequence parallelism; default: the profile's "
                        "extend.sequence_parallel). Launch DP x N processes: accelerate launch --num_processes "
                        "DP*N -m repro train ... --sequence-parallel N (repro.parallel.rows)")
    t.add_argument("--trust-remote-code", action="store_true",
                   help="run model code shipped in the model folder (off: only transformers' own architectures)")
    t.add_argument("--resume-with-changes", default=None, metavar="FIELDS",
                   help="resume the run in --out with these arguments changed (comma-separated: steps, lr, "
                        "batch-size, seed, data, data-bytes, dtype, model, tokenizer); without it a resume must "
                        "repeat the run's arguments (repro.cli.resume)")
    t.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute decoder layers in the backward pass (less activation memory)")
    add_device_args(t, "the forward's precision: auto (bfloat16 autocast on CUDA; on the CPU the method's own "
                       "setting), float32, or bfloat16 (autocast; the weights and optimizer stay float32)")
    return t


@dataclass
class TrainRun:
    """A run ready to start: the trainer and what the command writes after it."""

    trainer: object
    """The :class:`repro.train.Trainer`."""
    tokenizer: object
    """Saved next to the final weights."""
    out: Path
    """The output folder."""
    arm: str
    """The arm trained (``rp_skip`` for ``selfdistill``, ...)."""
    profile: object
    """The resized profile the method was built from."""
    final_config: dict = field(default_factory=dict)
    """Fields set in ``final/config.json`` after training (:func:`final_config`)."""


def check_args(args: argparse.Namespace) -> None:
    """Every argument check that needs no file read: a :class:`CLIError` naming the bad value."""
    arm_of(args.method)
    if args.profile is not None:
        choice(args.profile, tuple(TRAIN_PROFILES), "profile")
    if args.target > MAX_TARGET:
        raise CLIError(f"--target {args.target} is longer than allowed; allowed: {MIN_TARGET} <= --target <= "
                       f"{MAX_TARGET}")
    if args.target < MIN_TARGET:
        raise CLIError(f"--target {args.target} is too short; allowed: {MIN_TARGET} <= --target <= {MAX_TARGET}")
    check_counts(args)
    if args.checkpoint_every < 0:
        raise CLIError(f"--checkpoint-every {args.checkpoint_every}; allowed: 0 (final only) or >= 1")
    if args.lr is not None and args.lr > 1:
        raise CLIError(f"--lr {args.lr}; allowed: 0 < --lr <= 1")
    if args.lora < 0:
        raise CLIError(f"--lora {args.lora}; allowed: 0 (full fine-tuning) or a rank >= 1")
    if args.lora == 0 and any(v is not None for v in (args.lora_alpha, args.lora_targets, args.lora_trainable)):
        raise CLIError("--lora-alpha/--lora-targets/--lora-trainable need --lora R; allowed: a rank R >= 1")
    if args.deepspeed is not None and not Path(args.deepspeed).is_file():
        raise CLIError(f"--deepspeed {args.deepspeed!r} does not exist; allowed: a DeepSpeed JSON config "
                       "(e.g. configs/deepspeed_zero3.json)")
    if args.anchors is not None and not Path(args.anchors).is_file():
        raise CLIError(f"--anchors {args.anchors!r} does not exist; allowed: a JSON file of token ids")
    sp = getattr(args, "sequence_parallel", None) or 1
    if sp > 1:
        world = launched_world_size()
        if world % sp:
            raise CLIError(f"--sequence-parallel {sp} needs a multiple of {sp} processes, got {world}; allowed: "
                           f"{launch_hint(sp)}, or a divisor of {world}")
    parse_data_spec(args.data)
    device_args(args)  # before the profile is built with them (check_batch_split)
    check_batch_split(args)
    model_dir(args.model)


def check_batch_split(args: argparse.Namespace) -> None:
    """The rows of a step (``--batch-size``, or the profile's) must split evenly over the data-parallel processes
    (``WORLD_SIZE / --sequence-parallel``): checked from the launcher's environment alone, before any engine is
    built or file written, and raised alike by every rank (:class:`RankAgreedError`: rank 0 prints it)."""
    p = run_profile(args)
    world, sp, batch = launched_world_size(), p.extend.sequence_parallel, p.extend.batch_size
    if world % sp or (world // sp) <= 1 or batch % (world // sp) == 0:
        return  # one data-parallel process, or a process count --sequence-parallel refuses itself
    dp = world // sp
    given = f"--batch-size {batch}" if args.batch_size is not None else f"--batch-size {batch} (profile {p.name})"
    split = f"WORLD_SIZE={world}" + (f" / --sequence-parallel {sp}" if sp > 1 else "")
    raise RankAgreedError(f"{given} cannot be split over {dp} data-parallel processes ({split}); allowed: a "
                          f"multiple of {dp}, e.g. --batch-size {dp * max(1, round(batch / dp))}")


def arm_of(method: str) -> str:
    """The arm ``--method`` trains: :data:`repro.arms.METHOD_NAMES`' or an arm name of the table."""
    if method in METHOD_NAMES or method in ALIASES:
        return {**METHOD_NAMES, **ALIASES}[method]
    try:
        builder_of(method)
    except ValueError:
        raise CLIError(f"unknown method {method!r}; allowed: {', '.join(METHOD_NAMES)}, or an arm name: "
                       f"{', '.join(arm_names())}") from None
    return method


def run_bf16(args: argparse.Namespace) -> bool | None:
    """bf16 autocast of the run: ``--dtype bfloat16`` or ``float32``, or ``auto`` on CUDA (bf16); None for ``auto``
    on the CPU (the profile's setting)."""
    if args.dtype == "auto" and resolve_device(args.device).type != "cuda":
        return None
    return args.dtype != "float32"


def run_profile(args: argparse.Namespace):
    """The ``--profile`` settings (or the default one for the model, :func:`chosen_profile`; resized to the model's
    own window for the pretrained profile, :func:`base_window_of`) with the positional ``section.field=value``
    overrides, resized to the run
    (:func:`repro.profiles.scaled_profile`: the target, batch, steps, lr and seed of the arguments, and the fields
    tied to them; threads left to the process; checkpoints as asked), the overrides applied again on top so that
    a field named explicitly keeps its value."""
    try:
        overrides = parse_overrides(getattr(args, "overrides", None) or (), FLAG_FIELDS)
        name = chosen_profile(args)[0]
        p = get_profile(name).override(**overrides)
        bf16 = run_bf16(args)
        precision = {} if bf16 is None else {"bf16": bf16}  # --dtype governs every method's autocast
        p = scaled_profile(p, args.target, base_window=base_window_of(args, name), batch_size=args.batch_size,
                           steps=args.steps, lr=args.lr, seed=args.seed,
                           extend={"threads": 0, "checkpoint_every": args.checkpoint_every, **precision,
                                   **run_warmup(name, args.steps),
                                   **({"sequence_parallel": args.sequence_parallel}
                                      if getattr(args, "sequence_parallel", None) else {})},
                           selfdistill=precision, run={"device": args.device, "dtype": args.dtype})
        return p.override(**overrides)
    except ValueError as e:
        raise CLIError(str(e)) from e


def lora_spec(args: argparse.Namespace):
    """The :class:`repro.lora.LoraSpec` of ``--lora*`` (None without ``--lora``)."""
    if not args.lora:
        return None
    kw: dict = {"r": args.lora, "alpha": args.lora_alpha or 2.0 * args.lora}
    if args.lora_targets:
        kw["target_modules"] = tuple(t for t in args.lora_targets.split(",") if t)
    if args.lora_trainable:
        kw["trainable"] = tuple(t for t in args.lora_trainable.split(",") if t)
    try:
        return LoraSpec(**kw)
    except ValueError as e:
        raise CLIError(str(e)) from e


def make_run_accelerator(args: argparse.Namespace, global_batch: int):
    """The engine of this process (:func:`repro.distributed.make_accelerator`): DDP when started by a launcher
    without ``--deepspeed``, DeepSpeed with it (one process of its own when not launched); None for a plain
    single-process run."""
    if args.deepspeed is None and not is_launched():
        return None
    if not is_launched():  # DeepSpeed in one process (one GPU with CPU offload): a process group of one
        for k, v in {"RANK": "0", "LOCAL_RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1",
                     "MASTER_PORT": str(free_port())}.items():
            os.environ.setdefault(k, v)
    return make_accelerator(args.deepspeed, global_batch=global_batch)


@dataclass
class TrainParts:
    """What a run is built from, before any engine or trainer: the arm's spec, the model and the run's settings."""

    spec: ArmSpec
    """The arm's spec (:func:`arm_spec`): its method, model settings, train config, cache fields."""
    model: object
    """The loaded model (LoRA adapters applied when asked)."""
    cfg: object
    """The run's :class:`repro.train.TrainConfig`: the spec's with ``--dtype`` and ``--gradient-checkpointing``."""
    tokenizer: object
    """The run's tokenizer."""
    profile: object
    """The resized profile."""
    out: Path
    """The output folder (not created here)."""

    @property
    def method(self):
        """The built method."""
        return self.spec.method

    @property
    def arm(self) -> str:
        """The arm trained."""
        return self.spec.name


def arm_spec(p, arm: str, tokenizer=None, data: ArmData | None = None) -> ArmSpec:
    """The spec the command trains arm ``arm`` with: :func:`repro.arms.build_arm`'s, the one the cached stages
    build too (``tests/stages/test_arm_table.py`` checks they agree)."""
    return build_arm(p, arm, tokenizer, data)


def build_parts(args: argparse.Namespace) -> TrainParts:
    """Parsed ``train`` arguments -> :class:`TrainParts` (model loaded, method built; nothing written)."""
    check_args(args)
    arm = arm_of(args.method)
    out = run_folder(args)
    refuse_finished(out)
    check_out(out)
    tok = load_tokenizer_from(args.tokenizer or args.model, "--tokenizer" if args.tokenizer else "--model",
                              pad_written=f"into {out / 'final'} (its tokenizer files, and config.json's pad_token_id "
                                          "where the model has none)", trust_remote_code=args.trust_remote_code)
    p = run_profile(args)
    check_step_tokens(p.extend.batch_size, args.target)
    plan = arm_spec(p, arm)  # what the arm reads, before any data is loaded
    why = chosen_profile(args)[1]
    if why:
        notice(why)
    docs = cli_data.documents(args.data, tok, p.extend.target_window, args.data_bytes)
    if plan.data == "streams":
        data = ArmData(streams=cli_data.prolong_streams(p, docs, args.data, p.extend.seed))
    else:
        cli_data.require_length(docs, args.target, args.data)
        data = ArmData(corpus_rows=cli_data.corpus_rows(docs),
                       anchors=read_anchors(args.anchors, args.method, len(tok), plan.needs_anchors))
    spec = arm_spec(p, arm, tok, data)
    settings, own = dict(spec.model), model_rope(args.model)
    paper = paper_rope(p, arm, own, model_config(args.model)) if args.rope_theta == PAPER_ROPE else None
    settings["rope"], note = run_rope(spec.model["rope"], own, args.rope_theta, paper)
    for line in (note, positions_note(spec, model_config(args.model)), upcast_note(args.model)):
        if line:
            notice(line)
    model = load_cli_model(args.model, args.trust_remote_code, attn_implementation=p.model.attn_implementation,
                           **settings)
    if model.config.vocab_size < len(tok):
        raise CLIError(f"--tokenizer has {len(tok)} tokens but the model's vocabulary is {model.config.vocab_size}; "
                       "allowed: the model's own tokenizer")
    lora = lora_spec(args)
    if lora is not None:
        check_lora_rank(model, lora)
    fit_config(model, tok, args.target, out)
    prepare_model(p, spec.method, model)
    if lora is not None:
        if zero_stage(args.deepspeed) == 3:
            raise CLIError(f"--lora with --deepspeed {args.deepspeed!r} (ZeRO stage 3); allowed: LoRA single-process, "
                           "under DDP, or with a ZeRO stage 0-2 config")
        try:
            model = apply_lora(model, lora, seed=p.extend.seed)
        except ValueError as e:
            raise CLIError(f"--lora-targets/--lora-trainable: {e}") from e
    cfg = spec.train
    if run_bf16(args) is not None:  # bf16 autocast on CUDA by default (the methods' too: run_profile)
        cfg = replace(cfg, bf16=run_bf16(args))
    if args.gradient_checkpointing:
        cfg = replace(cfg, gradient_checkpointing=True)
    return TrainParts(spec, model, cfg, tok, p, out)


def run_folder(args: argparse.Namespace) -> Path:
    """The output folder: ``--out``, or ``runs/train-<method>-<target>``."""
    return Path(args.out or f"runs/train-{args.method}-{args.target}")


def refuse_finished(out: Path) -> None:
    """A :class:`RankAgreedError` when ``out`` holds a finished run (``final/``): training it again would overwrite
    it. Re-checked under the run's lock, where a process that waited finds the run its holder finished."""
    if (out / "final" / "config.json").exists():
        raise RankAgreedError(f"--out {str(out)!r} already holds a finished run (final/); allowed: a new folder")


def make_trainer(args: argparse.Namespace, parts: TrainParts, accelerator) -> TrainRun:
    """The :class:`TrainRun` of ``parts`` on ``accelerator`` (None: one plain process); creates the output folder."""
    if accelerator is None or accelerator.is_main_process:
        output_dir(parts.out)
    trainer = Trainer(parts.model, parts.method, parts.cfg, parts.out, progress=not args.no_progress,
                      accelerator=accelerator)
    return TrainRun(trainer, parts.tokenizer, parts.out, parts.arm, parts.profile,
                    final_config(args.model, parts.spec))


@contextlib.contextmanager
def run_lock(out: Path, accelerator=None) -> Iterator[None]:
    """Hold the run's lock while it writes: :func:`repro.locks.stage_lock` on ``out`` (``.<out>.lock``
    beside it, the pipeline stages' mechanism), so a second ``train`` on the same ``--out`` waits for the first
    (naming it) or, with ``REPRO_LOCK_WAIT=0``, is refused at once naming the holder.

    In a launched run rank 0 alone takes the lock (several ranks of one run would lock each other out) and every
    rank learns its outcome from one broadcast, so all ranks go on together or all refuse (exit 2, printed once);
    meanwhile the other ranks wait in that broadcast, which the process group's timeout bounds."""
    try:
        lock_settings()  # every rank reads the same environment: a bad REPRO_LOCK_* is refused alike
    except ValueError as e:
        raise RankAgreedError(str(e)) from e
    with contextlib.ExitStack() as held:
        refused = None
        if accelerator is None or accelerator.is_main_process:
            try:
                held.enter_context(stage_lock(out, what="run"))
            except StageLocked as e:
                refused = f"--out {str(out)!r} is in use: {e}; allowed: another --out, or wait for it"
        if accelerator is not None and accelerator.num_processes > 1:
            refused = _from_rank0(refused, accelerator)
        if refused is not None:
            raise RankAgreedError(refused)
        yield


def _from_rank0(value, accelerator):
    """Rank 0's ``value`` on every rank of ``accelerator``'s process group."""
    box = [value]
    dist.broadcast_object_list(box, src=0, device=accelerator.device)
    return box[0]


def interrupted_note(out: Path) -> str:
    """The line a ``train`` stopped by Ctrl-C prints: the checkpoint kept (if any) and that re-running the same
    command resumes from it."""
    ckpt = latest_checkpoint(out) if out.is_dir() else None
    if ckpt is None:
        return (f"interrupted (Ctrl-C) before any checkpoint of {out} was kept (--checkpoint-every N keeps one every "
                "N steps); nothing half-written is kept: re-running the same command starts the run again")
    step = int(ckpt.name.split("-")[1])
    return (f"interrupted (Ctrl-C); kept checkpoint {ckpt} (step {step}) and the metrics up to it: re-running the "
            "same command resumes from it")


TOKENIZER_LAST = "tokenizer_config.json"
"""The tokenizer file moved into ``final/`` last: a ``final/`` without it is a run killed before its end."""


def save_tokenizer(tok, final: Path) -> None:
    """Save ``tok`` into ``final/``: written to a temporary folder beside it, then each file renamed in, with
    :data:`TOKENIZER_LAST` last, so that a ``final/`` holding that file holds the whole tokenizer."""
    tmp = Path(tempfile.mkdtemp(prefix=".tokenizer.", suffix=".tmp", dir=final.parent))
    try:
        tok.save_pretrained(tmp)
        files = sorted((p for p in tmp.iterdir() if p.is_file()), key=lambda p: p.name == TOKENIZER_LAST)
        for f in files:
            os.replace(f, final / f.name)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def main(args: argparse.Namespace) -> int:
    """Train, save the tokenizer with the weights, print where they are, all under the run's lock (:func:`run_lock`).
    Re-running the command of a killed or interrupted run resumes it: from its last checkpoint, or, when it was
    killed after writing ``final/`` but before the tokenizer, by saving the tokenizer alone. Ctrl-C ends it with a
    :class:`CommandInterrupted` naming the checkpoint kept."""
    out = run_folder(args)
    try:
        check_start(args, out)  # --out outside --data, a resume repeats the run's arguments (repro.cli.resume)
        if tokenizer_missing(out):
            check_args(args)
            return finish_tokenizer(args, out)
        parts = build_parts(args)  # checks the arguments and reads only: refuses a finished run before training
        accelerator = make_run_accelerator(args, parts.profile.extend.batch_size)
        with run_lock(out, accelerator):
            refuse_finished(out)  # the holder we waited for may have finished it
            return train_run(args, make_trainer(args, parts, accelerator))
    except stopping_errors() as e:  # a non-finite loss, a full disk: one line (repro.cli.resume)
        raise stopped_error(e, out) from e
    except KeyboardInterrupt as e:
        if isinstance(e, CommandInterrupted):
            raise
        raise CommandInterrupted(interrupted_note(out)) from e


def tokenizer_missing(out: Path) -> bool:
    """``out/final/`` holds the weights but not the tokenizer: a run stopped between the two."""
    final = out / "final"
    return (final / "config.json").exists() and not (final / TOKENIZER_LAST).exists()


def finish_tokenizer(args: argparse.Namespace, out: Path) -> int:
    """Save the missing tokenizer of a run stopped after its final weights (rank 0 of a launched run alone, under
    the run's lock; the check is repeated there in case another process finished it meanwhile)."""
    if launched_rank() != 0:
        return 0
    with run_lock(out):
        if tokenizer_missing(out):
            spec = arm_spec(run_profile(args), arm_of(args.method))
            write_final_config(out / "final", final_config(args.model, spec))
            save_tokenizer(load_tokenizer_from(args.tokenizer or args.model,
                                               "--tokenizer" if args.tokenizer else "--model",
                                               trust_remote_code=args.trust_remote_code), out / "final")
    print(f"finished {out / 'final'} (its tokenizer was missing: the run had been stopped after its final weights)")
    return 0


def train_run(args: argparse.Namespace, run: TrainRun) -> int:
    """Write ``run.json``, train, save the tokenizer into ``final/`` and say where it is (rank 0 writes)."""
    main_rank = run.trainer.main
    if main_rank:
        atomic_write_json(run.out / "run.json", {"args": vars(args), "arm": run.arm, "profile": run.profile.name,
                                                 "train_config": run.trainer.cfg,
                                                 "world_size": run.trainer.world_size})
    final = run.trainer.train()
    if main_rank:
        write_final_config(final, run.final_config)  # before the tokenizer: its last file marks final/ complete
        save_tokenizer(run.tokenizer, final)
        print(f"trained {args.method} ({run.arm}) for {run.trainer.step} steps on {run.trainer.world_size} "
              f"process(es) -> {final}")
    return 0
