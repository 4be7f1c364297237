import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.plotting.prolong import ppl_vs_downstream, share_curves  # noqa: E402
from tests.plotting.artists import errorbars, half_lengths  # noqa: E402


def _points():
    """Two arms whose downstream averages differ by 0.5 points with an SE of 4 (a tie the axis must show)."""
    return [{"arm": "pl_long0", "long_share": 0, "long": 33.0, "long_se": 4.0, "recall": None, "recall_se": None,
             "short": 34.0, "short_se": 2.0, "ppl": 26.2, "ppl_se": 0.5},
            {"arm": "prolong", "long_share": 60, "long": 33.5, "long_se": 4.0, "recall": None, "recall_se": None,
             "short": 34.5, "short_se": None, "ppl": 25.6, "ppl_se": 0.4}]


def test_share_curves_draw_one_se_bars_and_show_the_band():
    fig = share_curves(_points())
    ax, bx = fig.axes
    bars = half_lengths(ax)
    assert bars["downstream (doable tasks, target)"] == [4.0, 4.0]
    assert bars["short (NIAH, base window)"] == [2.0, 0.0]  # no SE: no bar
    assert "recall" not in bars  # no recall task: not drawn
    lo, hi = ax.get_ylim()
    assert lo <= 33.0 - 4.0 and hi >= 33.5 + 4.0
    assert "±1 SE" in ax.get_ylabel() and "±1 SE" in bx.get_ylabel()
    assert list(half_lengths(bx).values()) == [[0.5, 0.4]]
    lo, hi = bx.get_ylim()
    assert lo <= 25.6 - 0.4 and hi >= 26.2 + 0.5
    plt.close(fig)


def test_ppl_vs_downstream_has_bars_on_both_axes():
    fig = ppl_vs_downstream(_points())
    ax = fig.axes[0]
    assert list(half_lengths(ax, "y").values()) == [[4.0, 4.0]]
    assert list(half_lengths(ax, "x").values()) == [[0.5, 0.4]]
    (_, lo, _), _ = next(iter(errorbars(ax).values()))
    assert ax.get_ylim()[0] <= lo
    assert "±1 SE" in ax.get_xlabel()
    plt.close(fig)


def test_share_curves_refuse_no_points():
    with pytest.raises(ValueError, match="at least one long-share arm"):
        share_curves([])


def test_ppl_vs_downstream_names_each_share_in_a_legend_not_in_overlapping_labels():
    """Two shares at the same point (as 20% and 80% nearly were in a tiny run): each keeps its own legend entry."""
    pts = _points() + [dict(_points()[0], arm="pl_long80", long_share=80)]
    fig = ppl_vs_downstream(pts)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    ax = fig.axes[0]
    assert not [t for t in ax.texts if t.get_text()]  # no text placed beside the points
    legend = ax.get_legend()
    assert [t.get_text() for t in legend.get_texts()] == ["0% long", "60% long", "80% long"]
    colours = [tuple(c.get_facecolor()[0]) for c in ax.collections if c.get_label().endswith("% long")]
    assert len(set(colours)) == 3
    assert legend.get_window_extent(renderer).x0 >= ax.get_window_extent(renderer).x1
    plt.close(fig)
