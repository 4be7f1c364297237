"""Where a profile runs: the device and the precision of every stage (:class:`RunConfig`). Not part of any
cache key: the same settings give the same results on any device, up to its floating-point arithmetic."""

from __future__ import annotations

from dataclasses import dataclass

DEVICES = ("auto", "cpu", "cuda", "cuda:N")
"""What ``run.device`` takes (``cuda:N``: the N-th GPU)."""
DTYPES = ("auto", "float32", "bfloat16")
"""What ``run.dtype`` takes."""


@dataclass(frozen=True)
class RunConfig:
    """The device and precision of the pipeline's stages (and the command line's ``--device`` / ``--dtype``)."""

    device: str = "auto"
    """Where models train and are evaluated: ``auto`` (the first CUDA device when there is one, else the CPU),
    ``cpu``, ``cuda`` or ``cuda:N``. Training moves the model there (``TrainConfig.device``); evaluations and
    analyses load it there."""
    dtype: str = "auto"
    """The weights' dtype for evaluation and analyses: ``auto`` (bfloat16 on CUDA, float32 on the CPU),
    ``float32`` or ``bfloat16``. Training keeps float32 weights with bf16 autocast where its section asks for
    it (``extend.bf16``, ``selfdistill.bf16``)."""

    def load_kwargs(self) -> dict[str, str]:
        """``device`` and ``dtype`` for :func:`repro.models.load_model`."""
        return {"device": self.device, "dtype": self.dtype}


def check_device(spec: str, label: str | None = None) -> str:
    """``spec`` when it is one of :data:`DEVICES` (``cuda:N`` with a number), else a ValueError starting with
    ``label`` (default ``device='<spec>'``). Only the spelling: whether the device exists is the caller's."""
    kind, _, index = spec.partition(":")
    if spec not in DEVICES[:3] and not (kind == "cuda" and index.isdigit()):
        raise ValueError(f"{label or f'device={spec!r}'}; allowed: {', '.join(DEVICES)}")
    return spec


def check_dtype(spec: str, label: str | None = None) -> str:
    """``spec`` when it is one of :data:`DTYPES`, else a ValueError starting with ``label`` (default
    ``dtype='<spec>'``)."""
    if spec not in DTYPES:
        raise ValueError(f"{label or f'dtype={spec!r}'}; allowed: {', '.join(DTYPES)}")
    return spec


def validate_run(r: RunConfig) -> None:
    """``run.device`` and ``run.dtype`` are among the allowed values (a CUDA device need not exist here: a
    profile is checked on any machine)."""
    check_device(r.device, f"run.device={r.device!r}")
    check_dtype(r.dtype, f"run.dtype={r.dtype!r}")
