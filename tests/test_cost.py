from repro.cost import step_flops


def test_step_flops_formula():
    # 6 N T plus 6 * layers * hidden * n^2 per sample
    assert step_flops(1000, 2, 8, 40, 10) == 6 * 1000 * 40 + 6 * 2 * 8 * 100 * 4
    full, short = step_flops(10**6, 2, 128, 8192, 1024), step_flops(10**6, 2, 128, 2456, 307)
    assert short / full < 0.3
