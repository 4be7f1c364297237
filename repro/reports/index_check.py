"""A check of a figures index (``figures/index.json``): provenance from one run, and verdicts that say what their
recorded claim tests say.

:func:`check_index` returns the problems it finds (an empty list when there are none):

- every row names its ``commit``, ``profile`` and ``run`` (:mod:`repro.provenance`); no commit is ``+dirty`` (code
  changed after the commit) or ``unknown`` (no checkout);
- the rows ``reproduce`` writes (every id but :data:`SEPARATE`) share one run id, one commit and one profile, and
  that run is a ``reproduce`` run, not :data:`repro.provenance.INTERACTIVE`; the outputs of the separate commands
  in :data:`SEPARATE` are checked row by row (provenance, a clean commit), each with the run of its own command;
- every verdict (``agrees``) of a target with a declared headline (:mod:`repro.claims`) is what its recorded claim
  tests say (``claims``: :meth:`repro.reports.headline.Tested.record`), judged again by
  :func:`repro.reports.headline.rejudge` with the same rule; each recorded claim's outcome is its recomputed one;
  and the recorded claims are the declared headline's (RP-Fig2's at each analysed layer,
  :func:`repro.reports.attention.per_layer`). A verdict other than ``n/a`` without recorded claim tests is a
  problem: nothing shows what it was decided from.

:func:`check_pages` holds the folder's pages to the records: ``INDEX.md`` and each paper's figures page are what
:func:`repro.figures_index.render_pages` renders from ``index.json`` (nothing edited by hand, nothing stale), and no
cell of ``INDEX.md`` is longer than :data:`repro.figures_index.MAX_CELL` characters.

Every figure is held to :mod:`repro.figure_rules`: the problems the recorder found on a figure
(``rules`` in its row) are problems of the index; :func:`rules_coverage` counts the figures checked against the rules
(rows written before the rules existed carry none).

``python -m repro.reports.index_check [FIGURES_DIR]`` prints the problems of ``FIGURES_DIR/index.json`` and its pages
(default ``figures``) and exits 1 when there are any.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

from repro.claims import headline_of
from repro.figures import run_record
from repro.figures_index import MAX_CELL, render_pages
from repro.io import read_json
from repro.provenance import INTERACTIVE, SEPARATE
from repro.reports.attention import per_layer
from repro.reports.headline import Headline, rejudge
from repro.targets import TARGETS

PROVENANCE = ("commit", "profile", "run")
"""The fields every row names: which code, which profile and which run wrote it."""
BAD_COMMITS = ("unknown",)
"""Commits that name no code (:func:`repro.provenance.code_commit` outside a git checkout)."""
DIRTY = "+dirty"
"""The suffix of a commit whose tracked code had uncommitted changes."""
LAYERED = {"RP-Fig2": per_layer}
"""Targets whose report judges its declared headline at each analysed layer (arms ``"<arm> layer <k>"``)."""
_LAYER = re.compile(r" layer (\S+)$")


def _claim_keys(claims: Sequence[Any]) -> list[tuple[str, str, str]]:
    """Sorted ``(a, b, expect)`` of :class:`repro.reports.headline.Claim` s or of recorded claim dicts."""
    return sorted((c["a"], c["b"], c["expect"]) if isinstance(c, Mapping) else (c.a, c.b, c.expect)
                  for c in claims)


def _declared(target: str, headline: Headline, recorded: Sequence[Mapping[str, Any]]) -> Headline:
    """The headline the report judged: the declared one, or it at the layers the record names (:data:`LAYERED`)."""
    expand = LAYERED.get(target)
    if expand is None:
        return headline
    layers = list(dict.fromkeys(m.group(1) for c in recorded if (m := _LAYER.search(str(c.get("a", ""))))))
    return expand(headline, [int(k) if k.lstrip("-").isdigit() else k for k in layers])


def check_verdict(target: str, row: Mapping[str, Any]) -> list[str]:
    """The problems of one row's verdict against its recorded claim tests (the rules in the module docstring)."""
    headline, agrees, recorded = headline_of(target, row.get("profile")), row.get("agrees", ""), row.get("claims") or []
    if headline is None:
        return [f"{target}: claim tests recorded, but the target declares no headline"] if recorded else []
    if not recorded:
        return [] if agrees == "n/a" else [
            f"{target}: agrees {agrees!r} with no recorded claim tests (nothing shows what it was decided from)"]
    try:
        judged = rejudge(recorded)
    except (KeyError, TypeError, ValueError) as e:
        return [f"{target}: recorded claim tests cannot be judged again ({type(e).__name__}: {e})"]
    problems = []
    if _claim_keys(recorded) != _claim_keys(_declared(target, headline, recorded).claims):
        problems.append(f"{target}: recorded claims {_claim_keys(recorded)} are not the declared headline's "
                        f"{_claim_keys(headline.claims)}")
    if judged.verdict != agrees:
        problems.append(f"{target}: agrees {agrees!r} but its recorded claim tests say {judged.verdict!r} "
                        f"({judged.how})")
    for c, t in zip(recorded, judged.tested):
        if c.get("outcome") != t.outcome:
            problems.append(f"{target}: claim {c['a']} vs {c['b']} recorded as {c.get('outcome')!r}, its gap and "
                            f"SE say {t.outcome!r}")
    return problems


