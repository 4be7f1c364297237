"""Dependencies visible: imports sit at the top of their module. A function-level import is the exception (an
optional heavy or GPU-only package such as flash-attn, DeepSpeed, lm-eval or spaCy; a module a light entry point
must not load; an import that would close a cycle), at most 15% of all import statements of ``repro/``, and each
says why in a comment on its line or the line above (a block of such imports: above its first line).

Read from the source with ``ast``, so nothing is imported. An import under ``if TYPE_CHECKING:`` at module level
counts as module-level. The import graph and its cycles are checked in ``tests/test_architecture.py``.
"""

from __future__ import annotations

import ast
import io
import re
import tokenize
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "repro"
MAX_FUNCTION_SHARE = 0.15
"""The largest share of the package's import statements that may sit inside functions."""

DIRECTIVE = re.compile(r"^(noqa(:\s*[A-Z]+\d+(,\s*[A-Z]+\d+)*)?|type:\s*ignore(\[[\w-]+])?|pragma:[\w\s-]+)\s*")


@dataclass(frozen=True)
class Import:
    """One import statement of a file."""

    line: int
    """Its first line (1-based)."""
    end: int
    """Its last line."""
    in_function: bool
    """True when it sits inside a function (at any depth), False at module level (``if``/``try`` blocks too)."""


def imports(source: str) -> list[Import]:
    """Every ``import`` / ``from ... import`` statement of ``source``, in order."""
    out = []

    def walk(node: ast.AST, in_function: bool) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.Import, ast.ImportFrom)):
                out.append(Import(child.lineno, child.end_lineno, in_function))
            walk(child, in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)))

    walk(ast.parse(source), False)
    return sorted(out, key=lambda i: i.line)


def comments(source: str) -> dict[int, str]:
    """Line -> the text of its comment, without ``#`` and without lint directives (``noqa: F401``, ``type: ignore``):
    a comment that only silences a linter says no why."""
    out = {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            if m := DIRECTIVE.match(text):
                text = text[m.end():].strip(" -:()")
            if text:
                out[tok.start[0]] = text
    return out


def uncommented(source: str) -> list[int]:
    """The first lines of the function-level imports with no why-comment: none on the statement's own lines, none on
    the line above, and not in a block (consecutive lines) of function-level imports headed by a comment line."""
    notes = comments(source)
    lines = source.splitlines()
    block: set[int] = set()  # last lines of the imports under a comment line (the block it heads)
    bad = []
    for imp in imports(source):
        if not imp.in_function:
            continue
        above = imp.line - 1
        if (above in notes and lines[above - 1].strip().startswith("#")) or above in block:
            block.add(imp.end)
        elif not any(n in notes for n in range(imp.line, imp.end + 1)):  # a comment on a line says why for it alone
            bad.append(imp.line)
    return bad


def package_imports(package: Path = PACKAGE) -> dict[str, list[Import]]:
    """File (relative to the repo) -> its import statements, for every ``.py`` under ``package``."""
    return {str(f.relative_to(package.parent)): imports(f.read_text(encoding="utf-8"))
            for f in sorted(package.rglob("*.py"))}


# --- the package as it is ----------------------------------------------------------------------------------------

def test_function_level_imports_are_at_most_15_percent():
    found = package_imports()
    total = sum(len(v) for v in found.values())
    inner = {f: n for f, v in found.items() if (n := sum(i.in_function for i in v))}
    share = sum(inner.values()) / total
    worst = ", ".join(f"{f} {n}" for f, n in sorted(inner.items(), key=lambda kv: -kv[1])[:10])
    assert share <= MAX_FUNCTION_SHARE, (f"{sum(inner.values())} of {total} imports ({share:.1%}) sit inside "
                                         f"functions; allowed: at most {MAX_FUNCTION_SHARE:.0%}; most: {worst}")


def test_every_function_level_import_says_why():
    bad = [f"{f.relative_to(REPO)}:{n}" for f in sorted(PACKAGE.rglob("*.py"))
           for n in uncommented(f.read_text(encoding="utf-8"))]
    assert not bad, "function-level imports without a why-comment on their line or the line above:\n" + "\n".join(bad)


# --- the checks themselves catch what they are for ---------------------------------------------------------------

PLANTED = '''\
"""Doc."""
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pathlib import Path
try:
    import numpy
except ImportError:
    numpy = None


def f():
    import json

    # optional: spaCy is heavy
    import spacy
    import torch
    from repro import io

    import deepspeed  # optional: DeepSpeed runs only
    import peft  # noqa: F401
    x = lambda: __import__("y")  # noqa: E731
    return json, spacy, torch, io, deepspeed, peft, x


class C:
    def m(self):
        def g():
            from collections import (OrderedDict,
                                     deque)  # the block's last line says why
            return OrderedDict, deque
        return g
'''


def test_imports_are_told_apart_by_where_they_sit():
    got = [(i.line, i.in_function) for i in imports(PLANTED)]
    assert got == [(2, False), (3, False), (6, False), (8, False), (14, True), (17, True), (18, True), (19, True),
                   (21, True), (22, True), (30, True)]


def test_only_imports_without_a_why_are_reported():
    """``json`` has none; ``spacy`` has one above, ``torch`` and ``repro.io`` follow it in its block; ``deepspeed``
    has one on its line, which says nothing for ``peft`` below, whose own is a bare lint directive; a statement over
    two lines may carry it on any of them."""
    assert uncommented(PLANTED) == [14, 22]
    fixed = PLANTED.replace("    import json\n", "    import json  # lazy: a planted reason\n")
    assert uncommented(fixed) == [22]
    assert uncommented(fixed.replace("# noqa: F401", "# noqa: F401  (heavy: seconds to import)")) == []


@pytest.mark.parametrize("text, expected", [
    ("import x  # noqa: F401\n", {}),
    ("import x  # noqa\n", {}),
    ("import x  # noqa: F401, E402  (probe: old torch lacks it)\n", {1: "probe: old torch lacks it"}),
    ("import x  # type: ignore[import]\n", {}),
    ("# optional: GPU only\nimport x\n", {1: "optional: GPU only"}),
    ("s = '# not a comment'\n", {}),
])
def test_comments_drop_lint_directives(text, expected):
    assert comments(text) == expected


def test_the_share_is_counted_over_every_file(tmp_path):
    pkg = tmp_path / "repro"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("import os\nimport sys\n")
    (pkg / "sub" / "m.py").write_text("import re\n\n\ndef f():\n    import json  # lazy: planted\n    return json\n")
    found = package_imports(pkg)
    assert {f: [i.in_function for i in v] for f, v in found.items()} == {
        "repro/__init__.py": [False, False], "repro/sub/m.py": [False, True]}
