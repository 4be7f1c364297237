import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.plotting.axes import noise_aware_ylim, noise_band  # noqa: E402


def test_noise_band_holds_every_value_plus_minus_its_se():
    assert noise_band([0.50, 0.51], [0.05, 0.05]) == pytest.approx((0.45, 0.56))
    assert noise_band([1.0, None, float("nan")], [0.2, 0.3, 0.1]) == pytest.approx((0.8, 1.2))
    assert noise_band([2.0], [None]) == (2.0, 2.0)  # a missing SE counts as 0
    assert noise_band([None], [0.1]) is None
    assert noise_band([1.0, 99.0], [3.0, 3.0], bounds=(0, 100)) == (0, 100)


def test_two_arms_within_0_01_and_se_0_05_do_not_fill_the_axis():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0.50, 0.51])  # autoscale alone zooms into the 0.01 gap
    assert ax.get_ylim()[1] - ax.get_ylim()[0] < 0.02
    lo, hi = noise_aware_ylim(ax, [0.50, 0.51], [0.05, 0.05])
    assert (lo, hi) == ax.get_ylim()
    assert lo <= 0.45 and hi >= 0.56  # both +-1 SE bands visible
    assert (hi - lo) == pytest.approx(0.11 * 1.1)  # 5% room each side
    plt.close(fig)


def test_limits_are_only_widened_and_bounds_clip_the_band_not_the_room():
    fig, ax = plt.subplots()
    ax.set_ylim(-10, 10)
    assert noise_aware_ylim(ax, [0.0], [1.0]) == (-10, 10)
    ax.set_ylim(40, 60)
    lo, hi = noise_aware_ylim(ax, [2.0, 98.0], [5.0, 5.0], bounds=(0, 100))
    assert lo == pytest.approx(-5.0) and hi == pytest.approx(105.0)
    plt.close(fig)


def test_log_axis_pads_multiplicatively():
    fig, ax = plt.subplots()
    ax.set_yscale("log")
    ax.plot([1, 2], [10.0, 10.5])
    lo, hi = noise_aware_ylim(ax, [10.0, 10.5], [2.0, 2.0])
    assert lo <= 8.0 and hi >= 12.5 and lo > 0
    plt.close(fig)


@pytest.mark.parametrize("values, ses, pad, match", [
    ([1.0, 2.0], [0.1], 0.05, "2 values but 1 standard errors"),
    ([1.0], [-0.1], 0.05, "standard error -0.1"),
    ([1.0], [0.1], 1.5, "pad=1.5"),
])
def test_bad_inputs_name_the_value(values, ses, pad, match):
    fig, ax = plt.subplots()
    with pytest.raises(ValueError, match=match):
        noise_aware_ylim(ax, values, ses, pad=pad)
    plt.close(fig)
