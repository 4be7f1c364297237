"""Saving figures and tables under their target ids, and the figures index.

Every figure (png + pdf) and table (csv + md) that the pipeline produces is
written through a :class:`Recorder`, named by its id from :mod:`repro.targets`.
The recorder keeps ``index.json`` in the figures folder (machine readable) and
renders ``INDEX.md`` from it: id, files, profile, date, the paper's value and
ours. Writes are atomic.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from repro.io import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json
from repro.papers import ALL, check_paper, paper_of
from repro.plotting import display
from repro.targets import TARGETS, get_target

_SAFE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")


def _check_name(name: str) -> None:
    if not _SAFE.match(name):
        raise ValueError(f"figure/table name {name!r} must match {_SAFE.pattern}")


def _fmt(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e4 else f"{v:.4e}"
    return "" if v is None else str(v)


def table_to_markdown(rows: Sequence[Mapping[str, Any]], columns: Sequence[str]) -> str:
    """A GitHub-flavoured markdown table; floats printed with 4 significant digits."""
    head = "| " + " | ".join(columns) + " |"
    sep = "|" + "|".join("---" for _ in columns) + "|"
    body = ["| " + " | ".join(_fmt(r.get(c)).replace("|", "\\|") for c in columns) + " |" for r in rows]
    return "\n".join([head, sep, *body]) + "\n"


class Recorder:
    """Writes figures/tables for one profile into ``figures_dir`` and keeps the index.

    Args:
        figures_dir: destination folder (created if missing).
        profile: profile name recorded in the index (``smoke``, ``tiny``, ``paper``).
        date: date string recorded for every row written by this recorder;
            defaults to today (UTC).
        paper: ``all`` or one paper (:mod:`repro.papers`): only that paper's targets and the
            testbed's ``TB-*`` ones are written; the others are skipped (``wants`` tells which).
        show: also show what it writes in the notebook (figures inline, tables rendered, one verdict line per
            target); default: when running inside a Jupyter kernel.
    """

    def __init__(self, figures_dir: str | Path, profile: str, date: str | None = None, paper: str = "all",
                 run: str | None = None, commit: str | None = None, show: bool | None = None):
        self.dir = Path(figures_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.profile = profile
        self.date = date or _dt.datetime.now(_dt.timezone.utc).date().isoformat()
        self.paper = check_paper(paper)
        from repro.provenance import current_commit, current_run

        self.run = run or current_run()
        self.commit = commit or current_commit()
        self.show = display.in_kernel() if show is None else show

    def wants(self, target_id: str) -> bool:
        """Whether this recorder writes ``target_id`` (a target of its paper, or the testbed's)."""
        get_target(target_id)  # unknown ids fail loudly
        return self.paper == ALL or paper_of(target_id) in (None, self.paper)

    # -- index ---------------------------------------------------------------------------
    @property
    def index_path(self) -> Path:
        return self.dir / "index.json"

    def _load(self) -> dict:
        return read_json(self.index_path) if self.index_path.exists() else {}

    def _update(self, target_id: str, **fields: Any) -> None:
        get_target(target_id)  # unknown ids fail loudly
        index = self._load()
        row = index.get(target_id, {})
        if row.get("profile") != self.profile:
            row = {"files": []}
        row.update(profile=self.profile, date=self.date, commit=self.commit, run=self.run)
        for k, v in fields.items():
            if k == "file":
                if v not in row["files"]:
                    row["files"] = sorted([*row["files"], v])
            else:
                row[k] = v
        index[target_id] = row
        atomic_write_json(self.index_path, index)
        atomic_write_text(self.dir / "INDEX.md", render_index(index))

    # -- figures and tables --------------------------------------------------------------
    def figure(self, fig, target_id: str, name: str | None = None) -> Path | None:
        """Save a matplotlib figure as ``<name>.png`` and ``<name>.pdf`` (name defaults to the id) and, when showing,
        display that PNG inline; None when the target is not this recorder's paper's. When showing, the figure is
        closed afterwards (shown once, not again by the inline backend at the end of the cell)."""
        if not self.wants(target_id):
            if self.show:
                display.close_figure(fig)
            return None
        name = name or target_id
        _check_name(name)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
        png = atomic_write_bytes(self.dir / f"{name}.png", buf.getvalue())
        buf = io.BytesIO()
        fig.savefig(buf, format="pdf", bbox_inches="tight",
                    metadata={"Creator": None, "Producer": None, "CreationDate": None})
        atomic_write_bytes(self.dir / f"{name}.pdf", buf.getvalue())
        self._update(target_id, file=png.name)
        if self.show:
            display.show_png(png.read_bytes())
            display.close_figure(fig)
        return png

    def table(self, rows: Iterable[Mapping[str, Any]], target_id: str, name: str | None = None,
              columns: Sequence[str] | None = None, caption: str = "") -> Path | None:
        """Save rows (dicts) as ``<name>.csv`` and ``<name>.md``; returns the csv path (None when the
        target is not this recorder's paper's)."""
        if not self.wants(target_id):
            return None
        name = name or target_id
        _check_name(name)
        rows = list(rows)
        if columns is None:
            columns = list(dict.fromkeys(k for r in rows for k in r))
        out = io.StringIO()
        w = csv.DictWriter(out, fieldnames=list(columns), extrasaction="ignore", lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({c: r.get(c) for c in columns})
        path = atomic_write_text(self.dir / f"{name}.csv", out.getvalue())
        md = (f"{caption}\n\n" if caption else "") + table_to_markdown(rows, columns)
        atomic_write_text(self.dir / f"{name}.md", md)
        self._update(target_id, file=path.name)
        if self.show:
            display.show_markdown(f"**{name}**" + (f": {caption}" if caption else "") + "\n\n"
                                  + table_to_markdown(rows, columns))
        return path

    def result(self, target_id: str, ours: str, agrees: str = "", note: str = "",
               claims: Sequence[Mapping[str, Any]] = ()) -> None:
        """Record our value for ``target_id`` (shown beside the paper's in INDEX.md).

        ``agrees`` states the direction of agreement with the paper
        (e.g. ``"yes"``, ``"no"``, ``"partly"``, ``"tie within noise"``, ``"n/a"``). ``claims``: what it was decided
        from, each claim of the target's declared headline as tested (arms, direction, gap, standard error, raw and
        Holm-adjusted p, outcome; :meth:`repro.reports.headline.Tested.record`), stored in index.json only.
        """
        if self.wants(target_id):
            self._update(target_id, ours=ours, agrees=agrees, note=note, claims=[dict(c) for c in claims])
            if self.show:  # one line; the reasoning (note, claims) stays in index.json and INDEX.md
                print(display.verdict_line(target_id, get_target(target_id).paper, agrees, claims))

    def report(self, rep) -> None:
        """Write a :class:`repro.reports.common.Report`: each of its tables (:meth:`table`) and its result
        (:meth:`result`)."""
        for t in rep.tables:
            self.table(t["rows"], rep.target, name=t["name"], columns=t["columns"], caption=t["caption"])
        self.result(rep.target, ours=rep.ours, agrees=rep.agrees, note=rep.note, claims=rep.claims)


def render_index(index: Mapping[str, Mapping[str, Any]]) -> str:
    """``INDEX.md``: the at-a-glance table of central claims (:mod:`repro.central_claims`), then one row per
    target with its provenance, the paper's value, ours and the verdict."""
    from repro.central_claims import shown_table
    from repro.provenance import SEPARATE

    order = {tid: i for i, tid in enumerate(TARGETS)}
    separate = [tid for tid in index if tid in SEPARATE]
    if index and len(separate) == len(index):  # a folder of separate commands' rows only (figures/costs)
        commands = sorted({SEPARATE[tid] for tid in separate})
        lines = ["# Figures and tables index", "",
                 f"Written by {', '.join(f'`{c}`' for c in commands)}; do not edit by hand. Testbed checks only: the",
                 "papers' targets and what a run shows of them are in the main index (`figures/INDEX.md`).", ""]
    else:
        lines = [
            "# Figures and tables index",
            "",
            "Written by `python -m repro reproduce`"
            + (f" (rows {', '.join(separate)} by their own commands)" if separate else "")
            + "; do not edit by hand. Ids follow the papers'",
            "figure and table numbers (see `repro/targets.py`). Tiny-profile numbers come from a",
            "~1M-parameter model trained here on synthetic tasks: compare directions, not magnitudes.",
            "",
            "## What this run shows",
            "",
            "Each paper's central claims, the targets that test them and whether this run shows each (shown beyond",
            "noise: every target's declared headline holds; shown the other way: one is significant against the",
            "paper).",
            "",
            *shown_table({tid: row.get("agrees", "") for tid, row in index.items()}),
            "",
        ]
    lines += [
        "## Every target",
        "",
        "Each row's `commit`, `profile` and `run` say which code and which run (of `reproduce` or its own command) "
        "wrote it.",
        "",
        "| id | files | profile | date | commit | run | paper | ours | agrees | note |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for tid in sorted(index, key=lambda t: order.get(t, len(order))):
        row = index[tid]
        files = ", ".join(f"[{f}]({f})" for f in row.get("files", []))
        cells = [tid, files, row.get("profile", ""), row.get("date", ""), row.get("commit", ""), row.get("run", ""),
                 get_target(tid).paper,
                 row.get("ours", ""), row.get("agrees", ""), row.get("note", "")]
        lines.append("| " + " | ".join(str(c).replace("|", "\\|").replace("\n", " ") for c in cells) + " |")
    return "\n".join(lines) + "\n"
