"""Saving figures and tables under their target ids, and the figures index.

Every figure (png + pdf) and table (csv + md) that the pipeline produces is
written through a :class:`Recorder`, named by its id from :mod:`repro.targets`.
The recorder keeps ``index.json`` in the figures folder (machine readable) and
renders ``INDEX.md`` and one figures page per paper from it (:mod:`repro.figures_index`). Writes are atomic.
"""

from __future__ import annotations

import csv
import datetime as _dt
import io
import re
from pathlib import Path
from typing import Any, Iterable, Mapping, Sequence

from repro.figures_index import RUN_RECORD, render_pages
from repro.io import atomic_write_bytes, atomic_write_json, atomic_write_text, read_json
from repro.papers import ALL, check_paper, paper_of
from repro.figure_rules import figure_problems
from repro.provenance import current_commit, current_run
from repro import display
from repro.targets import get_target

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


def run_record(folder: str | Path) -> dict | None:
    """The wall time ``reproduce`` recorded in ``folder`` (:data:`repro.figures_index.RUN_RECORD`), or None."""
    path = Path(folder) / RUN_RECORD
    return read_json(path) if path.exists() else None


def write_pages(folder: str | Path, index: Mapping[str, Any]) -> None:
    """Write ``INDEX.md`` and each paper's figures page of ``folder``, rendered from ``index`` and the folder's run
    record."""
    for name, text in render_pages(index, run_record(folder)).items():
        atomic_write_text(Path(folder) / name, text)


def record_run(folder: str | Path, run: str, profile: str, seconds: float, notebooks: Mapping[str, Any]) -> None:
    """Record a ``reproduce`` run's wall time in ``folder`` (``seconds`` in all; ``notebooks``: name -> its status
    and seconds) and state it in the index, when the folder has one (nothing else is written)."""
    folder = Path(folder)
    if not (folder / "index.json").exists():
        return
    per = {n: {"status": st["status"], "seconds": round(st["seconds"], 1)} for n, st in notebooks.items()}
    atomic_write_json(folder / RUN_RECORD, {"run": run, "profile": profile, "seconds": round(seconds, 1),
                                            "notebooks": per})
    write_pages(folder, read_json(folder / "index.json"))


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
            elif k == "rules":  # per figure name: a target's figures are checked one by one
                row["rules"] = dict(sorted({**row.get("rules", {}), **v}.items()))
            else:
                row[k] = v
        index[target_id] = row
        atomic_write_json(self.index_path, index)
        write_pages(self.dir, index)

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
        problems = figure_problems(fig)  # before saving: it draws the figure, as savefig would
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=110, bbox_inches="tight", metadata={"Software": None})
        png = atomic_write_bytes(self.dir / f"{name}.png", buf.getvalue())
        buf = io.BytesIO()
        fig.savefig(buf, format="pdf", bbox_inches="tight",
                    metadata={"Creator": None, "Producer": None, "CreationDate": None})
        atomic_write_bytes(self.dir / f"{name}.pdf", buf.getvalue())
        self._update(target_id, file=png.name, rules={name: problems})
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
