"""Stages side by side: the same weights as one after another; failures name the job."""

import pytest
from safetensors.torch import load_file

from repro.profiles import get_profile
from repro.stages.concurrent import Job, run_jobs
from repro.stages.extension import train_extension
from repro.stages.schedule import train_arms


def _weights(path):
    return load_file(str(path / "model.safetensors"))


@pytest.mark.slow
def test_a_concurrent_run_trains_the_weights_of_a_serial_run(tmp_path):
    p = get_profile("smoke").override(extend={"threads": 1, "replicate_arms": ("flt",), "seed_replicates": 2})
    names = ("flt", "pose", "flt@seed1")
    serial = train_arms(p, names, tmp_path / "a", progress=False, workers=1)
    side = train_arms(p, names, tmp_path / "b", progress=False, workers=2)
    for n in names:
        a, b = _weights(serial[n]), _weights(side[n])
        assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a), n
    a, r = _weights(serial["flt"]), _weights(serial["flt@seed1"])
    assert any(not (a[k] == r[k]).all() for k in a)  # a replicate is another training run


def test_a_failing_job_is_named(tmp_path):
    jobs = [Job.of(train_extension, "smoke", "no_such_arm", run_dir=str(tmp_path))] * 2
    with pytest.raises(RuntimeError,
                       match=r"stage job train_extension\(no_such_arm\) failed: .*unknown arm .no_such_arm."):
        run_jobs(jobs, workers=2, progress=False)
    with pytest.raises(ValueError, match="job function 'rm_rf'; allowed:"):
        run_jobs([Job("rm_rf")], workers=2)
    with pytest.raises(ValueError, match="job function 'os:remove'; allowed:"):
        run_jobs([Job("os:remove", ("x",))], workers=2)


def test_timed_arms_train_one_at_a_time_after_the_side_by_side_ones(tmp_path, monkeypatch):
    """The arms whose step times RP-Cost and CD-Cost report train alone (no stage beside them), on all the cores."""
    from repro.recipes.plans import TIMED_ARMS, timed_threads
    from repro.stages import base, schedule

    calls = []
    monkeypatch.setattr(base, "train_base", lambda *a, **k: None)
    monkeypatch.setattr(schedule, "run_jobs", lambda jobs, workers, threads, progress, desc:
                        calls.append(([j.args[1] for j in jobs], workers)) or [(j.args[1], 0.0) for j in jobs])
    p = get_profile("smoke").override(extend={"workers": 2, "threads": 1})
    out = train_arms(p, ["rp_skip", "flt", "cdt", "pose", "rp_standard"], tmp_path, progress=False)
    assert out == {n: n for n in ("rp_skip", "flt", "cdt", "pose", "rp_standard")}
    assert [w for _, w in calls] == [2, 1]
    assert set(calls[0][0]) == {"flt", "pose"} and set(calls[1][0]) == {"rp_skip", "cdt", "rp_standard"}
    assert {"rp_standard", "rp_skip", "cdt"} <= set(TIMED_ARMS) and timed_threads(p) == 2
    assert "rp_skip@seed1" not in TIMED_ARMS  # replicates train side by side
