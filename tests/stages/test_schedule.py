"""How train_arms schedules and times the arms: the timed arms alone on all the cores, the others side by side."""

from repro.profiles import get_profile
from repro.stages import arm_timing
from repro.timing import StepTiming

P = get_profile("tiny")


def test_arm_timing_follows_the_schedule_of_train_arms():
    ms = [{"seconds": s} for s in (9.0, 9.0, 9.0, 9.0, 9.0, 1.0, 2.0, 3.0)]  # five warm-up steps left out
    assert arm_timing(P, "rp_skip", ms) == StepTiming(2.0, P.extend.workers * P.extend.threads, 0,
                                                      "its own training run")
    assert arm_timing(P, "rp_skip@seed1", ms) == StepTiming(2.0, 1, P.extend.workers - 1, "its own training run")
    assert arm_timing(P, "flt", ms, workers=1).beside == 0
