"""The package's import graph against docs/architecture.md: no cycle, no import against the layer order, no
module over 500 lines, and the command line, reports and plots never reach into the cached stages.

The graph is read from the source (every ``import`` and ``from ... import``, at the top of a file or inside a
function; not those under ``if TYPE_CHECKING:``, which never run), so it needs nothing imported and sees imports
that only run on some paths. The module-level graph (the imports that run when a module is imported: those outside
functions) is checked for cycles on its own too, naming the modules of each.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PACKAGE = REPO / "repro"
DOC = REPO / "docs" / "architecture.md"
MAX_LINES = 500


def module_files(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` under ``package`` (a package is its ``__init__``)."""
    out = {}
    for f in sorted(package.rglob("*.py")):
        parts = list(f.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The longest prefix of ``name`` that is a module of the package (None outside it)."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def _type_checking(node: ast.AST) -> bool:
    """``if TYPE_CHECKING:`` (or ``typing.TYPE_CHECKING``): imports for annotations only, never run."""
    t = node.test if isinstance(node, ast.If) else None
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)


def _nodes(tree: ast.AST, top_only: bool = False):
    """Every node of ``tree`` but the bodies of ``if TYPE_CHECKING:`` blocks (their ``else`` is kept); with
    ``top_only``, not the bodies of functions either (what runs when the module is imported)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        yield node
        if _type_checking(node):
            stack.extend(node.orelse)
        elif not (top_only and isinstance(node, FUNCTIONS)):
            stack.extend(ast.iter_child_nodes(node))


def imports_of(module: str, source: str, modules: dict[str, Path], is_package: bool,
               top_only: bool = False) -> set[str]:
    """The package modules ``module`` imports: ``import a.b`` -> ``a.b``; ``from a import b`` -> ``a.b`` when that
    is a module, else ``a``; relative imports resolved against ``module``. Imports under ``if TYPE_CHECKING:``
    (annotations only) are left out; with ``top_only``, those inside functions too."""
    out = set()
    for node in _nodes(ast.parse(source), top_only):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[:len(base) - node.level + 1]
                origin = ".".join(base + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            names = [f"{origin}.{a.name}" if f"{origin}.{a.name}" in modules else origin for a in node.names]
        else:
            continue
        for n in names:
            target = _resolve(n, modules)
            if target is not None and target != module:
                out.add(target)
    return out


def import_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports."""
    modules = module_files(package)
    return {m: imports_of(m, f.read_text(encoding="utf-8"), modules, f.name == "__init__.py")
            for m, f in modules.items()}


