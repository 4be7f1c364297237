"""Seeded expected values: the smoke profile's logged losses, pinned (catches silent drift).

Any change to the data streams, the model init, the loss or the optimizer moves these numbers;
a change that should move them updates them here, in the same commit, with the reason."""

import pytest

from repro import stages
from repro.profiles import get_profile

P = get_profile("smoke")

BASE_LOSSES = [6.240270137786865, 6.227449893951416, 6.238132476806641]
"""The base curriculum's first three steps (copy phase), measured with 1 and 2 threads alike."""
BASE_FINAL = (8, 6.2470903396606445)
"""Steps the smoke curriculum takes, and the last step's loss."""
FLT_LOSSES = [6.164155960083008, 6.23350191116333, 6.225122451782227]
"""FLT's three steps from that base."""


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    rd = tmp_path_factory.mktemp("seeded")
    return stages.train_base(P, rd, progress=False), stages.train_extension(P, "flt", rd, progress=False)


def test_smoke_base_losses_are_pinned(run):
    rows = stages.metrics(run[0])
    assert [r["loss"] for r in rows[:3]] == pytest.approx(BASE_LOSSES, rel=1e-6)
    assert (len(rows), rows[-1]["loss"]) == (BASE_FINAL[0], pytest.approx(BASE_FINAL[1], rel=1e-6))


def test_smoke_flt_losses_are_pinned(run):
    assert [r["loss"] for r in stages.metrics(run[1])] == pytest.approx(FLT_LOSSES, rel=1e-6)
