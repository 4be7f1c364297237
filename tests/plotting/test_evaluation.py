import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from repro.plotting.evaluation import (accuracy_heatmaps, accuracy_vs_length, accuracy_vs_wallclock,  # noqa: E402
                                       cd_tab2_panels, decile_curves, deciding_arms, task_heatmap)
from repro.figure_rules import errorbar_halfwidths, figure_problems, series_count  # noqa: E402
from tests.plotting.artists import errorbars, half_lengths  # noqa: E402

RP_ARMS = ("base", "flt", "rp_standard", "rp_longce", "rp_pose", "rp_cyclic", "rp_skip", "rp_skip_longce")
"""The tiny profile's RP-Fig1a arms (figures/RP-Fig1a.csv)."""
FIG1A_CLAIMS = tuple({"a": f"{a} {k}", "b": f"rp_standard {k}", "expect": e, "gap": 2.0, "se": 1.3, "outcome": "tie"}
                     for a in ("rp_skip", "rp_cyclic") for k, e in (("mean", "higher"), ("spread", "lower")))


def test_rp_fig4_draws_one_se_bars_keeps_the_rules_and_shows_the_gap_against_its_noise():
    points = {"rp_skip": [(69.2, 36.1, 1.6), (138.5, 35.1, 1.8), (207.7, 43.6, 1.6), (277.0, 44.4, 1.6)],
              "rp_standard_matched": [(128.9, 35.2, 1.7), (257.7, 36.8, 1.8), (386.6, 40.3, None)]}
    fig = accuracy_vs_wallclock(points, title="RP-Fig4: skip ahead at equal wall-clock: yes",
                                metric="RULER-doable (6 tasks)")
    assert figure_problems(fig) == []
    ax = fig.axes[0]
    assert half_lengths(ax) == {"rp_skip": [1.6, 1.8, 1.6, 1.6], "rp_standard_matched": [1.7, 1.8, 0.0]}
    assert errorbar_halfwidths(ax)["rp_skip"][0] == pytest.approx((69.2, 36.1, 1.6))
    assert [x for x, _, _ in errorbars(ax)["rp_skip"]] == [69.2, 138.5, 207.7, 277.0]
    assert ax.get_ylabel().startswith("RULER-doable (6 tasks) (%; ") and "±1 SE" in ax.get_ylabel()
    lo, hi = ax.get_ylim()
    assert lo <= 35.1 - 1.8 and hi >= 44.4 + 1.6  # every bar inside
    assert hi - lo >= 20 and lo > 0 and hi < 100  # zoomed to the data, not into its noise
    plt.close(fig)


def test_rp_fig4_takes_points_without_an_se_and_refuses_other_shapes():
    fig = accuracy_vs_wallclock({"a": [(1.0, 20.0), (2.0, 30.0)]}, title="t")
    assert half_lengths(fig.axes[0]) == {"a": [0.0, 0.0]}
    plt.close(fig)
    with pytest.raises(ValueError, match=r"point \(1.0,\); allowed: \(x, y\) or \(x, y, se\)"):
        accuracy_vs_wallclock({"a": [(1.0,)]})


def _fig1a():
    curves = {a: [0.0] * 10 for a in RP_ARMS}
    curves["rp_skip"] = [0.0, 0.067, 0.0, 0.067, 0.067, 0.0, 0.033, 0.0, 0.0, 0.0]
    curves["rp_longce"] = [0.0, 0.0, 0.0, 0.1, 0.1, 0.1, 0.0, 0.0, 0.0, None]
    ses = {a: [0.05] * 10 for a in RP_ARMS}
    ses["rp_skip"] = [0.0, 0.045, 0.0, 0.045, 0.045, 0.0, 0.033, 0.0, 0.0, 0.0]
    ses["rp_longce"] = [0.1] * 9 + [None]
    return curves, ses


def test_rp_fig1a_at_the_tiny_shape_keeps_the_rules_and_draws_each_deciles_se_in_percent():
    curves, ses = _fig1a()
    deciding = deciding_arms(FIG1A_CLAIMS)
    assert deciding == ["rp_standard", "rp_skip", "rp_cyclic"]  # the reference first
    fig = decile_curves(curves, title="RP-Fig1a: higher and flatter than Standard: tie within noise", ses=ses,
                        deciding=deciding)
    assert figure_problems(fig) == []
    main, *small = [ax for ax in fig.axes if ax.get_visible()]
    assert [t.get_text() for t in main.get_legend().get_texts()] == deciding
    assert len(small) == 5 and all(series_count(ax) <= 2 for ax in small)  # each context arm alone, + reference
    bars = half_lengths(main)
    assert bars["rp_skip"] == pytest.approx([0.0, 4.5, 0.0, 4.5, 4.5, 0.0, 3.3, 0.0, 0.0, 0.0])
    assert bars["rp_standard"] == pytest.approx([5.0] * 10)
    xs = {k: [x for x, _, _ in v] for k, v in errorbars(main).items()}
    assert len({round(v[0], 6) for v in xs.values()}) == 3  # offset along x: no bar hides another
    longce = next(ax for ax in small if ax.get_title().startswith("rp_longce"))
    assert half_lengths(longce)["rp_longce"][:9] == pytest.approx([10.0] * 9)
    assert "±1 SE" in main.get_ylabel()
    lo, hi = main.get_ylim()
    assert lo <= 0 and 10.0 + 10.0 <= hi < 40  # holds every bar, and shows the 0-10% the data lives in
    plt.close(fig)


