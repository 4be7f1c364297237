"""Render ``docs/errors.md`` from the bad-input cases of :mod:`tests.test_bad_inputs`.

``python -m tests.catalogue --write`` runs every case and rewrites the file; without ``--write`` it prints the
table and exits with status 1 when the committed file differs. The table shows the message each case really
produces, so the docs are exactly what a user sees.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Callable, Sequence

DOC = Path(__file__).resolve().parent.parent / "docs" / "errors.md"
"""The generated catalogue."""

HEADER = """# Bad inputs and the errors they get

<!-- generated from tests/test_bad_inputs.py; regenerate with: python -m tests.catalogue --write -->

Regenerate this file with `python -m tests.catalogue --write` (it runs every case of `tests/test_bad_inputs.py`;
`pytest tests/test_bad_inputs.py` fails when this file is out of date).

Each row is one bad input, the error it gets and a test
(`tests/test_bad_inputs.py::test_bad_input_gets_a_clear_error[ID]`).
Commands (`python -m repro ...`) end with exit status 2 and one `error: ...` line on stderr (shown as
`exit 2: ...`) and leave their output folder absent or unchanged; library calls raise the exception shown. A legal
but surprising input (`exit 0: warning: ...`) runs to its end with one `warning:` line saying what happens.
`<tmp>` stands for the folder the test created its files in.

| id | area | bad input | error the user gets |
|---|---|---|---|
"""


def _cell(text: str) -> str:
    """``text`` safe inside a Markdown table cell."""
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\n", "<br>")


def render(cases: Sequence, user_sees: Callable[[str], str]) -> str:
    """The whole document: the header and one row per case."""
    rows = [f"| {c.id} | {c.area} | {_cell(c.what)} | {_cell(user_sees(c.id))} |" for c in cases]
    return HEADER + "\n".join(rows) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (``--write``) or check ``docs/errors.md``."""
    ap = argparse.ArgumentParser(prog="python -m tests.catalogue", description=__doc__)
    ap.add_argument("--write", action="store_true", help="rewrite docs/errors.md")
    args = ap.parse_args(argv)
    from tests.test_bad_inputs import CASES, user_sees

    text = render(CASES, user_sees)
    if args.write:
        DOC.parent.mkdir(parents=True, exist_ok=True)
        DOC.write_text(text)
        print(f"{len(CASES)} cases -> {DOC}")
        return 0
    print(text, end="")
    return 0 if DOC.exists() and DOC.read_text() == text else 1


if __name__ == "__main__":
    sys.exit(main())
