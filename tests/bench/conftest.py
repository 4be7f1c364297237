"""Shared, once-per-session measurements of the benchmark tests."""

import pytest


@pytest.fixture(scope="session")
def smoke_proxies():
    """RP-Cost's and CD-Cost's smoke proxies, timed once (one step each, no warm-up): ``(rp, cd)`` as
    :func:`repro.bench.cost_proxies.measure_proxies` returns them. The proxy test checks them; ``bench costs
    --quick`` gets them instead of timing the same shapes again."""
    from repro.bench.cost_proxies import measure_proxies

    return (measure_proxies("rp", "smoke", steps=1, warmup=0, progress=False),
            measure_proxies("cd", "smoke", steps=1, warmup=0, progress=False))