def module_level_graph(package: Path = PACKAGE) -> dict[str, set[str]]:
    """Module -> the package modules it imports outside its functions (what runs when it is imported)."""
    modules = module_files(package)
    return {m: imports_of(m, f.read_text(encoding="utf-8"), modules, f.name == "__init__.py", top_only=True)
            for m, f in modules.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def read_layers(doc: Path = DOC) -> tuple[dict[str, str], dict[str, set[str]]]:
    """From the layers table of docs/architecture.md: (top-level part -> layer, layer -> layers it may import)."""
    text = doc.read_text(encoding="utf-8")
    table = text.split("<!-- layers:", 1)[1].split("\n\n", 1)[0]
    owner: dict[str, str] = {}
    allowed: dict[str, set[str]] = {}
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 3 or cells[0] in ("layer", "") or set(cells[0]) <= {"-"}:
            continue
        layer, parts, may = cells
        for part in re.findall(r"`([A-Za-z_][\w]*)`", parts):
            if part in owner:
                raise ValueError(f"docs/architecture.md puts {part!r} in {owner[part]!r} and {layer!r}")
            owner[part] = layer
        allowed[layer] = {x.strip() for x in may.split(",") if x.strip()}
    unknown = {x for v in allowed.values() for x in v} - set(allowed)
    if unknown:
        raise ValueError(f"docs/architecture.md names unknown layers {sorted(unknown)}")
    return owner, allowed


def layer_of(module: str, owner: dict[str, str]) -> str:
    """``repro.stages.cache`` -> the layer of ``stages``; the package itself is ``repro``."""
    parts = module.split(".")
    return owner[parts[1] if len(parts) > 1 else "repro"]


def violations(graph: dict[str, set[str]], owner: dict[str, str], allowed: dict[str, set[str]]) -> list[str]:
    """Every import that breaks the layer order, as ``a (layer) -> b (layer)``."""
    out = []
    for a, targets in sorted(graph.items()):
        la = layer_of(a, owner)
        for b in sorted(targets):
            lb = layer_of(b, owner)
            if lb not in allowed[la]:
                out.append(f"{a} ({la}) -> {b} ({lb})")
    return out


# --- the package as it is ----------------------------------------------------------------------------------------

def test_every_module_has_a_layer():
    owner, _ = read_layers()
    tops = {m.split(".")[1] if "." in m else "repro" for m in module_files(PACKAGE)}
    assert not tops - set(owner), f"not in docs/architecture.md's layers table: {sorted(tops - set(owner))}"
    assert not set(owner) - tops, f"docs/architecture.md names what repro/ lacks: {sorted(set(owner) - tops)}"


def test_no_import_cycle():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_no_import_cycle_at_module_level():
    """The imports that run when a module is imported have no cycle (a module-level import that closes one finds a
    half-initialised module, depending on which was imported first). A function-level import kept to break a cycle
    would pass here and fail :func:`test_no_import_cycle`: the package has none."""
    found = cycles(module_level_graph())
    assert not found, "module-level import cycles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_imports_follow_the_layers():
    owner, allowed = read_layers()
    bad = violations(import_graph(), owner, allowed)
    assert not bad, "imports against docs/architecture.md's layer order:\n" + "\n".join(bad)


def test_cli_reports_and_plots_never_reach_into_the_stages():
    graph = import_graph()
    bad = sorted(f"{a} -> {b}" for a, bs in graph.items() if a.split(".")[1:2] in (["cli"], ["reports"], ["plotting"])
                 for b in bs if b == "repro.stages" or b.startswith("repro.stages."))
    assert not bad, bad
    for folder in ("cli", "reports", "plotting"):  # not even in a docstring: the stages are named by pipeline
        hits = [f"{f.relative_to(REPO)}:{i}" for f in sorted((PACKAGE / folder).rglob("*.py"))
                for i, line in enumerate(f.read_text(encoding="utf-8").splitlines(), 1) if "repro.stages" in line]
        assert not hits, hits


def test_no_module_is_over_the_line_limit():
    long = {str(f.relative_to(REPO)): n for f in sorted(PACKAGE.rglob("*.py"))
            if (n := len(f.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


# --- the checks themselves catch what they are for ---------------------------------------------------------------

def _tree(tmp_path: Path, files: dict[str, str]) -> Path:
    pkg = tmp_path / "repro"
    for name, text in files.items():
        f = pkg / name
        f.parent.mkdir(parents=True, exist_ok=True)
        f.write_text(text)
    return pkg


def test_a_planted_back_import_is_caught(tmp_path):
    """A function-level import of the stages from a method module breaks the order; the same graph without it
    passes."""
    owner, allowed = read_layers()
    files = {"__init__.py": "", "methods/__init__.py": "", "stages/__init__.py": "",
             "methods/planted.py": "def f():\n    from repro.stages import cache\n    return cache\n",
             "stages/cache.py": "from repro.methods import planted\n"}
    graph = import_graph(_tree(tmp_path, files))
    assert graph["repro.methods.planted"] == {"repro.stages.cache"}
    assert violations(graph, owner, allowed) == ["repro.methods.planted (methods) -> repro.stages.cache (stages)"]
    assert cycles(graph) == [["repro.methods.planted", "repro.stages.cache"]]
    clean = import_graph(_tree(tmp_path / "clean", {**files, "methods/planted.py": "def f():\n    return 1\n"}))
    assert violations(clean, owner, allowed) == [] and cycles(clean) == []


def test_a_planted_module_level_cycle_is_caught_and_a_function_level_one_is_not(tmp_path):
    """``from repro.stages import cache`` (a submodule) at the top of ``repro.io`` and ``import repro.io`` at the top
    of the cache close a cycle; the same import inside a function does not run on import (the full graph still
    sees it)."""
    files = {"__init__.py": "", "io.py": "from repro.stages import cache\n", "stages/__init__.py": "",
             "stages/cache.py": "import repro.io\n\nkey = 1\n"}
    graph = module_level_graph(_tree(tmp_path, files))
    assert graph["repro.io"] == {"repro.stages.cache"} and graph["repro.stages.cache"] == {"repro.io"}
    assert cycles(graph) == [["repro.io", "repro.stages.cache"]]
    lazy = {**files, "io.py": "def f():\n    from repro.stages import cache  # planted\n    return cache\n"}
    graph = module_level_graph(_tree(tmp_path / "lazy", lazy))
    assert graph["repro.io"] == set() and cycles(graph) == []
    assert cycles(import_graph(_tree(tmp_path / "lazy2", lazy))) == [["repro.io", "repro.stages.cache"]]


def test_the_real_package_fails_with_a_planted_back_import(tmp_path):
    """The planted case inside a copy of the real graph: one extra edge makes both checks fail."""
    owner, allowed = read_layers()
    real = import_graph()
    graph = {k: set(v) for k, v in real.items()}
    graph["repro.methods.registry"].add("repro.arms")  # methods -> recipes: upwards
    new = set(violations(graph, owner, allowed)) - set(violations(real, owner, allowed))
    assert new == {"repro.methods.registry (methods) -> repro.arms (recipes)"}
    assert any("repro.methods.registry" in c and "repro.arms" in c for c in cycles(graph))


@pytest.mark.parametrize("source, expected", [
    ("import repro.stages.cache\n", {"repro.stages.cache"}),
    ("from repro.stages import cache\n", {"repro.stages.cache"}),
    ("from repro.stages import train_base\n", {"repro.stages"}),
    ("from . import cache\n", {"repro.stages.cache"}),
    ("from .cache import x\n", {"repro.stages.cache"}),
    ("def f():\n    import repro.io as io\n", {"repro.io"}),
    ("import numpy\nfrom torch import nn\n", set()),
    ("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from repro.io import x\n", set()),
    ("if TYPE_CHECKING:\n    pass\nelse:\n    import repro.io\n", {"repro.io"}),
])
def test_imports_are_read_in_every_form(source, expected):
    modules = {"repro": Path(), "repro.io": Path(), "repro.stages": Path(), "repro.stages.cache": Path(),
               "repro.stages.base": Path()}
    assert imports_of("repro.stages.base", source, modules, is_package=False) == expected


def test_the_layers_table_is_read():
    owner, allowed = read_layers()
    assert owner["recipes"] == "recipes" and owner["pipeline"] == "notebooks" and owner["plotting"] == "reports"
    assert "stages" not in allowed["reports"]
    order = ["core", "foundations", "methods", "train", "recipes", "stages"]
    for i, layer in enumerate(order):  # each imports every layer below it and none above it (methods: train too)
        above = set(order[i + 1:]) - ({"train"} if layer == "methods" else set())
        assert set(order[:i + 1]) <= allowed[layer] and not above & allowed[layer], layer
