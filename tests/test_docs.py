"""Every link and repository path the README and docs/ name exists.

For README.md and every ``docs/**/*.md``:

- a relative markdown link or image (``[x](path)``, ``![x](path)``) points at a file or folder that exists relative
  to the page (``http(s)://`` and ``mailto:`` links are not followed); an anchor (``#...``) on a markdown page must
  be one of that page's headings, as GitHub turns headings into anchors;
- a backticked token that looks like a repository path (it starts with ``repro/``, ``tests/``, ``docs/``,
  ``notebooks/``, ``figures/``, ``configs/`` or ``.ci/``, holds no space and none of ``<>*{}$``) exists relative to
  the repository root; ``path::name`` checks ``path``. Outputs a run writes and the repository does not hold
  (``figures/smoke/``, ``figures/paper/``, ``runs/``) are allowed by prefix.

Fenced code blocks are skipped: their text is commands and output, not links.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
PATH_PREFIXES = ("repro/", "tests/", "docs/", "notebooks/", "figures/", "configs/", ".ci/")
GENERATED = ("figures/smoke/", "figures/paper/", "runs/")
PLACEHOLDER = set("<>*{}$ ")

FENCE = re.compile(r"^(```|~~~).*?^\1[^\n]*$", re.M | re.S)
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
CODE = re.compile(r"(`+)(.+?)\1", re.S)
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$", re.M)


def pages(repo: Path = REPO) -> list[Path]:
    """README.md and every markdown page under docs/."""
    return [repo / "README.md"] + sorted((repo / "docs").rglob("*.md"))


def prose(text: str) -> str:
    """The page without its fenced code blocks (each replaced by blank lines, so line numbers hold)."""
    return FENCE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup and punctuation dropped, lower case, spaces as hyphens."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link keeps its text
    text = text.lower().replace("`", "")
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading anchor of a markdown page (a repeated heading gets -1, -2, ... as GitHub numbers them)."""
    seen: dict[str, int] = {}
    out = set()
    for m in HEADING.finditer(prose(text)):
        s = slug(m.group(2))
        n = seen.get(s, 0)
        out.add(s if n == 0 else f"{s}-{n}")
        seen[s] = n + 1
    return out


def repo_path(token: str) -> str | None:
    """The repository path a backticked token names, or None when it does not look like one."""
    token = token.strip()
    if not token.startswith(PATH_PREFIXES) or PLACEHOLDER & set(token):
        return None
    return token.split("::", 1)[0]


def broken(page: Path, repo: Path = REPO) -> list[str]:
    """What ``page`` names that does not exist: one line each, with the line number."""
    text = prose(page.read_text(encoding="utf-8"))
    out = []

    def line(pos: int) -> int:
        return text.count("\n", 0, pos) + 1

    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):  # http:, https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        where = (page.parent / path) if path else page
        if not where.exists():
            out.append(f"{page.name}:{line(m.start())}: link to missing {target!r}")
        elif anchor and where.is_file() and where.suffix == ".md" and anchor not in anchors(
                where.read_text(encoding="utf-8")):
            out.append(f"{page.name}:{line(m.start())}: link to missing anchor {target!r}")
    for m in CODE.finditer(text):
        path = repo_path(m.group(2))
        if path is None or path.startswith(GENERATED):
            continue
        if not (repo / path).exists():
            out.append(f"{page.name}:{line(m.start())}: missing path {m.group(2).strip()!r}")
    return out


@pytest.mark.parametrize("page", pages(), ids=lambda p: p.relative_to(REPO).as_posix())
def test_every_link_and_path_exists(page):
    assert not broken(page), "\n".join(broken(page))


def test_the_checker_finds_broken_links_and_paths(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "repro").mkdir()
    (tmp_path / "repro" / "x.py").write_text("")
    (tmp_path / "docs" / "other.md").write_text("# Other page\n\n## A `code` section, here\n")
    page = tmp_path / "docs" / "page.md"
    page.write_text(
        "# Page\n\n"
        "[ok](other.md) [ok anchor](other.md#a-code-section-here) [ok self](#page) [web](https://example.org/x)\n"
        "`repro/x.py` `repro/x.py::func` `repro/` `runs/tiny/` `figures/<profile>/` `python -m repro`\n"
        "[gone](missing.md) ![gone image](../figures/none.png) [bad anchor](other.md#nowhere)\n"
        "`repro/y.py::func` `tests/none.py`\n"
        "```\n[in a code block](nowhere.md) `repro/none.py`\n```\n")
    found = broken(page, tmp_path)
    assert found == ["page.md:5: link to missing 'missing.md'",
                     "page.md:5: link to missing '../figures/none.png'",
                     "page.md:5: link to missing anchor 'other.md#nowhere'",
                     "page.md:6: missing path 'repro/y.py::func'",
                     "page.md:6: missing path 'tests/none.py'"]


def test_slugs_follow_github():
    assert slug("Your own model: the command line, several processes, LoRA") == \
        "your-own-model-the-command-line-several-processes-lora"
    assert slug("The synthetic evaluation suite (`repro/tasks/`)") == "the-synthetic-evaluation-suite-reprotasks"
    assert anchors("# A\n\n## A\n```\n# not a heading\n```\n") == {"a", "a-1"}
