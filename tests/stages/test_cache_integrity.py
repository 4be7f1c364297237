"""The stage cache: damaged or unrecorded artifacts are detected and recomputed, and two processes
on one stage compute it once (a killed holder's lock is taken over)."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from repro.io import atomic_dir, atomic_write_json, read_json
from repro.stages import cache
from repro.stages.cache import (CHECKSUM_KEY, MANIFEST, CacheIntegrityError, CacheWarning, cached_json, compute_once,
                                verify_stage)
from repro.locks import lock_path

REPO = Path(__file__).resolve().parents[2]


def _folder_stage(path: Path, calls: list, payload: bytes = b"x" * 100_000) -> Path:
    """A stage writing ``data.bin`` and then ``summary.json`` (its done marker) atomically; counts its computes."""
    with compute_once(path, "summary.json") as done:
        if done is None:
            calls.append(1)
            with atomic_dir(path) as tmp:
                (tmp / "sub").mkdir()
                (tmp / "sub" / "data.bin").write_bytes(payload)
                atomic_write_json(tmp / "summary.json", {"n": len(payload)})
    return path / "summary.json"


def test_a_finished_folder_stage_records_its_files_and_is_reused(tmp_path):
    stage, calls = tmp_path / "p" / "s-abc", []
    assert _folder_stage(stage, calls) == stage / "summary.json"
    rec = read_json(stage / MANIFEST)
    assert rec["origin"] == "finished" and set(rec["files"]) == {"summary.json", "sub/data.bin"}
    assert rec["files"]["sub/data.bin"]["size"] == 100_000
    _folder_stage(stage, calls)
    assert calls == [1]
    assert not lock_path(stage).exists()  # released locks leave nothing behind


@pytest.mark.parametrize("damage", ["truncate", "edit", "delete"])
def test_a_damaged_folder_stage_is_recomputed_with_a_warning_naming_the_file(tmp_path, damage):
    stage, calls = tmp_path / "p" / "s-abc", []
    _folder_stage(stage, calls)
    f = stage / "sub" / "data.bin"
    if damage == "truncate":
        f.write_bytes(f.read_bytes()[:50_000])
    elif damage == "edit":  # same size, one byte changed
        f.write_bytes(b"y" + f.read_bytes()[1:])
    else:
        f.unlink()
    what = {"truncate": "50000 bytes, recorded 100000", "edit": "content changed", "delete": "missing"}[damage]
    with pytest.warns(CacheWarning, match=rf"{f}: {what}.*computing it again"):
        _folder_stage(stage, calls)
    assert calls == [1, 1]
    assert f.read_bytes() == b"x" * 100_000
    assert cache.check_manifest(stage) is None


def test_size_mode_skips_hashes_but_still_catches_truncation(tmp_path, monkeypatch):
    stage, calls = tmp_path / "s-abc", []
    _folder_stage(stage, calls)
    f = stage / "sub" / "data.bin"
    f.write_bytes(b"y" + f.read_bytes()[1:])
    monkeypatch.setenv("REPRO_VERIFY", "size")
    _folder_stage(stage, calls)  # same size: not hashed, not noticed (the documented trade)
    assert calls == [1]
    f.write_bytes(f.read_bytes()[:10])
    with pytest.warns(CacheWarning, match="10 bytes, recorded 100000"):
        _folder_stage(stage, calls)
    assert calls == [1, 1]
    monkeypatch.setenv("REPRO_VERIFY", "sha1")
    with pytest.raises(ValueError, match="REPRO_VERIFY='sha1'; allowed: hash, size"):
        _folder_stage(stage, calls)


def test_verify_stage_stops_with_the_damaged_file_where_nothing_recomputes(tmp_path):
    stage = tmp_path / "s-abc"
    _folder_stage(stage, [])
    assert verify_stage(stage, "summary.json") == stage / "summary.json"
    (stage / "summary.json").write_text("{}")
    with pytest.raises(CacheIntegrityError, match=rf"{stage / 'summary.json'}: 2 bytes, recorded"):
        verify_stage(stage, "summary.json")
    assert (stage / "summary.json").exists()  # nothing deleted


def test_a_folder_stage_without_a_manifest_is_computed_again(tmp_path):
    """A stage whose finished artifact is there but not its manifest (killed between the two, or finished before
    manifests): nothing tells it from a damaged one, so it is computed again and then recorded."""
    stage, calls = tmp_path / "s-abc", []
    stage.mkdir()
    (stage / "data.bin").write_bytes(b"old")
    (stage / "summary.json").write_text("{}")
    with pytest.raises(CacheIntegrityError, match=r"artifacts.json: missing"):
        verify_stage(stage, "summary.json")
    _folder_stage(stage, calls)
    assert calls == [1]
    rec = read_json(stage / MANIFEST)
    assert rec["origin"] == "finished" and set(rec["files"]) == {"sub/data.bin", "summary.json"}
    assert not (stage / "data.bin").exists()  # computed again into a fresh folder
    _folder_stage(stage, calls)
    assert calls == [1]


def test_the_corpus_stage_recomputes_a_truncated_token_file(tmp_path):
    from repro.stages.corpus import build_corpus

    c = build_corpus("smoke", tmp_path)
    tokens = c.path / "tokens.npy"
    good = tokens.read_bytes()
    assert read_json(c.path / MANIFEST)["files"]["tokens.npy"]["size"] == len(good)
    tokens.write_bytes(good[: len(good) // 2])
    with pytest.warns(CacheWarning, match=rf"{tokens}: {len(good) // 2} bytes, recorded {len(good)}"):
        build_corpus("smoke", tmp_path)
    assert tokens.read_bytes() == good


def _record_stage(path: Path, calls: list) -> dict:
    def compute():
        calls.append(1)
        return {"score": 0.5, "rows": [1, 2, 3]}

    return cached_json(path, False, compute)


@pytest.mark.parametrize("damage", ["edit", "truncate"])
def test_a_damaged_json_record_is_recomputed(tmp_path, damage):
    path, calls = tmp_path / "eval" / "r-abc.json", []
    assert _record_stage(path, calls) == {"score": 0.5, "rows": [1, 2, 3]}
    on_disk = read_json(path)
    assert CHECKSUM_KEY in on_disk and _record_stage(path, calls) == _record_stage(path, calls)
    assert calls == [1]
    text = path.read_text()
    path.write_text(text.replace("0.5", "0.9") if damage == "edit" else text[: len(text) // 2])
    what = "content changed" if damage == "edit" else "not valid JSON"
    with pytest.warns(CacheWarning, match=rf"{path}: {what}"):
        assert _record_stage(path, calls)["score"] == 0.5
    assert calls == [1, 1]


def test_a_json_record_without_its_checksum_is_computed_again(tmp_path):
    path, calls = tmp_path / "r.json", []
    path.write_text(json.dumps({"score": 0.7}))  # written before records had checksums
    with pytest.warns(CacheWarning, match="no _sha256"):
        assert _record_stage(path, calls) == {"score": 0.5, "rows": [1, 2, 3]}
    assert calls == [1] and CHECKSUM_KEY in read_json(path)


def test_a_record_may_not_use_the_checksum_key(tmp_path):
    with pytest.raises(ValueError, match="has a key '_sha256'; allowed: any other key"):
        cached_json(tmp_path / "r.json", False, lambda: {CHECKSUM_KEY: 1})
    assert not (tmp_path / "r.json").exists()


def test_the_notebook_runner_reruns_an_edited_executed_notebook(tmp_path):
    from repro.io import file_sha256
    from repro.pipeline import _cached

    nb, stamp, said = tmp_path / "t.ipynb", tmp_path / "t.done.json", []
    nb.write_text('{"cells": []}')
    atomic_write_json(stamp, {"key": "k"})  # a stamp from before hashes were recorded: run again
    assert not _cached(stamp, nb, "k", said.append) and "running the notebook again" in said[-1]
    atomic_write_json(stamp, {"key": "k", "size": nb.stat().st_size, "sha256": file_sha256(nb)})
    assert _cached(stamp, nb, "k", said.append) and not _cached(stamp, nb, "other", said.append)
    nb.write_text('{"cells": [1]}')
    assert not _cached(stamp, nb, "k", said.append) and said[-1].startswith(f"{nb}: 14 bytes, recorded 13")


# -- two processes ----------------------------------------------------------------------------------------

WORKER = """
import importlib.util, os, sys, time
from pathlib import Path
sys.path.insert(0, {repo!r})
# the cache and lock modules alone: what a stage does around its compute, without importing every stage
def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = sys.modules[name] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
load("repro.locks", {locks!r})
cache = load("stage_cache", {module!r})
from repro.io import atomic_dir
stage, counter, hold = Path(sys.argv[1]), Path(sys.argv[2]), sys.argv[3]
with cache.compute_once(stage, "out.txt") as done:
    if done is None:
        with open(counter, "a") as f:
            f.write(f"{{os.getpid()}}\\n")
        while not Path(hold).exists():  # computes until the test has seen the others wait or refuse
            time.sleep(0.05)
        with atomic_dir(stage) as tmp:
            (tmp / "out.txt").write_text(str(os.getpid()))
