"""What lm-evaluation-harness needs to run with no network: offline switches, a sentence splitter, a haystack.

lm-eval's RULER reaches the network in three places: ``prepare_niah`` calls ``nltk.download("punkt_tab")`` when it
is imported and the model is missing, its essay haystack is ``datasets.load_dataset("baber/paul_graham_essays")``,
and the hub datasets of every other task. :func:`go_offline` sets the hub's and datasets' offline switches and
points NLTK at a ``punkt_tab`` model written here, so that nothing is fetched; :func:`essay_words` is the essay
haystack of :mod:`repro.harness.ruler` (a folder or file of the user's own essays, or the suite's default prose).

The ``punkt_tab`` model is Punkt's parameters learned (:class:`nltk.tokenize.punkt.PunktTrainer`) from the haystack
text itself, written in NLTK's tab format with every set sorted, so the same text gives the same files. NLTK's own
English model was learned from newswire; the two can split a sentence differently after an abbreviation, which only
moves where a needle may be inserted (documented in ``docs/evaluation_suite.md``).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Sequence

import pydoc_data.topics as topics

from repro.io import atomic_dir, config_hash

OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
"""The switches that stop huggingface_hub, datasets and transformers from reaching the hub."""
PUNKT_FILES = ("collocations.tab", "sent_starters.txt", "abbrev_types.txt", "ortho_context.tab")
"""The four files of an NLTK ``punkt_tab`` language model."""
ESSAY_SUFFIXES = (".txt", ".md")
"""The files read from an essay folder."""


def default_cache() -> Path:
    """Where generated offline data lives: ``$REPRO_CACHE`` or ``$XDG_CACHE_HOME/repro`` (``~/.cache/repro``)."""
    if os.environ.get("REPRO_CACHE"):
        return Path(os.environ["REPRO_CACHE"])
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "repro"


def _essay_text(f: Path) -> str:
    """The text of essay file ``f`` (bytes that are not UTF-8 replaced); a ValueError naming it when it is binary
    data (UTF-8 text never holds a NUL byte)."""
    data = f.read_bytes()
    if b"\x00" in data:
        raise ValueError(f"essays {str(f)!r} is binary data (it holds NUL bytes), not text; allowed: a folder of text "
                         "files or one text file")
    return data.decode("utf-8", errors="replace")


def read_essays(path: str | os.PathLike | None) -> tuple[str, ...]:
    """The essay texts: every ``.txt``/``.md`` file under folder ``path`` (sorted by path), the one file ``path``,
    or, for ``None``, the suite's default haystack prose (Python's documentation topics, shipped with Python)."""
    if path is None:
        return tuple(topics.topics[k] for k in sorted(topics.topics))
    p = Path(path)
    if p.is_dir():
        files = sorted(f for f in p.rglob("*") if f.suffix in ESSAY_SUFFIXES and f.is_file())
        if not files:
            raise ValueError(f"essay folder {str(p)!r} holds no {'/'.join(ESSAY_SUFFIXES)} file; allowed: a folder "
                             "of text files or one text file")
    elif p.is_file():
        files = [p]
    else:
        raise ValueError(f"essays {str(p)!r} does not exist; allowed: a folder of text files or one text file")
    texts = tuple(_essay_text(f) for f in files)
    if not any(t.split() for t in texts):
        raise ValueError(f"essays {str(p)!r} hold no words; allowed: text files with prose in them")
    return texts


def essay_words(path: str | os.PathLike | None = None) -> list[str]:
    """The essay haystack as lm-eval's RULER builds it from its essays: all texts joined by a space, every run of
    whitespace one space, split on spaces (a list of words, into which needles go between sentences)."""
    return re.sub(r"\s+", " ", " ".join(read_essays(path))).split(" ")


def punkt_model(texts: Sequence[str], folder: str | os.PathLike) -> Path:
    """Write a ``punkt_tab`` model learned from ``texts`` to ``folder/tokenizers/punkt_tab/english`` (atomically;
    kept when it is already there) and return ``folder``, the directory to put on ``NLTK_DATA``."""
    from nltk.tokenize.punkt import PunktTrainer  # nltk reads NLTK_DATA when imported: after go_offline

    root = Path(folder)
    lang = root / "tokenizers" / "punkt_tab" / "english"
    if all((lang / f).is_file() for f in PUNKT_FILES):
        return root
    trainer = PunktTrainer()
    trainer.train(" ".join(texts), finalize=True)
    params = trainer.get_params()
    files = {
        "collocations.tab": "".join(f"{a}\t{b}\n" for a, b in sorted(params.collocations)),
        "sent_starters.txt": "".join(f"{w}\n" for w in sorted(params.sent_starters)),
        "abbrev_types.txt": "".join(f"{w}\n" for w in sorted(params.abbrev_types)),
        "ortho_context.tab": "".join(f"{w}\t{c}\n" for w, c in sorted(params.ortho_context.items())),
    }
    lang.parent.mkdir(parents=True, exist_ok=True)
    with atomic_dir(lang) as tmp:
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
    return root


def go_offline(cache: str | os.PathLike | None = None, essays: str | os.PathLike | None = None) -> Path:
    """Set the offline switches (:data:`OFFLINE_ENV`) and put a ``punkt_tab`` model learned from the essays first on
    ``NLTK_DATA``; returns the NLTK folder. Call it before lm-eval, datasets or nltk is imported: they read the
    switches when they are imported (a process that already imported them keeps what it read)."""
    os.environ.update(OFFLINE_ENV)
    hub = sys.modules.get("huggingface_hub.constants")
    if hub is not None:  # imported before the switch was set (the command line loads transformers at start-up)
        hub.HF_HUB_OFFLINE = True  # is_offline_mode() reads this module global at every call
    texts = read_essays(essays)
    folder = punkt_model(texts, Path(cache or default_cache()) / "nltk" / config_hash(list(texts)))
    paths = [str(folder)] + [p for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p and p != str(folder)]
    os.environ["NLTK_DATA"] = os.pathsep.join(paths)
    try:  # nltk already imported (a notebook, a test): its search path was read at import
        if "nltk" in sys.modules:
            import nltk  # already imported by someone else: this only binds it

            if str(folder) not in nltk.data.path:
                nltk.data.path.insert(0, str(folder))
    except ImportError:  # pragma: no cover - nltk comes with lm-eval
        pass
    return folder
