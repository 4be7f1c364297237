"""The runner: execute the notebooks with papermill, in dependency order, with caching.

A notebook is skipped when its cache key is unchanged since its last
successful run: the key hashes the notebook file, its parameters, the
profile's full config, the ``repro`` source and the keys of the notebooks it
depends on. Executed copies go to ``<run_dir>/<profile>/notebooks/``; figures
and tables go to the figures folder (``figures/`` for the default profile,
``figures/<profile>/`` otherwise). A run into the repository's own ``figures/``
also publishes each executed notebook, outputs and images included and machine
paths taken out, to ``figures/notebooks/<name>.ipynb`` (read on the repository
page without running anything).
"""

from __future__ import annotations

import hashlib
import html
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

from repro.figures import record_run
from repro.io import atomic_write_json, atomic_write_text, config_hash, file_sha256, read_json
from repro.locks import file_stamp, stage_lock, verify_mode
from repro.manifest import with_environment
from repro.papers import ALL, PAPERS, check_paper
from repro.paths import REPO
from repro.profiles import Profile, get_profile
from repro.provenance import COMMIT_ENV, RUN_ENV, code_commit, new_run_id
from repro.reports import paper_pages

DEFAULT_PROFILE = "tiny"


@dataclass(frozen=True)
class NotebookSpec:
    """One notebook of the pipeline."""

    name: str
    """File stem in ``notebooks/``."""
    deps: tuple[str, ...] = ()
    """Notebooks whose artifacts it reads (run first)."""
    papers: tuple[str, ...] = tuple(PAPERS)
    """Papers it produces targets for (``reproduce --paper`` runs only these notebooks). The training
    and evaluation notebooks serve every paper: they build and score the shared testbed."""
    as_is: bool = False
    """It has something to do for a profile that trains nothing (``real.enabled``: the pretrained base as it is,
    the ``smol`` profile); only these notebooks run for such a profile."""


NOTEBOOKS: tuple[NotebookSpec, ...] = (
    NotebookSpec("positions", papers=("longrecipe",)),
    NotebookSpec("training"),
    NotebookSpec("token_analysis", deps=("training",), papers=("longrecipe",)),
    NotebookSpec("evaluation", deps=("training",), as_is=True),
    NotebookSpec("ig_scores", deps=("training",), papers=("cdt",), as_is=True),
    NotebookSpec("attention_distance", deps=("training",), papers=("selfdistill", "cdt"), as_is=True),
)
"""Every notebook, in dependency order."""


def notebook_specs(notebooks_dir: Path) -> tuple[NotebookSpec, ...]:
    """Registered notebooks that exist (later issues add files; a missing one is skipped)."""
    extra = tuple(NotebookSpec(p.stem) for p in sorted(notebooks_dir.glob("*.ipynb"))
                  if p.stem not in {s.name for s in NOTEBOOKS})
    return tuple(s for s in NOTEBOOKS if (notebooks_dir / f"{s.name}.ipynb").exists()) + extra


def default_figures_dir(profile: str) -> Path:
    return REPO / "figures" if profile == DEFAULT_PROFILE else REPO / "figures" / profile