def check_provenance(target: str, row: Mapping[str, Any]) -> list[str]:
    """The problems of one row's provenance: a missing ``commit``/``profile``/``run``, a dirty or unknown commit."""
    problems = [f"{target}: no {k}" for k in PROVENANCE if not row.get(k)]
    commit = str(row.get("commit") or "")
    if commit.endswith(DIRTY):
        problems.append(f"{target}: commit {commit} had uncommitted code changes")
    elif commit in BAD_COMMITS:
        problems.append(f"{target}: commit {commit!r} names no code")
    return problems


def check_rules(target: str, row: Mapping[str, Any]) -> list[str]:
    """The figure-rule problems the recorder found on each of the row's figures (:mod:`repro.figure_rules`)."""
    return [f"{target}: figure {name}: {q}" for name, qs in (row.get("rules") or {}).items() for q in qs]


def rules_coverage(records: Mapping[str, Mapping[str, Any]]) -> tuple[int, int]:
    """``(checked, figures)``: how many of the index's figures (``.png`` files) were checked against the rules."""
    names = [(row, f[:-4]) for row in records.values() for f in row.get("files", []) if f.endswith(".png")]
    return sum(1 for row, n in names if n in (row.get("rules") or {})), len(names)


def _one_of(field: str, rows: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A problem when the pipeline's rows name more than one ``field``, listing the ids of each."""
    by: dict[str, list[str]] = {}
    for tid, row in rows.items():
        by.setdefault(str(row.get(field) or ""), []).append(tid)
    if len(by) <= 1:
        return []
    return [f"the rows reproduce writes name {len(by)} {field}s: "
            + "; ".join(f"{v or '(none)'}: {', '.join(sorted(ids))}" for v, ids in sorted(by.items()))]


def check_index(records: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """The problems of a figures index (target id -> row, as ``index.json`` holds it); empty when there are none."""
    problems = [f"{tid}: not a known target id" for tid in records if tid not in TARGETS]
    pipeline = {tid: row for tid, row in records.items() if tid not in SEPARATE}
    for tid, row in records.items():
        problems += check_provenance(tid, row) + check_rules(tid, row)
        if tid in TARGETS:
            problems += check_verdict(tid, row)
    for field in PROVENANCE:
        problems += _one_of(field, pipeline)
    interactive = sorted(tid for tid, row in pipeline.items() if row.get("run") == INTERACTIVE)
    if interactive:
        problems.append(f"rows written outside reproduce (run {INTERACTIVE!r}): {', '.join(interactive)}")
    return problems


def table_cells(markdown: str) -> list[str]:
    """Every cell of every table row of ``markdown`` (escaped pipes kept inside their cell)."""
    return [c.strip() for line in markdown.splitlines() if line.startswith("|")
            for c in re.split(r"(?<!\\)\|", line.strip().strip("|"))]


def check_pages(folder: str | Path) -> list[str]:
    """The problems of a figures folder's pages against its ``index.json`` (see the module docstring)."""
    folder = Path(folder)
    problems = []
    for name, text in render_pages(read_json(folder / "index.json"), run_record(folder)).items():
        page = folder / name
        if not page.exists():
            problems.append(f"{name}: missing (rendered from index.json by the recorder)")
        elif page.read_text() != text:
            problems.append(f"{name}: not what index.json renders (edited by hand, or stale)")
    if (folder / "INDEX.md").exists():
        long = [c for c in table_cells((folder / "INDEX.md").read_text()) if len(c) > MAX_CELL]
        if long:
            problems.append(f"INDEX.md: {len(long)} cell(s) longer than {MAX_CELL} characters, e.g. {long[0][:80]!r}")
    return problems


def main(argv: Sequence[str] | None = None) -> int:
    """Print the problems of ``<figures dir>/index.json`` and its pages; 1 when there are any."""
    args = list(sys.argv[1:] if argv is None else argv)
    folder = Path(args[0] if args else "figures")
    records = read_json(folder / "index.json")
    problems = check_index(records) + check_pages(folder)
    for p in problems:
        print(p)
    checked, figures = rules_coverage(records)
    print(f"{folder}: {checked} of {figures} figure(s) checked against the figure rules (repro.figure_rules)")
    print(f"{folder / 'index.json'}: {len(problems)} problem(s)")
    return 1 if problems else 0


if __name__ == "__main__":
    raise SystemExit(main())
