"""Where tensors live: the ``--device`` / ``--dtype`` choices, and a guard that finds device bugs on a CPU.

- :func:`resolve_device` / :func:`resolve_dtype`: ``auto|cpu|cuda|cuda:N`` and ``auto|float32|bfloat16`` to torch
  objects (``auto``: CUDA when present, else the CPU; bfloat16 on CUDA, float32 on the CPU), with errors naming
  the bad value and what is allowed.
- :class:`DeviceGuard`: a ``TorchFunctionMode`` that finds, on a machine without a GPU, the code that would mix
  devices on one. It marks the model's parameters and buffers (and any tensor created with an explicit
  ``device=``, or moved with ``.to(device)``) as *placed*; every tensor derived from placed ones is placed too. A
  tensor created without a device (``torch.as_tensor(batch)``, ``torch.arange(n)``, ``torch.from_numpy(x)``) is
  *unplaced*: on a GPU it would sit on the CPU. An operation that takes both a placed and an unplaced tensor (of
  more than one element: CUDA accepts CPU scalars) is what fails on a GPU with "Expected all tensors to be on the
  same device"; the guard raises :class:`DeviceMismatch` there, naming the operation.
"""

from __future__ import annotations

import weakref
from typing import Any, Iterable

import torch
from torch.overrides import TorchFunctionMode

from repro.profiles.run import DEVICES as DEVICE_CHOICES
from repro.profiles.run import DTYPES as DTYPE_CHOICES
from repro.profiles.run import check_device, check_dtype

__all__ = ["DEVICE_CHOICES", "DTYPE_CHOICES", "DeviceGuard", "DeviceMismatch", "model_device", "resolve_device",
           "resolve_dtype"]


def resolve_device(spec: str | torch.device | None = "auto", label: str | None = None) -> torch.device:
    """``auto`` (or None): the first CUDA device when there is one, else the CPU; ``cpu``; ``cuda``; ``cuda:N``.
    A ValueError starting with ``label`` (default ``device='<spec>'``) for another spelling or a GPU this machine
    lacks."""
    if isinstance(spec, torch.device):
        return spec
    spec = check_device("auto" if spec is None else str(spec), label)
    if spec == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    dev = torch.device(spec)
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if (dev.index or 0) >= n:
            raise ValueError(f"{label or f'device={spec!r}'}: this machine has {n} CUDA device(s); allowed: "
                             f"{'cpu or auto' if n == 0 else f'cpu, auto, cuda, cuda:0..cuda:{n - 1}'}")
    return dev


def resolve_dtype(spec: str | torch.dtype | None, device: torch.device, label: str | None = None) -> torch.dtype:
    """``auto`` (or None): bfloat16 on CUDA, float32 on the CPU; ``float32``; ``bfloat16``. A ValueError starting
    with ``label`` (default ``dtype='<spec>'``) for another spelling."""
    if isinstance(spec, torch.dtype):
        return spec
    spec = check_dtype("auto" if spec is None else str(spec), label)
    if spec == "auto":
        return torch.bfloat16 if device.type == "cuda" else torch.float32
    return getattr(torch, spec)


def model_device(model: torch.nn.Module) -> torch.device:
    """The device of the model's first parameter (the CPU for a model without parameters)."""
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


class DeviceMismatch(RuntimeError):
    """An operation took a tensor placed on the model's device and one created without a device."""


_FACTORIES = {torch.tensor, torch.as_tensor, torch.arange, torch.zeros, torch.ones, torch.full, torch.empty,
              torch.from_numpy, torch.randn, torch.rand, torch.randint, torch.linspace, torch.eye, torch.randperm}
_TO_CPU = {torch.Tensor.cpu, torch.Tensor.numpy, torch.Tensor.tolist, torch.Tensor.item}
"""Functions whose result lives on the CPU whatever the model's device."""


def _tensors(obj: Any) -> Iterable[torch.Tensor]:
    if isinstance(obj, torch.Tensor):
        yield obj
    elif isinstance(obj, (list, tuple)):
        for x in obj:
            yield from _tensors(x)
    elif isinstance(obj, dict):
        for x in obj.values():
            yield from _tensors(x)


