"""A reader of a command's output that leaves early (``python -m repro profiles | head -1``): the command ends
quietly with 141 (128 + SIGPIPE), no traceback."""

import subprocess
import sys

from repro.pipeline import REPO


def test_a_closed_stdout_ends_the_command_quietly():
    proc = subprocess.Popen([sys.executable, "-m", "repro", "profiles"], cwd=REPO, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    proc.stdout.close()  # the reader has left before the first line
    err = proc.stderr.read()
    assert proc.wait(timeout=120) == 141
    assert "Traceback" not in err and err.strip() == "", err
