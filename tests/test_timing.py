"""Round-robin timing (:mod:`repro.timing`): every arm once per round, in the given order, the warmup rounds
dropped."""

import pytest

from repro.timing import interleaved_rounds


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
