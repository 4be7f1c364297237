import pytest

from repro.io import atomic_dir, atomic_write_text, config_hash


def test_atomic_write_replaces_and_leaves_no_temp(tmp_path):
    p = tmp_path / "a.txt"
    atomic_write_text(p, "one")
    atomic_write_text(p, "two")
    assert p.read_text() == "two"
    assert [x.name for x in tmp_path.iterdir()] == ["a.txt"]


def test_atomic_dir_failure_leaves_previous_version(tmp_path):
    d = tmp_path / "stage"
    with atomic_dir(d) as tmp:
        (tmp / "x").write_text("ok")
    with pytest.raises(RuntimeError):
        with atomic_dir(d) as tmp:
            (tmp / "x").write_text("half")
            raise RuntimeError("killed")
    assert (d / "x").read_text() == "ok"
    assert [x.name for x in tmp_path.iterdir()] == ["stage"]


def test_config_hash_is_stable_and_sensitive():
    from repro.profiles import get_profile

    a, b = get_profile("tiny"), get_profile("tiny")
    assert config_hash(a) == config_hash(b)
    assert config_hash(a) != config_hash(a.override(extend={"steps": 201}))


def test_written_files_and_folders_respect_the_umask(tmp_path):
    """Files and folders come out as plain ``open``/``mkdir`` would make them (readable by the group under the
    common 022 umask), not private to their owner as ``mkstemp``/``mkdtemp`` make them."""
    import os
    import stat

    from repro.io import atomic_dir, atomic_write_text, umask

    old = os.umask(0o022)
    try:
        assert umask() == 0o022
        atomic_write_text(tmp_path / "a.txt", "x")
        with atomic_dir(tmp_path / "d") as d:
            (d / "f").write_text("y")
        assert stat.S_IMODE((tmp_path / "a.txt").stat().st_mode) == 0o644
        assert stat.S_IMODE((tmp_path / "d").stat().st_mode) == 0o755
        os.umask(0o077)
        atomic_write_text(tmp_path / "b.txt", "x")
        assert stat.S_IMODE((tmp_path / "b.txt").stat().st_mode) == 0o600
    finally:
        os.umask(old)
