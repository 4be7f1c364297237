import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.plotting.evaluation import accuracy_vs_length, accuracy_vs_wallclock, decile_curves  # noqa: E402
from tests.plotting.artists import errorbars, half_lengths  # noqa: E402


def test_rp_fig4_draws_one_se_bars_and_names_its_task_count():
    points = {"rp_skip": [(150.0, 50.0, 5.6), (300.0, 80.0, 4.5)], "rp_standard_matched": [(100.0, 40.0, None)]}
    fig = accuracy_vs_wallclock(points, title="RULER-doable (6 tasks) at 1024 vs training wall-clock",
                                metric="RULER-doable (6 tasks)")
    ax = fig.axes[0]
    assert half_lengths(ax) == {"rp_skip": [5.6, 4.5], "rp_standard_matched": [0.0]}
    assert [x for x, _, _ in errorbars(ax)["rp_skip"]] == [150.0, 300.0]
    assert "6 tasks" in ax.get_title() and ax.get_ylabel().startswith("RULER-doable (6 tasks) (%; ")
    assert "±1 SE" in ax.get_ylabel()
    lo, hi = ax.get_ylim()
    assert lo <= 0 and hi >= 100  # the whole accuracy range: no zoom into the noise
    plt.close(fig)


def test_rp_fig4_takes_points_without_an_se_and_refuses_other_shapes():
    fig = accuracy_vs_wallclock({"a": [(1.0, 20.0), (2.0, 30.0)]})
    assert half_lengths(fig.axes[0]) == {"a": [0.0, 0.0]}
    plt.close(fig)
    with pytest.raises(ValueError, match=r"point \(1.0,\); allowed: \(x, y\) or \(x, y, se\)"):
        accuracy_vs_wallclock({"a": [(1.0,)]})


def test_rp_fig1a_draws_each_deciles_se_in_percent():
    curves = {"rp_skip": [1.0] + [0.2] * 8 + [1.0], "flt": [0.5] * 9 + [None]}
    ses = {"rp_skip": [0.0] + [0.09] * 8 + [0.0], "flt": [0.1] * 9 + [None]}
    fig = decile_curves(curves, title="niah_multikey_2 at 1024 tokens", ses=ses)
    ax = fig.axes[0]
    bars = half_lengths(ax)
    assert bars["rp_skip"] == pytest.approx([0.0] + [9.0] * 8 + [0.0])
    assert bars["flt"][:9] == pytest.approx([10.0] * 9)
    assert "±1 SE" in ax.get_ylabel()
    assert ax.get_ylim()[0] <= 0 and ax.get_ylim()[1] >= 100
    plt.close(fig)
    fig = decile_curves(curves)  # no SEs: no bars, the label says nothing about them
    assert all(not v > 0 for b in half_lengths(fig.axes[0]).values() for v in b)  # 0, or NaN without a value
    assert fig.axes[0].get_ylabel() == "accuracy (%)"
    plt.close(fig)


def test_accuracy_vs_length_keeps_30_lines_apart_and_its_legend_off_the_axes():
    """CD-Tab2 draws 3 tasks x 10 checkpoints: every line is told apart and the legend covers none of them."""
    series = {f"arm{a} MH-{t}": {256: 0.0, 512: 2.0 * a, 1024: float(t)} for a in range(10) for t in (2, 3, 4)}
    fig = accuracy_vs_length(series, title="multi-hop", marks=(256, 1024))
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    lines = [ln for ln in ax.get_lines() if not ln.get_label().startswith("_")]
    assert len(lines) == 30
    styles = {(tuple(round(c, 6) for c in ln.get_color()), ln.get_linestyle()) for ln in lines}
    assert len(styles) == 30  # no two lines share a colour and a style
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == list(series)
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1  # beside the axes
    plt.close(fig)
