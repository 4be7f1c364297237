import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.plotting.ig_scores import TYPES, fr_vs_ig_figure, sweep_figure  # noqa: E402
from tests.plotting.artists import half_lengths  # noqa: E402


def _rows(with_se: bool = True):
    """Two lrs whose curves differ by 0.0004 with SEs of 0.005: the axis must show the noise, not the gap."""
    rows = []
    for lr, after in ((1.0, 0.0206), (10.0, 0.0202)):
        r = {"lr": lr, "before": 0.0204, "after_denoising": after, "after_emphasizing": after - 0.0001}
        if with_se:
            r.update(before_se=0.005, after_denoising_se=0.004, after_emphasizing_se=0.003)
        rows.append(r)
    return rows


def test_cd_fig8_draws_each_means_se_and_the_axis_holds_it():
    fig = sweep_figure(_rows(), title="CD-Fig8")
    ax = fig.axes[0]
    assert half_lengths(ax) == {"before": [0.005, 0.005], "after denoising": [0.004, 0.004],
                                "after emphasizing": [0.003, 0.003]}
    lo, hi = ax.get_ylim()
    assert lo <= 0.0204 - 0.005 and hi >= 0.0206 + 0.004
    assert "±1 SE over samples" in ax.get_ylabel()
    plt.close(fig)


def test_cd_fig8_on_records_without_ses_says_so():
    fig = sweep_figure(_rows(with_se=False))
    ax = fig.axes[0]
    assert all(v == 0.0 for b in half_lengths(ax).values() for v in b)
    assert "no SE in these records" in ax.get_ylabel()
    plt.close(fig)


def test_cd_fig3_panels_carry_their_counts_and_se_bars():
    scores = {"FR (all heads)": {t: (0.25, 0.01) for t in TYPES}, "IG (Eq. 1)": {t: (0.25, 0.02) for t in TYPES}}
    fig = fr_vs_ig_figure({"correct": scores, "wrong": scores}, title="CD-Fig3", counts={"correct": 36, "wrong": 12})
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["correct answers (n = 36)", "wrong answers (n = 12)"]
    bars = half_lengths(fig.axes[0])
    assert sorted(bars.values()) == [[pytest.approx(0.01)] * 4, [pytest.approx(0.02)] * 4]
    assert "±1 SE" in fig.axes[0].get_ylabel()
    plt.close(fig)