def source_hash() -> str:
    """Hash of every ``repro/*.py`` file (code changes invalidate notebook caches)."""
    h = hashlib.sha256()
    for f in sorted((REPO / "repro").rglob("*.py")):
        h.update(f.relative_to(REPO).as_posix().encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def _order(specs: Sequence[NotebookSpec], only: str | None, paper: str = ALL,
           profile: Profile | None = None) -> list[NotebookSpec]:
    """The notebooks to run, in order: ``only`` (or all), those serving ``paper``; for a ``profile`` that trains
    nothing (``real.enabled``) only the ``as_is`` ones."""
    names = {s.name for s in specs}
    if only is not None and only not in names:
        raise ValueError(f"--only {only!r} is not a notebook; allowed: {', '.join(sorted(names))}")
    if profile is not None and profile.real.enabled:
        as_is = [s.name for s in specs if s.as_is]
        if only is not None and only not in as_is:
            raise ValueError(f"--only {only!r} has nothing to do for --profile {profile.name!r} (it trains nothing); "
                             f"allowed: {', '.join(as_is)}")
        specs = [s for s in specs if s.as_is]
    chosen = [s for s in specs if (only is None or s.name == only) and (paper == ALL or paper in s.papers)]
    if only is not None and not chosen:
        serving = [s.name for s in specs if paper in s.papers]
        raise ValueError(f"--only {only!r} produces nothing for --paper {paper!r}; "
                         f"allowed with that paper: {', '.join(serving)}")
    return chosen


def check_output_folder(label: str, folder: str | Path | None) -> None:
    """A ValueError when the output folder ``folder`` (created when missing) is an existing file or lies under
    one: refused before any stage runs, not an OSError halfway through. ``label`` names it in the message."""
    if folder is None:
        return
    for p in (Path(folder), *Path(folder).parents):
        if p.exists():
            if not p.is_dir():
                where = "is a file" if p == Path(folder) else f"lies under the file {str(p)!r}"
                raise ValueError(f"{label} {str(folder)!r} {where}; allowed: a folder (created when missing)")
            return


def reproduce(profile: str = DEFAULT_PROFILE, only: str | None = None, force: bool = False,
              run_dir: str | Path = "runs", figures_dir: str | Path | None = None,
              notebooks_dir: str | Path | None = None, log=print, paper: str = ALL, device: str = "",
              dtype: str = "") -> dict[str, dict]:
    """Run the pipeline for ``profile``; returns per-notebook status and seconds. ``device`` / ``dtype`` replace
    the profile's ``run.device`` / ``run.dtype`` when given (every notebook builds its profile with them).

    ``paper`` (``all`` or one of :data:`repro.papers.PAPERS`) runs only the notebooks that serve that
    paper, and each of them only the stages and tables of that paper (plus the shared testbed). Every notebook
    this call runs records one run id and the checkout's commit in the figures it writes (:mod:`repro.provenance`).
    """
    check_paper(paper)
    p = get_profile(profile, device, dtype)
    check_output_folder("run_dir", run_dir)
    check_output_folder("figures_dir", figures_dir)
    run_dir = Path(run_dir).resolve()
    figures_dir = Path(figures_dir).resolve() if figures_dir else default_figures_dir(profile)
    nb_dir = Path(notebooks_dir) if notebooks_dir else REPO / "notebooks"
    out_dir = run_dir / p.name / "notebooks"
    specs = notebook_specs(nb_dir)
    keys: dict[str, str] = {}
    src = source_hash()
    for s in specs:  # keys of every notebook, so --only sees its deps' keys
        params = _params(p.name, run_dir, figures_dir, False, paper, device, dtype)
        keys[s.name] = config_hash({"nb": hashlib.sha256((nb_dir / f"{s.name}.ipynb").read_bytes()).hexdigest(),
                                    "params": params, "profile": p, "src": src,
                                    "deps": [keys[d] for d in s.deps if d in keys]})
    chosen = _order(specs, only, paper, p)  # a bad --only fails before anything is written
    out_dir.mkdir(parents=True, exist_ok=True)
    provenance = {RUN_ENV: new_run_id(), COMMIT_ENV: code_commit()}  # every notebook this call runs shares them
    saved = {k: os.environ.get(k) for k in provenance}
    os.environ.update(provenance)  # the notebooks' kernels inherit this process's environment
    t0 = time.perf_counter()
    try:
        status = _run_notebooks(chosen, out_dir, keys, nb_dir, p, run_dir, figures_dir, force, paper, device, dtype,
                                log, provenance[RUN_ENV])
        record_run(figures_dir, provenance[RUN_ENV], p.name, time.perf_counter() - t0, status)
        refresh_paper_pages(figures_dir, log)
        for s in chosen:
            publish_notebook(out_dir / f"{s.name}.ipynb", figures_dir, run_dir, log)
        return status
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def refresh_paper_pages(figures_dir: Path, log=print) -> list[Path]:
    """When ``figures_dir`` is the repository's own ``figures/`` (the committed records), rewrite the results blocks
    of the doc pages that no longer match them (:mod:`repro.reports.paper_pages`), so the docs quote this run;
    returns the pages written. A run into any other folder leaves the docs alone."""
    if Path(figures_dir).resolve() != (REPO / "figures").resolve():
        return []
    written = []
    for path, text in paper_pages.stale(REPO, Path(figures_dir)).items():
        atomic_write_text(path, text)
        written.append(path)
        log(f"[docs] {path.relative_to(REPO)}: results block rewritten from the records")
    return written


PUBLISHED = "notebooks"
"""The folder of ``figures/`` that holds the executed notebooks of the committed run."""


def strip_machine_paths(text: str, run_dir: Path) -> str:
    """An executed notebook's JSON with this machine's paths replaced: the run directory by ``runs``, the
    repository by ``.``, the Python environment by ``<env>`` and the home folder by ``~`` (longest first, so a
    run directory inside the repository reads ``runs``, not ``./runs``)."""
    places = {str(Path(run_dir).resolve()): "runs", str(REPO): ".", sys.prefix: "<env>",
              str(Path.home()): "~"}
    for path in sorted(places, key=len, reverse=True):
        if len(path) > 1:  # never the root folder
            text = text.replace(json.dumps(path)[1:-1], places[path])
    return text


def publish_notebook(executed: Path, figures_dir: Path, run_dir: Path, log=print) -> Path | None:
    """Copy the executed notebook ``executed`` to ``figures/notebooks/<name>.ipynb``, machine paths stripped
    (:func:`strip_machine_paths`), when ``figures_dir`` is the repository's own ``figures/`` (the committed run);
    returns the copy, or None for a run into any other folder (or a notebook that has not run)."""
    if Path(figures_dir).resolve() != (REPO / "figures").resolve() or not executed.exists():
        return None
    out = atomic_write_text(REPO / "figures" / PUBLISHED / executed.name,
                            strip_machine_paths(executed.read_text(encoding="utf-8"), run_dir))
    log(f"[{executed.stem}] executed copy -> {out.relative_to(REPO)}")
    return out


def _run_notebooks(chosen, out_dir: Path, keys: dict[str, str], nb_dir: Path, p, run_dir: Path, figures_dir: Path,
                   force: bool, paper: str, device: str, dtype: str, log, run_id: str) -> dict[str, dict]:
    """Run (or find cached) each chosen notebook in order; the status and seconds of each."""
    import papermill as pm  # papermill: heavy (Jupyter machinery); only the notebook runs need it

    status: dict[str, dict] = {}
    for s in chosen:
        stamp = out_dir / f"{s.name}.done.json"
        executed = out_dir / f"{s.name}.ipynb"
        before = file_stamp(stamp)
        with stage_lock(executed, log=log):  # another reproduce on this run folder runs it once, we wait
            ran_meanwhile = before != file_stamp(stamp)
            if (not force or ran_meanwhile) and _cached(stamp, executed, keys[s.name], log):
                status[s.name] = {"status": "cached", "seconds": 0.0}
                log(f"[{s.name}] cached (key {keys[s.name]})")
                continue
            log(f"[{s.name}] running ({p.name}) -> {executed}")
            t0 = time.perf_counter()
            tmp = out_dir / f".{s.name}.running.ipynb"
            pm.execute_notebook(str(nb_dir / f"{s.name}.ipynb"), str(tmp), kernel_name="python3",
                                parameters=_params(p.name, run_dir, figures_dir, force, paper, device, dtype),
                                cwd=str(nb_dir),
                                progress_bar=False, log_output=False)
            atomic_write_text(executed, _stable_cell_ids(tmp.read_text(encoding="utf-8")))
            tmp.unlink()
            dt = time.perf_counter() - t0
            atomic_write_json(stamp, with_environment({"key": keys[s.name], "seconds": dt, "profile": p.name,
                                                       "run": run_id,
                                                       "size": executed.stat().st_size,
                                                       "sha256": file_sha256(executed)}))
            status[s.name] = {"status": "ran", "seconds": dt}
            log(f"[{s.name}] done in {dt:.1f} s")
    return status


def _cached(stamp: Path, executed: Path, key: str, log) -> bool:
    """Whether the executed notebook is a valid cache for ``key``: its stamp has the key and the executed copy
    has the size and sha256 the stamp recorded (else it runs again, saying which file changed; a stamp without
    them, from before they were recorded, too)."""
    try:
        rec = read_json(stamp)
    except FileNotFoundError:
        return False
    except ValueError:
        log(f"{stamp}: not valid JSON (truncated?); running the notebook again")
        return False
    if not isinstance(rec, dict) or rec.get("key") != key or not executed.exists():
        return False
    if "sha256" not in rec:
        log(f"{stamp}: written before integrity records (nothing to verify {executed.name} against); running the "
            "notebook again")
        return False
    size = executed.stat().st_size
    if size != rec.get("size") or (verify_mode() == "hash" and file_sha256(executed) != rec["sha256"]):
        what = f"{size} bytes, recorded {rec.get('size')}" if size != rec.get("size") else "content changed"
        log(f"{executed}: {what} since it ran; running the notebook again")
        return False
    return True


def _params(profile: str, run_dir: Path, figures_dir: Path, force: bool, paper: str, device: str = "",
            dtype: str = "") -> dict:
    return {"profile": profile, "run_dir": str(run_dir), "figures_dir": str(figures_dir), "force": force,
            "paper": paper, "device": device, "dtype": dtype}


INJECTED_CELL_ID = "injected-parameters"
"""The id given to the parameters cell that papermill adds (it would get a random one each run)."""


def _stable_cell_ids(text: str) -> str:
    """An executed notebook's JSON with the injected parameters cell's random id replaced by
    :data:`INJECTED_CELL_ID`, so two runs of the same notebook differ only in their timings."""
    import nbformat  # nbformat: only the notebook runner needs it

    nb = nbformat.reads(text, as_version=nbformat.NO_CONVERT)
    for cell in nb.cells:
        if "id" in cell and "injected-parameters" in cell.get("metadata", {}).get("tags", []):
            cell["id"] = INJECTED_CELL_ID
    final_bar_lines(nb)
    return nbformat.writes(nb) + "\n"


WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"


def final_bar_lines(nb) -> int:
    """Give each progress bar of an executed notebook (a tqdm widget: a label, a progress bar and a text) its final
    state as its plain-text form, one line, from the widget state the executor saved; papermill keeps only the
    line the bar showed when it appeared (0%). Returns how many bars were rewritten."""
    state = nb.get("metadata", {}).get("widgets", {}).get(WIDGET_STATE, {}).get("state", {})
    done = 0
    for cell in nb.cells:
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            model = state.get(out.get("data", {}).get(WIDGET_VIEW, {}).get("model_id", ""), {})
            children = model.get("state", {}).get("children", [])
            parts = [state.get(str(c).removeprefix("IPY_MODEL_"), {}) for c in children]
            if len(parts) != 3 or parts[1].get("model_name") != "FloatProgressModel":
                continue
            left, right = (html.unescape(str(p.get("state", {}).get("value", ""))).replace("\u2007", " ")
                           for p in (parts[0], parts[2]))
            out["data"]["text/plain"] = f"{left}|{right}".strip()
            done += 1
    return done


def base_search(names: Sequence[str], run_dir: str | Path = "runs", threads: int = 0,
                figures_dir: str | Path = "figures") -> int:
    """``python -m repro base-search``: train and score the named base-model candidates, then rewrite
    ``TB-BaseSearch`` (:func:`repro.stages.base_search.search_main`; without names it lists them)."""
    from repro.stages.base_search import search_main  # loads torch and the models: only base-search needs them

    return search_main(list(names), run_dir, threads, figures_dir)
