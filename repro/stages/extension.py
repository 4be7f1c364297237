"""The extension stage's entry: any trained arm continues the same base checkpoint towards the target window.

:func:`train_extension` trains any arm of the table (:mod:`repro.arms`) through
:func:`repro.stages.arms.train_arm`; for the arms that select anchor sentences it runs LongRecipe's impactful-token
analysis first (on the plain FLT).
"""

from __future__ import annotations

from pathlib import Path

from repro.arms import build_arm
from repro.io import read_jsonl
from repro.profiles import Profile
from repro.stages.analysis import impactful_tokens
from repro.stages.arms import train_arm
from repro.stages.cache import as_profile


def train_extension(profile: Profile | str, method: str = "flt", run_dir: str | Path = "runs", force: bool = False,
                    progress: bool = True) -> Path:
    """Extend the base model to the target window with a named arm (any arm of :data:`repro.arms.ARMS`); returns
    ``final``. Arms that select anchor sentences run the impactful-token analysis first (on the plain FLT).
    ``<arm>@seed<k>`` trains replicate ``k`` of the arm: the same base and analysis, its own data and step seeds
    (:func:`repro.arms.replicate_profile`)."""
    p = as_profile(profile)
    anchors = None
    if build_arm(p, method).needs_anchors:
        anchors = impactful_tokens(p, run_dir, progress=progress)["anchors"]
    return train_arm(p, method, run_dir, force, progress, anchors=anchors)


def metrics(path: Path) -> list[dict]:
    """The metrics log of a training stage (``path`` is its ``final`` folder or the stage folder)."""
    d = path.parent if path.name == "final" else path
    return read_jsonl(d / "metrics.jsonl")


def extension_tokens(path: Path) -> int:
    """Tokens an extension run trained on (sample tokens, padding excluded), from its metrics."""
    rows = metrics(path)
    last = rows[-1]
    return int(last.get("method_tokens", sum(r["tokens"] for r in rows)))
