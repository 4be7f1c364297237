"""The linter runs with the tests: ruff over the package, the tests and the notebooks (pyproject.toml)."""

import subprocess
import sys

from repro.pipeline import REPO


def test_ruff_passes():
    r = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", "."], capture_output=True, text=True,
                       cwd=REPO)
    assert r.returncode == 0, r.stdout[-4000:] + r.stderr[-2000:]
