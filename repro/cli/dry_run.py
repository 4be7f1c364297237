"""``python -m repro reproduce --profile NAME --dry-run``: check a profile end to end without training it.

1. ``config``: the profile validates, and every arm its training notebook trains
   (:func:`repro.arms.extension_arms`) parses and gets its training config
   (:func:`repro.arms.build_arm`).
2. ``source``: every data source the profile reads (``corpus.sources``, ``prolong.sources``) and pretrained model
   or tokenizer it names exists (local folders; hub ids must be in the local cache); a missing one is reported and
   the check continues.
3. ``accel``: every ``configs/*.json`` parses, and the profile's DeepSpeed config resolves for each arm's rows per
   step (:func:`repro.accel.load_deepspeed_config`: batch divisibility).
4. ``step``: one optimizer step of each method (:data:`repro.arms.METHOD_NAMES`) through the same
   arm table as the stages, with the profile's settings resized to a :data:`STEP_TARGET`-token target
   (:func:`repro.profiles.scaled_profile`), a tiny random Llama, a small BPE tokenizer and the built-in
   corpus (substitutions are printed in the notes: ``sdpa`` for the attention, built-in streams for missing
   ProLong sources, the most frequent tokens as LongRecipe's anchors, single process instead of DeepSpeed).
5. ``engine``: when the profile names a DeepSpeed config, one optimizer step of ``pose`` through it, in a process
   of its own (``python -m repro train --deepspeed CONFIG``, :func:`engine_step`): the engine starts with the
   config's ZeRO stage, precision and optimizer offload, on the same tiny model. Without a GPU the offloaded
   optimizer is torch's AdamW (the config's copy sets ``zero_force_ds_cpu_optimizer: false``; said in the line's
   note) rather than DeepSpeed's CPU Adam, whose C++ extension would be built first (minutes of a 2-core CPU).

Prints one line per check (``ok`` / ``missing`` / ``error``) and returns 0 only when every check is ``ok``.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import replace
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
from huggingface_hub import try_to_load_from_cache

from repro import model_store
from repro.accel import load_deepspeed_config
from repro.arms import METHOD_NAMES, ArmData, build_arm, extension_arms, prepare_model
from repro.cli import data as cli_data
from repro.cli.common import CLIError
from repro.data.corpus import iter_code, iter_prose
from repro.data.long_sources import source_documents, split_by_length
from repro.data.streams import TokenStream
from repro.data.tokenizer import train_tokenizer
from repro.io import atomic_write_json, read_json, read_jsonl
from repro.methods.arms import parse_arm
from repro.models import build_tiny, load_model
from repro.paths import REPO
from repro.profiles import PL_SOURCES, ModelConfig, get_profile, scaled_profile
from repro.methods.prolong import arm_length, long_threshold
from repro.train import Trainer

STEP_TARGET = 256
"""Target window of the one-step checks."""
STEP_BASE_WINDOW = 64
"""Base window of the one-step checks."""
STEP_BATCH = 2
"""Rows per step of the one-step checks (divisible by ProLong's long-training factor)."""
CPU_ADAM_STAND_IN = ("; no GPU: torch's AdamW in place of DeepSpeed's CPU Adam for the offloaded optimizer, whose C++ "
                     "build takes minutes of a small CPU; on GPUs the config runs as written")
"""The engine step's note when it runs an optimizer-offloading config on a machine without CUDA."""


class Report:
    """The checks' rows: ``(section, name, status, detail)``."""

    def __init__(self) -> None:
        self.rows: list[tuple[str, str, str, str]] = []

    def add(self, section: str, name: str, status: str, detail: str = "") -> None:
        self.rows.append((section, name, status, detail))
        print(f"  {section:<7} {name:<34} {status:<8} {detail}", flush=True)

    @property
    def ok(self) -> bool:
        return all(r[2] == "ok" for r in self.rows)


def _local(spec_path: str) -> Path | None:
    """An existing path for a profile's relative path (the working folder first, then the repository)."""
    for p in (Path(spec_path), REPO / spec_path):
        if p.exists():
            return p
    return None


def check_configs(p, report: Report) -> None:
    """Every arm of the profile parses and gets a training config."""
    arms = extension_arms(p)
    bad = []
    for name in arms:
        try:
            parse_arm(name)
            build_arm(p, name)
        except Exception as e:  # noqa: BLE001  (reported, the dry run goes on)
            bad.append(f"{name}: {e}")
    report.add("config", f"{len(arms)} arms", "error" if bad else "ok", "; ".join(bad)[:300])


def check_sources(p, report: Report) -> None:
    """Data sources and pretrained models named by the profile."""
    specs = [("corpus", s) for s in p.corpus.sources] + [(f"prolong.{n}", s) for n, s in p.prolong.sources]
    for where, spec in specs:
        kind, _, arg = spec.partition(":")
        if kind in ("folder", "hf_disk"):
            found = _local(arg)
            report.add("source", f"{where} {spec}", "ok" if found else "missing",
                       str(found) if found else f"no folder {arg!r} (relative to the working folder or the repo)")
        else:
            report.add("source", f"{where} {spec}", "ok", "built in")
    for what, name in (("model", p.model.pretrained), ("tokenizer", p.tokenizer.pretrained)):
        if name in model_store.MODELS and not _local(name):  # a model by name: fetched on first use
            where = model_store.model_folder(name)
            report.add("source", f"{what} {name}", "ok", str(where) if model_store.is_fetched(name) else
                       f"fetched on first use into {where} (python -m repro models fetch {name})")
        elif name:
            found = _local(name) or _hub_cached(name)
            report.add("source", f"{what} {name}", "ok" if found else "missing",
                       str(found) if found else "not a local folder and not in the local model cache")


def _hub_cached(repo_id: str) -> Path | None:
    try:
        hit = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001  (an id the cache cannot parse is simply not there)
        return None
    return Path(hit).parent if isinstance(hit, str) else None


def check_accel(p, report: Report) -> None:
    """``configs/*.json`` parse; the profile's DeepSpeed config resolves for every arm's rows per step."""
    for f in sorted((REPO / "configs").glob("*.json")):
        try:
            json.loads(f.read_text())
            report.add("accel", f"configs/{f.name}", "ok", "parses")
        except ValueError as e:
            report.add("accel", f"configs/{f.name}", "error", f"invalid JSON: {e}")
    ds = p.extend.deepspeed_config
    if not ds:
        report.add("accel", "extend.deepspeed_config", "ok", "none (single process)")
        return
    path = _local(ds) or Path(ds)
    batches = {"extend.batch_size": p.extend.batch_size,
               **{f"prolong {a} rows": arm_length(p, a)[1] for a in p.prolong.arms}}
    problems = []
    for what, batch in batches.items():
        try:
            load_deepspeed_config(path, batch)
        except (OSError, ValueError) as e:
            problems.append(f"{what}={batch}: {e}")
    report.add("accel", f"deepspeed {ds}", "error" if problems else "ok",
               "; ".join(problems)[:300] or f"resolves for batches {sorted(set(batches.values()))}")


def step_profile(p):
    """``p`` resized for the one-step checks, and the substitutions made."""
    notes, sections = [], {"extend": {"threads": 0, "checkpoint_every": 0, "workers": 1}}
    if p.model.attn_implementation != "sdpa":
        sections["model"] = {"attn_implementation": "sdpa"}
        notes.append(f"attention {p.model.attn_implementation} -> sdpa")
    if any(_local(s.partition(":")[2]) is None for _, s in p.prolong.sources if not s.startswith("corpus:")):
        names = [n for n, _ in p.prolong.sources]
        if sorted(names) == sorted(n for n, _ in PL_SOURCES):
            sections["prolong"] = {"sources": PL_SOURCES}
            notes.append("ProLong streams -> built-in corpus:*")
    sections.setdefault("prolong", {})["long_threshold"] = 0
    if p.run.device.startswith("cuda"):
        if not torch.cuda.is_available():
            sections["run"] = {"device": "cpu", "dtype": "float32"}
            notes.append(f"run.device {p.run.device} -> cpu (no CUDA device here)")
    if p.extend.deepspeed_config:
        notes.append("DeepSpeed -> single process")
    q = scaled_profile(p, STEP_TARGET, base_window=STEP_BASE_WINDOW, batch_size=STEP_BATCH, steps=1, **sections)
    return q, notes


def step_methods(p, methods: Sequence[str], report: Report, workdir: Path) -> None:
    """One optimizer step of each method on a tiny random Llama through the recipes (as the stages build them)."""
    q, notes = step_profile(p)
    t0 = time.perf_counter()
    docs_text = [d.text for d in [*iter_code(300_000), *iter_prose(300_000)]]
    tok = train_tokenizer(docs_text, 512)
    tiny = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2,
                       rope_theta=q.model.rope_theta)
    model_path = workdir / "tiny"
    build_tiny(tiny, len(tok), 4 * STEP_TARGET, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id).save_pretrained(
        model_path)
    tok.save_pretrained(model_path)
    corpus = cli_data.builtin_corpus(tok, 300_000)
    rows = cli_data.corpus_rows([corpus.tokens[a:b].astype(np.int64) for a, b in zip(corpus.offsets[:-1],
                                                                                    corpus.offsets[1:])])
    anchors = np.argsort(-np.bincount(corpus.tokens.astype(np.int64), minlength=len(tok)))[:64]
    notes.append("LongRecipe anchors -> 64 most frequent tokens")
    report.add("step", "setup", "ok", f"{time.perf_counter() - t0:.1f} s; " + "; ".join(notes))
    for name in methods:
        t1 = time.perf_counter()
        arm = METHOD_NAMES[name]
        try:
            if build_arm(q, arm).data == "streams":
                docs = {s: [d for d in _spec_docs(s, corpus, tok, long_threshold(q))] for _, s in q.prolong.sources}
                data = ArmData(streams=_streams(q, docs))
            else:
                data = ArmData(corpus_rows=rows, anchors=anchors)
            spec = build_arm(q, arm, tok, data)
            model = load_model(model_path, attn_implementation=q.model.attn_implementation, **spec.model)
            prepare_model(q, spec.method, model)
            Trainer(model, spec.method, replace(spec.train, max_steps=1), workdir / name, progress=False).train()
            loss = read_jsonl(workdir / name / "metrics.jsonl")[-1]["loss"]
            if not math.isfinite(loss):
                raise FloatingPointError(f"loss {loss}")
            report.add("step", f"{name} ({arm})", "ok", f"loss {loss:.3f}, {time.perf_counter() - t1:.1f} s")
        except Exception as e:  # noqa: BLE001  (reported, the dry run goes on)
            where = traceback.extract_tb(e.__traceback__)[-1]
            report.add("step", f"{name} ({arm})", "error",
                       f"{type(e).__name__}: {e} [{Path(where.filename).name}:{where.lineno}]"[:300])


