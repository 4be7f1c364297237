"""The figures index as a researcher reads it: ``INDEX.md`` and one page per paper, rendered from ``index.json``.

``INDEX.md`` states the run's provenance once (profile, run, commit, date: the values most rows share; and the run's
wall time, recorded by ``reproduce`` in :data:`RUN_RECORD`), then the
at-a-glance table of central claims (:mod:`repro.central_claims`) and one compact row per target (id, files, the
paper's value, ours, verdict), each id linking to its section of the paper's figures page and each paper to its
documentation page. No cell is longer than :data:`MAX_CELL` characters: longer text is cut there and given whole on
the figures page. Rows written by another run or commit are marked and listed with their own provenance.

``<paper>.md`` (``longrecipe.md``, ``selfdistill.md``, ``cdt.md``, ``prolong.md``, ``testbed.md``) holds every
target of that paper in full: what it shows, its files, the paper's value, ours, the verdict, the reasoning and the
claim tests it was decided from. :func:`render_pages` returns every page; ``index_check`` holds the written pages to
it.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any, Mapping

from repro.central_claims import CENTRAL, status
from repro.papers import PAPERS, paper_of
from repro.provenance import SEPARATE
from repro.targets import TARGETS, get_target

MAX_CELL = 200
"""The longest cell of ``INDEX.md`` (characters); longer text is cut with a link to its full form."""
RUN_RECORD = "wall_time.json"
"""The file of a figures folder in which ``python -m repro reproduce`` records its run's wall time (in all and per
notebook: ``{"run", "profile", "seconds", "notebooks": {name: {"status", "seconds"}}}``); the index states it with
the run's provenance when the run ids match."""
PROVENANCE = ("profile", "run", "commit", "date")
"""The fields of a row that say which run wrote it."""
TITLES: dict[str | None, str] = {
    "longrecipe": "LongRecipe", "selfdistill": "RoPE-perturbed self-distillation",
    "cdt": "Context denoising training", "prolong": "ProLong", None: "Testbed"}
"""A paper's title on the pages (None: the testbed's ``TB-`` targets); the keys of :data:`CENTRAL` use the same."""
DOCS = "../docs/papers/{}.md"
"""A paper's documentation page, relative to the figures folder."""
OTHER = "‡"
"""Marks a row written by another run, commit, profile or date than the index's own."""
SCALE: dict[str, tuple[str, str]] = {
    "smol": ("paper's figures page. Numbers of the `smol` profile come from SmolLM2-135M-Instruct used as it is",
             "(nothing trained here) on synthetic tasks: compare directions, not magnitudes.")}
"""What a profile's numbers come from, as two lines of ``INDEX.md``'s opening, where it is not the tiny model's."""
TINY_SCALE = ("paper's figures page. Tiny-profile numbers come from a ~1M-parameter model trained here on synthetic",
              "tasks: compare directions, not magnitudes.")


def page_name(paper: str | None) -> str:
    """The figures page of ``paper`` (``testbed.md`` for the testbed's targets)."""
    return f"{paper or 'testbed'}.md"


def anchor(heading: str) -> str:
    """The anchor a Markdown renderer (GitHub's rule) gives a heading: lower case, punctuation dropped."""
    return re.sub(r"[^a-z0-9 _-]", "", heading.lower()).replace(" ", "-")


def target_link(tid: str) -> str:
    """``tid`` linked to its section of its paper's figures page."""
    return f"[{tid}]({page_name(paper_of(tid))}#{anchor(tid)})"


def _cell(text: Any, limit: int = MAX_CELL, more: str = "") -> str:
    """``text`` as one table cell (pipes escaped, one line) of at most ``limit`` characters; text cut to fit ends in
    ``…`` and ``more`` (a link to where it is whole)."""
    s = " ".join(str(text if text is not None else "").split()).replace("|", "\\|")
    if len(s) <= limit:
        return s
    tail = f"… {more}" if more else "…"
    return s[:max(limit - len(tail), 0)].rstrip() + tail


