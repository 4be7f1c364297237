"""``--rope-scaling`` of ``evaluate`` and ``analyze``, and the check of lengths against the model's positions.

A loaded model keeps its own config unless the user asks: ``--rope-scaling none`` (the default) loads
``config.json`` as it is, whatever the lengths; ``linear:F``, ``dynamic:F`` (transformers' dynamic NTK) or ``yarn:F``
scales RoPE by ``F`` on top of the model's own ``rope_theta`` (:func:`repro.models.scaled_rope`), with one ``note:``
line saying what changed. A length past the positions the model handles as configured (its
``max_position_embeddings``, times ``F`` when scaled) is one ``warning:`` line: the command still runs (measuring
extrapolation is a legitimate use), never silently. transformers is imported inside the functions (see
:mod:`repro.cli.common`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

from repro.cli.common import CLIError, warn
from repro.cli.train_checks import notice
from repro.profiles.real import SCALING_KINDS, parse_scaling

SCALINGS: tuple[str, ...] = SCALING_KINDS[1:]
"""The kinds ``--rope-scaling`` takes besides ``none`` (transformers' ``rope_type`` names)."""
FORMS = "none, linear:F, dynamic:F (dynamic NTK) or yarn:F, F a number > 1 (e.g. yarn:2)"
"""The allowed spellings, as error lines name them."""
HELP = ("training-free RoPE scaling of the loaded model: none (default: the model's own config), linear:F, "
        "dynamic:F (dynamic NTK) or yarn:F with F > 1, on top of the model's own rope_theta")


@dataclass(frozen=True)
class RopeScaling:
    """A parsed ``--rope-scaling`` value."""

    kind: str
    """``none`` or one of :data:`SCALINGS`."""
    factor: float | None
    """The scale factor (> 1); None for ``none``."""

    @property
    def label(self) -> str:
        """The flag's value as recorded in outputs: ``none`` or ``kind:factor`` (``yarn:2``)."""
        return "none" if self.factor is None else f"{self.kind}:{self.factor:g}"


def parse_rope_scaling(text: str) -> RopeScaling:
    """``--rope-scaling``'s value, or a :class:`CLIError` naming it and :data:`FORMS`."""
    try:
        return RopeScaling(*parse_scaling(str(text).strip(), f"--rope-scaling {text!r}", FORMS))
    except ValueError as err:
        raise CLIError(str(err)) from None


def add_rope_scaling_arg(parser) -> None:
    """``--rope-scaling`` on ``parser`` (a string, parsed by :func:`rope_plan` into one ``error:`` line)."""
    parser.add_argument("--rope-scaling", default="none", metavar="none|linear:F|dynamic:F|yarn:F", help=HELP)


@dataclass(frozen=True)
class RopePlan:
    """How a command loads the model's RoPE: what :func:`rope_plan` decided."""

    scaling: RopeScaling
    """The parsed flag."""
    rope: dict | None
    """``rope_parameters`` to load the model with (``load_model(rope=...)``); None: the model's own."""
    positions: int | None
    """The model's own ``max_position_embeddings`` (None when its config has none)."""
    window: int | None
    """The positions the model handles as loaded: ``positions``, times the factor when scaled."""

    def record(self) -> dict:
        """What outputs record: the flag's value and the ``rope_parameters`` it loaded (None: the model's own)."""
        return {"rope_scaling": self.scaling.label, "rope_parameters": self.rope, "max_position_embeddings":
                self.positions}


def rope_plan(path: str | Path, text: str, longest: int, what: str, trust_remote_code: bool = False,
              flag: str = "--model") -> RopePlan:
    """Parse ``--rope-scaling`` ``text`` for the model folder ``path`` and say what it does before any loading: a
    ``note:`` with the ``rope_parameters`` it replaces and sets; a ``warning:`` when ``longest`` (the longest
    length, named ``what`` in the line, e.g. ``--lengths 16384``) is past the window the model handles as loaded.
    A bad value, a model it cannot scale, or a config that does not load (code shipped in the folder ``flag`` names,
    without ``trust_remote_code``) is a :class:`CLIError`."""
    scaling = parse_rope_scaling(text)
    from transformers import AutoConfig  # imported when used (module docstring)

    from repro.models import refuse_shipped_code, scaled_rope  # transformers: imported when used (module docstring)

    try:
        if not trust_remote_code:
            refuse_shipped_code(path, flag)
        cfg = AutoConfig.from_pretrained(str(path), trust_remote_code=trust_remote_code, local_files_only=True)
    except (ValueError, OSError) as e:
        raise CLIError(" ".join(str(e).split())) from e
    positions = getattr(cfg, "max_position_embeddings", None)
    rope = None
    if scaling.factor is not None:
        try:
            rope = scaled_rope(cfg, scaling.kind, scaling.factor)
        except ValueError as e:
            raise CLIError(f"--rope-scaling {scaling.label}: {e}") from e
        notice(f"--rope-scaling {scaling.label}: rope_parameters {_short(cfg.rope_parameters)} -> {_short(rope)} "
               f"(the model's own rope_theta and {positions} positions; its config.json is unchanged)")
    window = None if positions is None else int(positions * (scaling.factor or 1))
    if window is not None and longest > window:
        if scaling.factor is None:
            warn(f"{what} is past the model's {positions} positions (max_position_embeddings) and --rope-scaling is "
                 f"none: positions beyond {positions} are extrapolated, never seen in training (--rope-scaling "
                 f"yarn:{math.ceil(longest / positions)}, or linear:F, dynamic:F, scales RoPE instead)")
        else:
            warn(f"{what} is past the {window} positions --rope-scaling {scaling.label} scales the model's "
                 f"{positions} to: the positions beyond are extrapolated (a larger factor, e.g. --rope-scaling "
                 f"{scaling.kind}:{math.ceil(longest / positions)}, covers them)")
    return RopePlan(scaling, rope, positions, window)


def _short(params: dict | None) -> str:
    """``rope_parameters`` as ``{rope_type: ..., ...}`` on one line."""
    if not params:
        return "{}"
    return "{" + ", ".join(f"{k}: {v:g}" if isinstance(v, float) else f"{k}: {v}" for k, v in params.items()) + "}"