def engine_step(p, report: Report, workdir: Path, timeout: float = 900) -> None:
    """One step of ``pose`` through the profile's DeepSpeed config in a child process (the command a user runs,
    single process) on :func:`step_methods`' tiny model (``workdir / "tiny"``) and the built-in code corpus."""
    ds = p.extend.deepspeed_config
    if not ds:
        report.add("engine", "deepspeed", "ok", "none configured")
        return
    if (workdir / "tiny" / "config.json").exists() is False or _local(ds) is None:
        report.add("engine", f"deepspeed {ds}", "error", "no tiny model (the step checks failed) or no config file")
        return
    t0, out = time.perf_counter(), workdir / "engine"
    config, stand_in = _local(ds), ""
    fields = read_json(config)
    if not torch.cuda.is_available() and _offloads_optimizer(fields):
        config, stand_in = workdir / "engine-config.json", CPU_ADAM_STAND_IN
        atomic_write_json(config, {**fields, "zero_force_ds_cpu_optimizer": False})
    cmd = [sys.executable, "-m", "repro", "train", "--model", str(workdir / "tiny"), "--method", "pose",
           "--target", str(STEP_TARGET), "--base-window", str(STEP_BASE_WINDOW), "--data", "corpus:code",
           "--data-bytes", "300000", "--steps", "1", "--batch-size", str(STEP_BATCH), "--profile", "smoke",
           "--out", str(out), "--no-progress", "--deepspeed", str(config)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO)
    except subprocess.TimeoutExpired:
        report.add("engine", f"deepspeed {ds}", "error", f"no step within {timeout:.0f} s")
        return
    if proc.returncode != 0:
        last = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or ["(no output)"]
        report.add("engine", f"deepspeed {ds}", "error", f"exit {proc.returncode}: {last[0]}"[:300])
        return
    loss = read_jsonl(out / "metrics.jsonl")[-1]["loss"]
    status = "ok" if math.isfinite(loss) else "error"
    report.add("engine", f"deepspeed {ds}", status, f"one step of pose: loss {loss:.3f}, "
               f"{time.perf_counter() - t0:.1f} s (one process{stand_in})")