def run_provenance(index: Mapping[str, Mapping[str, Any]]) -> dict[str, str]:
    """The provenance most of the ``reproduce`` rows share (each field's most common value)."""
    rows = [r for tid, r in index.items() if tid not in SEPARATE] or list(index.values())
    return {f: Counter(str(r.get(f, "")) for r in rows).most_common(1)[0][0] if rows else "" for f in PROVENANCE}


def differs(row: Mapping[str, Any], run: Mapping[str, str]) -> bool:
    """Whether ``row`` was written by another run, commit, profile or date than ``run``."""
    return any(str(row.get(f, "")) != run[f] for f in PROVENANCE)


def _files(tid: str, row: Mapping[str, Any]) -> str:
    """The row's files as links (the figure first; a file named after the id by its extension alone)."""
    files = sorted(row.get("files", []), key=lambda f: (not f.endswith(".png"), f))
    return ", ".join(f"[{f.rsplit('.', 1)[-1] if f.rsplit('.', 1)[0] == tid else f}]({f})" for f in files)


def _ordered(index: Mapping[str, Any]) -> list[str]:
    order = {tid: i for i, tid in enumerate(TARGETS)}
    return sorted(index, key=lambda t: order.get(t, len(order)))


def _provenance_line(run: Mapping[str, str], timing: Mapping[str, Any] | None = None) -> str:
    """The run's provenance in one sentence; with its wall time when ``timing`` (the folder's :data:`RUN_RECORD`)
    is that run's."""
    line = f"This run: profile `{run['profile']}`, run `{run['run']}`, commit `{run['commit']}`, date {run['date']}"
    if timing and timing.get("run") == run["run"]:
        parts = ", ".join(f"{name} " + ("cached" if st.get("status") == "cached" else f"{st['seconds'] / 60:.1f}")
                          for name, st in timing.get("notebooks", {}).items())
        line += f", wall time {timing['seconds'] / 60:.1f} minutes" + (f" (notebooks: {parts})" if parts else "")
    return line + "."


def render_index(index: Mapping[str, Mapping[str, Any]], timing: Mapping[str, Any] | None = None) -> str:
    """``INDEX.md`` (see the module docstring); ``timing``: the folder's :data:`RUN_RECORD`, if any."""
    run = run_provenance(index)
    separate = [tid for tid in _ordered(index) if tid in SEPARATE]
    if index and len(separate) == len(index):  # a folder of separate commands' rows only (figures/costs)
        commands = sorted({SEPARATE[tid] for tid in separate})
        lines = ["# Figures and tables index", "",
                 f"Written by {', '.join(f'`{c}`' for c in commands)}; do not edit by hand. Testbed checks only: the",
                 "papers' targets and what a run shows of them are in the main index (`figures/INDEX.md`).", "",
                 _provenance_line(run, timing), ""]
    else:
        verdicts = {tid: row.get("agrees", "") for tid, row in index.items()}
        lines = [
            "# Figures and tables index", "",
            "Written by `python -m repro reproduce`"
            + (f" (rows {', '.join(separate)} by their own commands)" if separate else "")
            + "; do not edit by hand. Ids follow the papers' figure and table numbers (`repro/targets.py`); each",
            "id links to its full record (the paper's value, ours, the verdict's reasoning and claim tests) on its",
            *SCALE.get(run["profile"], TINY_SCALE), "",
            _provenance_line(run, timing) + f" Rows marked {OTHER} were written otherwise (see the end).", "",
            "## What this run shows", "",
            "Each paper's central claims, the targets that test them and whether this run shows each (shown beyond",
            "noise: every target's declared headline holds; shown the other way: one is significant against the",
            "paper).", "",
            "| paper | central claim | targets | this run |", "|---|---|---|---|",
        ]
        docs = {TITLES[p]: DOCS.format(p) for p in PAPERS}
        for paper, claims in CENTRAL.items():
            for claim, targets in claims:
                lines.append(f"| [{paper}]({docs[paper]}) | {_cell(claim)} | "
                             f"{', '.join(target_link(t) if t in index else t for t in targets)} | "
                             f"{_cell(status(verdicts, targets))} |")
        lines.append("")
    lines += ["## Every target", "",
              "| id | files | paper | ours | verdict |", "|---|---|---|---|---|"]
    for tid in _ordered(index):
        row, target = index[tid], get_target(tid)
        more = f"[more]({page_name(paper_of(tid))}#{anchor(tid)})"
        mark = f" {OTHER}" if differs(row, run) else ""
        lines.append(f"| {target_link(tid)}{mark} | {_files(tid, row)} | {_cell(target.paper, more=more)} | "
                     f"{_cell(row.get('ours', ''), more=more)} | {_cell(row.get('agrees', ''), 60)} |")
    others = [tid for tid in _ordered(index) if differs(index[tid], run)]
    if others:
        lines += ["", f"## {OTHER} Rows written otherwise", "",
                  "| id | written by | profile | run | commit | date |", "|---|---|---|---|---|---|"]
        for tid in others:
            row = index[tid]
            lines.append(f"| {tid} | {_cell(SEPARATE.get(tid, 'python -m repro reproduce'))} | "
                         + " | ".join(_cell(row.get(f, "")) for f in PROVENANCE) + " |")
    return "\n".join(lines) + "\n"


