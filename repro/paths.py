"""Where the repository's own files are: the checkout holding the package (configs, figures, notebooks)."""

from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
"""The repository root (the folder holding ``repro/``, ``configs/``, ``notebooks/`` and ``figures/``)."""
