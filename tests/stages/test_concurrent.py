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
                       match=r"stage job train_extension\(no_such_arm\) failed: .*unknown extension method"):
        run_jobs(jobs, workers=2, progress=False)
    with pytest.raises(ValueError, match="job function 'rm_rf'; allowed:"):
        run_jobs([Job("rm_rf")], workers=2)
    with pytest.raises(ValueError, match="job function 'os:remove'; allowed:"):
        run_jobs([Job("os:remove", ("x",))], workers=2)