print("RESULT", (stage / "out.txt").read_text())
"""


def _worker(tmp_path: Path, hold: Path | None = None, **env) -> subprocess.Popen:
    """A process computing the stage ``run/s-abc`` once, holding its lock until the file ``hold`` exists (no file:
    it computes at once)."""
    code = WORKER.format(repo=str(REPO), module=str(REPO / "repro" / "stages" / "cache.py"),
                         locks=str(REPO / "repro" / "locks.py"))
    full = {**os.environ, "PYTHONPATH": str(REPO), **env}
    for k in ("REPRO_LOCK_WAIT", "REPRO_LOCK_TIMEOUT"):
        if k not in env:
            full.pop(k, None)
    argv = [sys.executable, "-c", code, str(tmp_path / "run" / "s-abc"), str(tmp_path / "calls"), str(hold or tmp_path)]
    return subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=full)


def _calls(tmp_path: Path) -> list[int]:
    f = tmp_path / "calls"
    return [int(x) for x in f.read_text().split()] if f.exists() else []


def _wait_for_compute(tmp_path: Path, proc: subprocess.Popen, n: int = 1) -> None:
    t0 = time.monotonic()
    while len(_calls(tmp_path)) < n:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() - t0 < 120, "the holder never started computing"  # a liveness guard
        time.sleep(0.05)


def test_a_second_process_waits_and_reuses_or_refuses_naming_the_holder(tmp_path):
    go = tmp_path / "go"
    holder = _worker(tmp_path, go)
    _wait_for_compute(tmp_path, holder)
    waiter = _worker(tmp_path)
    refuser = _worker(tmp_path, REPRO_LOCK_WAIT="0")
    impatient = _worker(tmp_path, REPRO_LOCK_TIMEOUT="0.5")
    out_r, err_r = refuser.communicate(timeout=120)  # the holder computes until both have given up ...
    out_i, err_i = impatient.communicate(timeout=120)
    waiting = ""
    while "waiting for stage" not in waiting and (line := waiter.stderr.readline()):  # ... and the waiter waits
        waiting += line
    go.touch()
    out_h, err_h = holder.communicate(timeout=120)
    out_w, err_w = waiter.communicate(timeout=120)
    err_w = waiting + err_w
    assert holder.returncode == 0 and waiter.returncode == 0, (err_h, err_w)
    assert _calls(tmp_path) == [holder.pid]  # computed exactly once
    assert out_w.strip() == out_h.strip() == f"RESULT {holder.pid}"
    assert f"waiting for stage {tmp_path / 'run' / 's-abc'}: computed by pid {holder.pid} on" in err_w
    assert refuser.returncode != 0 and "StageLocked" in err_r and "REPRO_LOCK_WAIT=0 refuses" in err_r
    assert f"pid {holder.pid} on" in err_r and "command:" in err_r
    assert impatient.returncode != 0 and f"pid {holder.pid}" in err_i and "REPRO_LOCK_TIMEOUT=0" in err_i
    assert not lock_path(tmp_path / "run" / "s-abc").exists()


def test_the_lock_of_a_killed_holder_is_taken_over(tmp_path):
    holder = _worker(tmp_path, tmp_path / "never")
    _wait_for_compute(tmp_path, holder)
    os.kill(holder.pid, signal.SIGKILL)
    holder.communicate(timeout=120)
    lock = lock_path(tmp_path / "run" / "s-abc")
    assert json.loads(lock.read_text())["pid"] == holder.pid  # left behind, but no longer locked
    nxt = _worker(tmp_path, REPRO_LOCK_WAIT="0")
    out, err = nxt.communicate(timeout=120)
    assert nxt.returncode == 0, err
    assert _calls(tmp_path) == [holder.pid, nxt.pid] and out.strip() == f"RESULT {nxt.pid}"
    assert f"took over the lock left by pid {holder.pid}" in err
    assert not lock.exists() and read_json(tmp_path / "run" / "s-abc" / MANIFEST)["origin"] == "finished"


def test_two_reproduce_processes_run_a_notebook_once(tmp_path):
    import nbformat

    nb = nbformat.v4.new_notebook(metadata={"kernelspec": {"name": "python3", "display_name": "Python 3",
                                                           "language": "python"}, "language_info": {"name": "python"}})
    params = nbformat.v4.new_code_cell("profile = run_dir = figures_dir = paper = ''\nforce = False")
    params.metadata["tags"] = ["parameters"]
    count, go = tmp_path / "count", tmp_path / "go"
    nb.cells = [params, nbformat.v4.new_code_cell(  # computes until the test has seen the second process wait
        f"import os, time\nopen({str(count)!r}, 'a').write(f'{{os.getpid()}}\\n')\nt0 = time.time()\n"
        f"while not os.path.exists({str(go)!r}) and time.time() - t0 < 60:\n    time.sleep(0.1)")]
    (tmp_path / "nb").mkdir()
    nbformat.write(nb, tmp_path / "nb" / "positions.ipynb")
    code = ("import sys; from repro.pipeline import reproduce; "
            "s = reproduce('smoke', run_dir=sys.argv[1], figures_dir=sys.argv[2], notebooks_dir=sys.argv[3]); "
            "print('STATUS', s['positions']['status'])")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    args = [str(tmp_path / "runs"), str(tmp_path / "figs"), str(tmp_path / "nb")]
    first = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                             text=True, env=env)
    t0 = time.monotonic()
    while not count.exists():
        assert first.poll() is None and time.monotonic() - t0 < 60, first.communicate()
        time.sleep(0.05)
    second = subprocess.Popen([sys.executable, "-c", code, *args], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              text=True, env=env)
    waiting = ""
    while "waiting for stage" not in waiting and (line := second.stdout.readline()):  # it waits for the first one
        waiting += line
    go.touch()
    out1, _ = first.communicate(timeout=60)
    out2 = waiting + second.communicate(timeout=60)[0]
    assert f"waiting for stage {tmp_path / 'runs' / 'smoke' / 'notebooks' / 'positions.ipynb'}: computed by pid " \
           f"{first.pid} on" in waiting, out2
    assert "STATUS ran" in out1 and "STATUS cached" in out2, (out1, out2)
    assert len(count.read_text().split()) == 1
