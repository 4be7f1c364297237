"""Shared fixtures for the harness tests: lm-evaluation-harness offline for the whole session."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="session")
def offline(tmp_path_factory):
    """Offline switches and a ``punkt_tab`` model in a temporary folder; call before importing lm-eval."""
    from repro.harness.offline import go_offline

    return go_offline(cache=tmp_path_factory.mktemp("offline"))