def test_rp_fig1a_without_deciding_arms_gives_each_arm_its_panel_and_no_bars_without_ses():
    curves, _ = _fig1a()
    fig = decile_curves(curves, title="t")
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == len(RP_ARMS) and figure_problems(fig) == []
    assert all(not v > 0 for ax in axes for b in half_lengths(ax).values() for v in b)  # 0, or NaN without a value
    assert axes[0].get_ylabel() == "accuracy (%)"
    plt.close(fig)


def test_accuracy_vs_length_puts_more_than_eight_series_in_small_multiples():
    series = {f"arm{a} MH-{t}": {256: 0.0, 512: 2.0 * a, 1024: float(t)} for a in range(10) for t in (2, 3, 4)}
    fig = accuracy_vs_length(series, title="many", marks=(256, 1024))
    assert figure_problems(fig) == []
    axes = [ax for ax in fig.axes if ax.get_visible()]
    assert len(axes) == 30 and all(series_count(ax) == 1 for ax in axes)
    assert [ax.get_title() for ax in axes] == list(series)
    plt.close(fig)


def test_accuracy_vs_length_with_few_series_shares_one_axes_with_the_legend_beside_it_and_se_bars():
    series = {s: {2048: 40.0, 4096: 10.0} for s in ("none", "linear:2", "dynamic:2", "yarn:2")}
    ses = {s: {2048: 4.9, 4096: 3.0} for s in series}
    fig = accuracy_vs_length(series, title="RP-Tab4/5: scaling retrieves past the window: no", marks=(2048,), ses=ses)
    assert figure_problems(fig) == []
    ax = fig.axes[0]
    assert series_count(ax) == 4
    assert half_lengths(ax)["yarn:2"] == [4.9, 3.0]
    fig.canvas.draw()
    r = fig.canvas.get_renderer()
    assert ax.get_legend().get_window_extent(r).x0 >= ax.get_window_extent(r).x1
    plt.close(fig)


def test_cd_tab2_panels_draw_ruler_by_length_and_each_claims_gap_with_the_verdicts_se():
    """The tiny shape: base plus the three compared arms; the six claims of CD-Tab2's headline."""
    by_length = {"base": {256: 62.9, 512: 11.1, 1024: 0.4, 2048: 0.0}, "rp_standard": {512: 48.8, 1024: 44.1},
                 "rp_longce": {512: 44.1, 1024: 41.8}, "cdt": {512: 47.8, 1024: 42.9}}
    claims = [{"a": f"cdt: {m}", "b": f"{b}: {m}", "expect": "lower" if m == "LongPPL" else "higher", "gap": g,
               "se": s, "outcome": "tie"}
              for m, rows in (("RULER-13", ((-0.50, 0.67), (0.07, 1.20))), ("LongPPL", ((0.33, 0.31), (-1.93, 2.17))),
                              ("BABILong", ((0.0, 0.22), (0.0, 0.35))))
              for b, (g, s) in zip(("rp_standard", "rp_longce"), rows)]
    fig = cd_tab2_panels(by_length, claims, title="CD-Tab2: CDT beats CE and LongCE: tie within noise",
                         deciding=("cdt", "rp_standard", "rp_longce"), marks=(256, 1024),
                         units={"LongPPL": "perplexity"})
    assert figure_problems(fig) == []
    left, *gaps = fig.axes
    assert [t.get_text() for t in left.get_legend().get_texts()] == ["cdt", "rp_standard", "rp_longce",
                                                                     "base (context)"]
    assert left.get_ylim()[1] > 62.9  # RULER's values are on the axis, not at the floor
    assert [ax.get_title() for ax in gaps] == ["RULER-13", "LongPPL", "BABILong"]
    for ax, m in zip(gaps, ("RULER-13", "LongPPL", "BABILong")):
        want = {f"{c['a']} - {c['b']}": [(0.0 if i == 0 else 1.0, c["gap"], c["se"])]
                for i, c in enumerate(c for c in claims if c["a"] == f"cdt: {m}")}
        got = errorbar_halfwidths(ax)
        assert got.keys() == want.keys()
        for k in want:
            assert got[k] == [pytest.approx(v) for v in want[k]]
    assert "perplexity" in gaps[1].get_ylabel() and "lower" in gaps[1].get_xlabel()
    plt.close(fig)


def test_heat_maps_keep_the_rules_and_bold_the_compared_arms():
    tables = {n: {(L, d): 0.5 for L in (256, 512, 1024, 2048) for d in (0.0, 0.5, 1.0)} for n in ("base", "flt")}
    fig = accuracy_heatmaps(tables, title="TB-NIAH: FLT retrieves at the target: yes",
                            marks={"base": 256, "flt": 1024})
    assert figure_problems(fig) == []
    assert "window 1024" in fig.axes[1].get_title()
    plt.close(fig)
    values = {n: {"S-1": 90.0, "MK-2": None, "pos-last": 20.0} for n in RP_ARMS}
    fig = task_heatmap(values, title="RP-Tab1/2: beats Standard: tie within noise", flags={"MK-2": False},
                       emphasise=("rp_standard", "rp_skip", "rp_cyclic"))
    assert figure_problems(fig) == []
    bold = [t.get_text() for t in fig.axes[0].get_yticklabels() if t.get_fontweight() == "bold"]
    assert bold == ["rp_standard", "rp_cyclic", "rp_skip"]
    plt.close(fig)
