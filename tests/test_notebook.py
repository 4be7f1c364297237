"""repro.notebook: what the first call of every notebook sets up."""

from __future__ import annotations

import os
import subprocess
import sys

from huggingface_hub.utils import are_progress_bars_disabled, enable_progress_bars
from transformers.utils import logging as hf_logging

from repro.notebook import quiet


def test_quiet_turns_the_load_bars_off_here_and_in_spawned_workers(monkeypatch):
    """A worker process (the evaluation runs checkpoints two at a time in ``spawn`` processes) starts with
    transformers' "Loading weights" bar off, because quiet() leaves it off in the environment it inherits."""
    monkeypatch.delenv("HF_HUB_DISABLE_PROGRESS_BARS", raising=False)  # restored after the test
    monkeypatch.delenv("DS_ACCELERATOR", raising=False)
    was_on, hub_was_on = hf_logging.is_progress_bar_enabled(), not are_progress_bars_disabled()
    child = [sys.executable, "-c", "from transformers.utils import logging; print(logging.is_progress_bar_enabled())"]
    try:
        assert subprocess.run(child, capture_output=True, text=True, check=True).stdout.strip() == "True"
        quiet()
        assert not hf_logging.is_progress_bar_enabled()
        assert os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] == "1"
        assert subprocess.run(child, capture_output=True, text=True, check=True).stdout.strip() == "False"
    finally:
        if was_on:
            hf_logging.enable_progress_bar()
        if hub_was_on:
            enable_progress_bars()
