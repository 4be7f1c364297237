"""Round-robin timing (:mod:`repro.timing`): every arm once per round, in the given order, the warmup rounds
dropped."""

import pytest

from repro.timing import interleaved_rounds, run_seconds


def test_arms_alternate_within_every_round_and_warmup_rounds_are_dropped():
    calls = []

    def step(arm, r):
        calls.append((arm, r))
        return f"{arm}{r}"

    kept = interleaved_rounds(["a", "b", "c"], rounds=2, warmup=1, step=step, progress=False)
    assert calls == [(arm, r) for r in range(3) for arm in ("a", "b", "c")]  # A B C A B C A B C
    assert kept == {"a": ["a1", "a2"], "b": ["b1", "b2"], "c": ["c1", "c2"]}
    assert list(kept) == ["a", "b", "c"]


@pytest.mark.parametrize("rounds,warmup", [(0, 2), (3, 0)])
def test_no_kept_rounds_or_no_warmup(rounds, warmup):
    calls = []
    kept = interleaved_rounds(["x"], rounds, warmup, lambda arm, r: calls.append(r) or r, progress=False)
    assert calls == list(range(rounds + warmup)) and kept == {"x": list(range(warmup, warmup + rounds))}


def test_settle_steps_run_right_before_each_kept_step_and_are_dropped():
    calls = []

    def step(arm, r):
        calls.append((arm, r))
        return (arm, r, sum(c == (arm, r) for c in calls))  # which call of this arm in this round

    kept = interleaved_rounds(["a", "b"], rounds=2, warmup=1, step=step, progress=False, settle=2)
    # warmup rounds: one call per arm; kept rounds: each arm's 2 settle calls, then its kept call (A A A B B B)
    assert calls == [("a", 0), ("b", 0)] + [(arm, r) for r in (1, 2) for arm in ("a", "b") for _ in range(3)]
    assert len(calls) == 2 * 1 + 2 * 2 * 3
    assert kept == {"a": [("a", 1, 3), ("a", 2, 3)], "b": [("b", 1, 3), ("b", 2, 3)]}  # the third call, kept
    # so every kept call follows a call of its own arm, never another arm's
    kept_at = list(range(4, len(calls), 3))  # after the 2 warmup calls, the last of each arm's 3 calls
    assert [calls[i] for i in kept_at] == [("a", 1), ("b", 1), ("a", 2), ("b", 2)]
    assert all(calls[i - 1] == calls[i] for i in kept_at)


def test_cyclic_garbage_of_a_step_is_collected_before_the_next_call():
    import gc
    import weakref

    class Graph:
        """Stands for a step's graph caught in a reference cycle: only the collector frees it."""

    alive: list = []
    refs: list = []

    def step(arm, r):
        alive.append(all(ref() is None for ref in refs))  # every earlier step's cycle already freed
        g = Graph()
        g.cycle = g
        refs.append(weakref.ref(g))
        return r

    enabled = gc.isenabled()
    gc.disable()  # only interleaved_rounds' own collections run
    try:
        interleaved_rounds(["a", "b"], rounds=2, warmup=1, step=step, progress=False, settle=1)
    finally:
        if enabled:
            gc.enable()
    assert len(alive) == 2 + 2 * 2 * 2 and all(alive)


def test_negative_counts_are_refused():
    with pytest.raises(ValueError, match="settle=-1"):
        interleaved_rounds(["a"], 1, 0, lambda arm, r: r, progress=False, settle=-1)


def test_run_seconds_skips_warmup():
    # rows without seconds (e.g. eval rows) neither count as steps nor as warm-up
    ms = [{"seconds": 10.0}] * 5 + [{"seconds": s} for s in (1.0, 2.0, 3.0)]
    assert run_seconds(ms) == 2.0 and run_seconds([{"seconds": 4.0}]) == 4.0 and run_seconds([]) is None
    assert run_seconds([{"loss": 1.0}] * 6 + ms) == 2.0
