"""Checkpoint paths by arm name."""

import pytest

from repro.profiles import get_profile
from repro.stages import checkpoint_path


def test_a_training_seed_replicate_is_never_resolved_to_the_plain_arm(tmp_path):
    with pytest.raises(ValueError, match=r"'flt@seed1': training-seed replicates \(@seed<k>\) have no training stage"):
        checkpoint_path(get_profile("smoke"), "flt@seed1", tmp_path)