def _offloads_optimizer(config: dict) -> bool:
    """Whether a DeepSpeed config moves the optimizer to the CPU (``zero_optimization.offload_optimizer``)."""
    zero = config.get("zero_optimization", {})
    return zero.get("offload_optimizer", {}).get("device", "none") != "none"


def _spec_docs(spec, corpus, tok, threshold):
    return source_documents(spec, corpus, tok, threshold)


def _streams(q, docs: dict) -> list:
    thr = long_threshold(q)
    return [TokenStream(n, split_by_length(docs[s], thr, n in q.prolong.long_streams), seed=q.extend.seed)
            for n, s in q.prolong.sources]


def dry_run(profile: str, methods: Sequence[str] | None = None, workdir: str | Path | None = None,
            engine: bool = True) -> int:
    """Run every check of the module docstring on ``profile`` (``engine=False``: all but the DeepSpeed step); 0 when
    all are ok, else 1."""
    known = METHOD_NAMES
    methods = list(methods or known)
    if bad := [m for m in methods if m not in known]:
        raise CLIError(f"unknown method {bad[0]!r} in --methods; allowed: {', '.join(known)}")
    t0 = time.perf_counter()
    report = Report()
    print(f"dry run of profile {profile!r}:")
    try:
        p = get_profile(profile)
    except ValueError as e:
        report.add("config", "profile", "error", str(e))
        return 1
    report.add("config", "profile", "ok", "validates")
    check_configs(p, report)
    check_sources(p, report)
    check_accel(p, report)
    with tempfile.TemporaryDirectory(prefix="repro-dry-run-") as tmp:
        work = Path(workdir) if workdir else Path(tmp)
        step_methods(p, methods, report, work)
        if engine:
            engine_step(p, report, work)
    bad_rows = [r for r in report.rows if r[2] != "ok"]
    print(f"dry run: {len(report.rows) - len(bad_rows)}/{len(report.rows)} ok in {time.perf_counter() - t0:.1f} s"
          + (f"; not ok: {', '.join(f'{r[0]} {r[1]}' for r in bad_rows)}" if bad_rows else ""))
    return 0 if report.ok else 1
