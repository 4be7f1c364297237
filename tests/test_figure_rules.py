"""The figure rules (repro.figure_rules) on figures built to break one rule each, and on ones that keep them."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from repro.figures import Recorder  # noqa: E402
from repro.figure_rules import MAX_SERIES, errorbar_halfwidths, figure_problems, series_count  # noqa: E402
from repro.reports.index_check import check_index, rules_coverage  # noqa: E402


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _titled(n_lines=1, legend=None):
    fig, ax = plt.subplots()
    for i in range(n_lines):
        ax.plot([0, 1, 2], [i, i + 1, i], label=f"arm {i}")
    ax.set_title("claim: verdict")
    if legend is not None:
        ax.legend(**legend)
    return fig, ax


def test_a_figure_keeping_every_rule_has_no_problems():
    fig, ax = _titled(MAX_SERIES, legend={"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)})
    ax.axhline(0.5, color="k", ls="--")  # a reference line is not a series
    assert series_count(ax) == MAX_SERIES
    assert figure_problems(fig) == []


def test_more_series_than_allowed_is_named_with_the_count():
    fig, _ = _titled(MAX_SERIES + 1, legend={"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)})
    assert figure_problems(fig) == [f"axes 0 ('claim: verdict'): {MAX_SERIES + 1} series; allowed: at most "
                                    f"{MAX_SERIES} per axes"]


def test_step_histograms_and_scatter_sets_count_as_series():
    fig, ax = plt.subplots()
    for i in range(MAX_SERIES):
        ax.stairs([1, 2, 1], [0, 1, 2, 3], label=f"h{i}")
    ax.scatter([0, 1], [1, 2])
    assert series_count(ax) == MAX_SERIES + 1


def test_a_legend_over_the_data_is_a_problem_and_one_beside_is_not():
    fig, _ = _titled(2, legend={"loc": "center"})
    assert figure_problems(fig) == ["legend of axes 0 lies over the data area of axes 0; allowed: beside or below "
                                    "the axes"]
    fig, ax = _titled(2)
    fig.legend(*ax.get_legend_handles_labels(), loc="lower center", ncol=2, bbox_to_anchor=(0.5, -0.12))
    assert figure_problems(fig) == []


def test_a_heat_map_needs_a_colour_bar():
    fig, ax = plt.subplots()
    im = ax.imshow(np.eye(3))
    ax.set_title("t")
    assert figure_problems(fig) == ["axes 0 ('t'): a heat map without a colour bar"]
    fig.colorbar(im, ax=ax)
    assert figure_problems(fig) == []
    fig, axes = plt.subplots(1, 3)
    ims = [a.imshow(np.eye(3), vmin=0, vmax=1, cmap="viridis") for a in axes[:2]]
    axes[2].imshow(np.eye(3), vmin=0, vmax=100, cmap="viridis")  # another scale: the shared bar does not read it
    fig.colorbar(ims[1], ax=list(axes))
    fig.suptitle("t")
    assert figure_problems(fig) == ["axes 2: a heat map without a colour bar"]


def test_bars_on_a_log_axis_are_a_problem():
    fig, ax = plt.subplots()
    ax.bar([0, 1], [0.007, 1.1])
    ax.bar([0, 1], [0.5, 0.6])  # two bar groups on the axes: one problem
    ax.set_yscale("log")
    fig.suptitle("t")
    assert figure_problems(fig) == ["axes 0: bars on a log value axis; allowed: linear"]


def test_an_untitled_figure_is_a_problem():
    fig, ax = plt.subplots()
    ax.plot([0, 1], [0, 1])
    assert figure_problems(fig) == ["no title; allowed: a title that states the claim"]


def test_error_bar_half_widths_are_read_back_as_drawn():
    fig, ax = plt.subplots()
    ax.errorbar([1, 2, 3], [10.0, 20.0, 30.0], yerr=[0.5, 0.0, 2.25], label="skip")
    got = errorbar_halfwidths(ax)["skip"]
    assert got == [(1.0, 10.0, 0.5), (2.0, 20.0, 0.0), (3.0, 30.0, 2.25)]


def test_the_recorder_records_each_figures_problems_and_the_index_check_reports_them(tmp_path):
    rec = Recorder(tmp_path, "smoke", run="r1", commit="abc")
    good, _ = _titled(1, legend={"loc": "upper left", "bbox_to_anchor": (1.02, 1.0)})
    rec.figure(good, "LR-Fig2", name="LR-Fig2-good")
    bad, _ = _titled(1, legend={"loc": "center"})
    rec.figure(bad, "LR-Fig2", name="LR-Fig2-bad")
    index = __import__("json").loads((tmp_path / "index.json").read_text())
    assert index["LR-Fig2"]["rules"] == {"LR-Fig2-bad": [
        "legend of axes 0 lies over the data area of axes 0; allowed: beside or below the axes"], "LR-Fig2-good": []}
    assert [q for q in check_index(index) if "figure" in q] == [
        "LR-Fig2: figure LR-Fig2-bad: legend of axes 0 lies over the data area of axes 0; allowed: beside or below "
        "the axes"]
    assert rules_coverage(index) == (2, 2)
    assert rules_coverage({"X": {"files": ["X.png", "X.csv"]}}) == (0, 1)
