"""The kill benchmark's processes (:mod:`repro.bench.kill_process`): SIGKILL reaches a whole process group, and
the scans find half-written files and hidden temporary entries without reading them."""

import os
import signal
import subprocess
import sys
import time

import pytest

from repro.bench.kill_process import kill_group, partial_files, temp_entries


def test_scans_catch_partial_files_and_temporary_entries(tmp_path):
    """A cut JSON line and a JSON that does not parse are reported; hidden temporary entries are listed and not
    read."""
    out = tmp_path / "out"
    out.mkdir()
    (out / "predictions.jsonl").write_text('{"index": 0, "task": "vt", "target_length": 256, "score": 1.0}\n{"ind')
    (out / "summary.json").write_text('{"cells": [')
    (out / ".summary.json.abc.tmp").write_text("{")
    assert sorted(partial_files([out])) == [str(out / "predictions.jsonl"), str(out / "summary.json")]
    assert temp_entries([out]) == [".summary.json.abc.tmp"]


def test_kill_group_reaches_grandchildren(tmp_path):
    """SIGKILL goes to the whole process group: a grandchild (like a notebook kernel) dies too."""
    pid_file = tmp_path / "pid"
    code = ("import subprocess, sys, time; p = subprocess.Popen([sys.executable, '-c', 'import time; "
            f"time.sleep(60)']); open({str(pid_file)!r}, 'w').write(str(p.pid)); time.sleep(60)")
    proc = subprocess.Popen([sys.executable, "-c", code], start_new_session=True)
    for _ in range(500):
        if pid_file.exists() and pid_file.read_text():
            break
        time.sleep(0.01)
    grandchild = int(pid_file.read_text())
    kill_group(proc)
    assert proc.returncode == -signal.SIGKILL
    for _ in range(500):
        try:
            os.kill(grandchild, 0)
        except ProcessLookupError:
            break
        time.sleep(0.01)
    else:
        pytest.fail("the grandchild outlived its process group's SIGKILL")