class DeviceGuard(TorchFunctionMode):
    """Raise :class:`DeviceMismatch` where code mixes the model's tensors with tensors created on the CPU without
    a device (module docstring). ``with DeviceGuard(model): trainer.train()``; ``placed`` are modules or tensors
    already on the model's device.

    Tensors are *placed* (the model's parameters and buffers, anything created with ``device=`` or moved with
    ``.to(device)``, and what is computed from them), *CPU-born* (created without a device, ``from_numpy``,
    ``.cpu()``, ``.to("cpu")``, and what is computed from those alone) or untracked (made where no Python torch
    function runs: autograd's gradients, for one), which never trigger the guard."""

    def __init__(self, *placed: Any):
        super().__init__()
        self._placed: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()
        self._cpu: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()
        self.checked = 0
        """Operations that took at least one placed tensor (how much the guard saw)."""
        for obj in placed:
            self.place(obj)

    def place(self, obj: Any) -> None:
        """Mark a module's parameters and buffers, or tensors, as on the model's device."""
        tensors = [*obj.parameters(), *obj.buffers()] if isinstance(obj, torch.nn.Module) else _tensors(obj)
        for t in tensors:
            self._placed[id(t)] = t
            self._cpu.pop(id(t), None)

    def _born_on_cpu(self, obj: Any) -> None:
        for t in _tensors(obj):
            if not self.is_placed(t):
                self._cpu[id(t)] = t

    def is_placed(self, t: torch.Tensor) -> bool:
        return self._placed.get(id(t)) is t

    def is_cpu_born(self, t: torch.Tensor) -> bool:
        return self._cpu.get(id(t)) is t

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        inputs = list(_tensors(args)) + list(_tensors(kwargs))
        if func in _FACTORIES:
            # an explicit device is trusted (on this CPU every device is "cpu"); as_tensor keeps a tensor's place
            if kwargs.get("device") is not None or func is torch.as_tensor and any(map(self.is_placed, inputs)):
                self.place(out)
            elif not inputs or func is torch.from_numpy or any(map(self.is_cpu_born, inputs)):
                self._born_on_cpu(out)
            return out
        if func in _TO_CPU or func is torch.Tensor.to and _to_cpu(args[1:], kwargs):
            # on the CPU, .cpu() / .to("cpu") of a CPU tensor is the tensor itself: a fresh alias is CPU-born
            if isinstance(out, torch.Tensor):
                out = out.view_as(out) if args and out is args[0] else out
                self._born_on_cpu(out)
            return out
        if func in (torch.Tensor.__getitem__, torch.Tensor.__setitem__):  # CUDA tensors take CPU index tensors
            inputs = [args[0], *_tensors(args[2:])]
        placed = [t for t in inputs if self.is_placed(t)]
        if func in (torch.Tensor.to, torch.Tensor.cuda):
            if func is torch.Tensor.cuda or _moves_to_device(args[1:], kwargs) or placed:
                self.place(out)
            elif any(map(self.is_cpu_born, inputs)):
                self._born_on_cpu(out)
            return out
        if placed:
            self.checked += 1
            loose = [t for t in inputs if self.is_cpu_born(t) and t.numel() > 1]
            if loose:
                name = getattr(func, "__qualname__", getattr(func, "__name__", str(func)))
                raise DeviceMismatch(
                    f"{name} takes tensors on the model's device and {len(loose)} created without a device "
                    f"(shapes {[tuple(t.shape) for t in loose]}): on a GPU this op fails with 'Expected all "
                    "tensors to be on the same device'; create them with device=<a model tensor>.device or move "
                    "them with .to(device)")
            self.place(out)
        elif any(map(self.is_cpu_born, inputs)):
            self._born_on_cpu(out)
        return out


def _to_cpu(args: tuple, kwargs: dict) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` moves to the CPU by name (``"cpu"``)."""
    return any(isinstance(a, str) and a == "cpu" for a in (*args, kwargs.get("device")))


def _moves_to_device(args: tuple, kwargs: dict) -> bool:
    """Whether ``Tensor.to(*args, **kwargs)`` names a device (a device, a device string or another tensor)."""
    for a in (*args, kwargs.get("device"), kwargs.get("other")):
        if isinstance(a, torch.device) or isinstance(a, str) and a != "cpu":
            return True
        if isinstance(a, torch.Tensor):
            return True
    return False