def _claims_table(claims: list[Mapping[str, Any]]) -> list[str]:
    if not claims:
        return []
    cols = ("what", "a", "b", "expect", "gap", "se", "p", "adjusted", "outcome")
    head = ("what", "arm", "against", "expected", "gap", "SE", "p", "p (Holm)", "outcome")
    fmt = {"gap": "{:+.4g}", "se": "{:.3g}", "p": "{:.3g}", "adjusted": "{:.3g}"}

    def show(c: Mapping[str, Any], k: str) -> str:
        v = c.get(k, "")
        if isinstance(v, (int, float)) and k in fmt:
            return fmt[k].format(v)
        return " ".join(str(v).split()).replace("|", "\\|")
    return ["", "| " + " | ".join(head) + " |", "|" + "---|" * len(head),
            *("| " + " | ".join(show(c, k) for k in cols) + " |" for c in claims)]


def render_paper_page(index: Mapping[str, Mapping[str, Any]], paper: str | None) -> str:
    """The figures page of ``paper`` (None: the testbed): every one of its targets in ``index``, in full."""
    run = run_provenance(index)
    title = TITLES[paper]
    links = "[the figures index](INDEX.md)" + (f", [the paper's page]({DOCS.format(paper)})" if paper else "")
    lines = [f"# {title}: every target of the run", "",
             f"Generated from `index.json` with {links}; do not edit by hand.", "", _provenance_line(run), ""]
    for tid in _ordered(index):
        if paper_of(tid) != paper:
            continue
        row, target = index[tid], get_target(tid)
        lines += [f"## {tid}", "", f"{target.what}.", "",
                  f"- **Files**: {_files(tid, row) or 'none'}",
                  f"- **Paper**: {' '.join(target.paper.split())}",
                  f"- **Ours**: {' '.join(str(row.get('ours', '')).split())}",
                  f"- **Verdict**: {row.get('agrees', '') or 'none recorded'}"]
        if row.get("note"):
            lines.append(f"- **Reasoning**: {' '.join(str(row['note']).split())}")
        if differs(row, run):
            lines.append("- **Written otherwise**: " + ", ".join(f"{f} `{row.get(f, '')}`" for f in PROVENANCE)
                         + (f" by `{SEPARATE[tid]}`" if tid in SEPARATE else ""))
        lines += _claims_table(list(row.get("claims", [])))
        lines.append("")
    return "\n".join(lines).rstrip() + "\n"


def render_pages(index: Mapping[str, Mapping[str, Any]], timing: Mapping[str, Any] | None = None) -> dict[str, str]:
    """Every page of the figures folder rendered from ``index``: ``INDEX.md`` (with the run's wall time from
    ``timing``, the folder's :data:`RUN_RECORD`, when it is that run's) and the figures page of each paper (and of
    the testbed) that has a target in it."""
    papers = list(dict.fromkeys(paper_of(tid) for tid in _ordered(index)))
    return {"INDEX.md": render_index(index, timing), **{page_name(p): render_paper_page(index, p) for p in papers}}
