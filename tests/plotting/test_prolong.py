import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.container import ErrorbarContainer  # noqa: E402

from repro.plotting.prolong import ppl_vs_downstream, share_curves  # noqa: E402
from repro.figure_rules import errorbar_halfwidths, figure_problems  # noqa: E402
from repro.reports import prolong as plr  # noqa: E402
from tests.reports.test_prolong import P, SHARES, _ppl, _suite, paired_se  # noqa: E402
from tests.plotting.artists import half_lengths  # noqa: E402

TINY = ((0, "pl_long0", 32.4, 1.13, 35.0, 1.4, 26.28, 0.41), (20, "pl_long20", 32.7, 1.12, 33.6, 1.5, 26.14, 0.40),
        (40, "pl_long40", 32.3, 1.12, 34.2, 1.3, 25.37, 0.39), (60, "prolong", 32.0, None, 34.3, None, 25.52, None),
        (80, "pl_long80", 32.7, 1.07, 32.6, 1.6, 26.11, 0.40), (100, "pl_long100", 32.1, 1.15, 33.3, 1.4, 26.31, 0.52))
"""The tiny run's six shares (figures/PL-Fig3.csv): share, arm, downstream and its paired SE to 60%, short and its
SE, perplexity and its SE; the recipe has none (it is the reference). 20% and 80% nearly coincide."""


def _points(recall: float | None = 0.0):
    return [{"arm": arm, "long_share": share, "replicates": 3 if arm == "prolong" else 1,
             "long": lo, "long_se": 4.0, "long_pse": lo_se, "recall": recall, "recall_se": None, "recall_pse": None,
             "short": sh, "short_se": 2.0, "short_pse": sh_se, "ppl": ppl, "ppl_se": 6.5, "ppl_pse": ppl_se}
            for share, arm, lo, lo_se, sh, sh_se, ppl, ppl_se in TINY]


def _bars(ax, axis="y") -> list[float]:
    (bars,) = half_lengths(ax, axis).values()
    return bars


def test_share_curves_draw_the_paired_se_to_the_recipe_and_keep_the_rules():
    fig = share_curves(_points(), title="PL-Fig3: 60% long is best: tie within noise")
    assert figure_problems(fig) == []
    down, short, ppl = fig.axes
    assert _bars(down) == [1.13, 1.12, 1.12, 0.0, 1.07, 1.15]  # the paired SE, not the point SE (4.0); 60%: none
    assert _bars(short) == [1.4, 1.5, 1.3, 0.0, 1.6, 1.4]
    assert _bars(ppl) == [0.41, 0.40, 0.39, 0.0, 0.40, 0.52]  # not the ±6.5 of a point over documents
    lo, hi = ppl.get_ylim()
    assert lo <= 25.37 - 0.39 and hi >= 26.31 + 0.52 and hi - lo < 3  # the tie can be read: no ±6.5 bars
    assert "recall" in fig.get_supxlabel() and "0 at every share" in fig.get_supxlabel()
    assert [ax.get_title() for ax in fig.axes if "recall" in ax.get_title()] == []  # the all-zero line is gone
    assert "paired" in fig.get_supxlabel()
    plt.close(fig)


def test_share_curves_give_a_measured_recall_its_own_panel():
    pts = _points(recall=20.0)
    pts[0]["recall"] = 35.0
    fig = share_curves(pts, title="t")
    assert [ax.get_title() for ax in fig.axes][1].startswith("recall")
    assert figure_problems(fig) == []
    plt.close(fig)


def test_share_curves_refuse_no_points():
    with pytest.raises(ValueError, match="at least one long-share arm"):
        share_curves([])


def test_ppl_vs_downstream_has_the_paired_bars_on_both_axes_and_keeps_20_and_80_apart():
    fig = ppl_vs_downstream(_points(), title="PL-Fig1: more long data lowers perplexity, not downstream: tie")
    assert figure_problems(fig) == []
    ax = fig.axes[0]
    (bars,) = [c for c in ax.containers if isinstance(c, ErrorbarContainer)]
    xbars, ybars = bars.lines[2]  # matplotlib draws the x bars first
    assert [round(abs(s[1][0] - s[0][0]) / 2, 9) for s in xbars.get_segments()] == [0.41, 0.40, 0.39, 0.0, 0.40, 0.52]
    assert [round(abs(s[1][1] - s[0][1]) / 2, 9) for s in ybars.get_segments()] == [1.13, 1.12, 1.12, 0.0, 1.07, 1.15]
    assert errorbar_halfwidths(ax)["_bars"][1] == pytest.approx((26.14, 32.7, 1.12))
    shares = {c.get_label(): c for c in ax.collections if c.get_label().endswith(("long", "(recipe)"))}
    assert list(shares) == ["0% long", "20% long", "40% long", "60% long (recipe)", "80% long", "100% long"]
    p20, p80 = shares["20% long"], shares["80% long"]
    assert p20.get_paths()[0] != p80.get_paths()[0] or p20.get_sizes()[0] != p80.get_sizes()[0]
    assert p20.get_sizes()[0] > p80.get_sizes()[0]  # the earlier share drawn larger: the later nests inside it
    assert all(len(c.get_facecolor()) == 0 or c.get_facecolor()[0][3] == 0 for c in shares.values())  # hollow
    assert not [t for t in ax.texts if t.get_text()]  # no text placed beside the points
    plt.close(fig)


def test_the_drawn_bars_are_the_verdicts_paired_se_and_the_tables_se_columns():
    """End to end on hand-built records (tests.reports.test_prolong): each share's bar is the SE the headline tested
    for its claim against 60% (PL-Fig3: downstream; PL-Fig1: the loss gap's SE times the perplexity), and the
    table prints it; the recipe has none."""
    suite = _suite(SHARES)
    ppl = _ppl({"pl_long0": 3.0, "pl_long20": 2.9, "pl_long40": 2.8, "prolong": 2.7, "pl_long80": 2.6,
                "pl_long100": 2.5}, {"prolong": "b"})
    pts = plr.share_points(suite, ppl, P)
    fig3, fig1 = plr.pl_fig3(suite, ppl, P), plr.pl_fig1(suite, ppl, P)
    tested = {c["b"]: c["se"] for c in fig3.claims}  # prolong > pl_longX: the SE of each share's gap to 60%
    by_arm = {x["arm"]: x for x in pts}
    assert {a: by_arm[a]["long_pse"] for a in tested} == pytest.approx(tested)
    assert by_arm["pl_long0"]["long_pse"] == pytest.approx(paired_se(SHARES["pl_long0"], SHARES["prolong"]), rel=0.1)
    assert by_arm["prolong"]["long_pse"] is None
    (loss,) = [c for c in fig1.claims if c["a"].startswith("loss:")]
    assert by_arm["pl_long100"]["ppl_pse"] == pytest.approx(by_arm["pl_long100"]["ppl"] * loss["se"])
    rows = {r["arm"]: r for r in fig3.tables[0]["rows"]}
    assert rows["pl_long0"]["downstream SE vs 60% (paired)"] == round(by_arm["pl_long0"]["long_pse"], 2)
    assert rows["prolong"]["downstream SE vs 60% (paired)"] == "reference"
    row100 = next(r for r in fig1.tables[0]["rows"] if r["long share (%)"] == 100)
    assert row100["PPL SE vs 60% (paired)"] == round(by_arm["pl_long100"]["ppl_pse"], 3)
    fig = share_curves(pts, title="PL-Fig3: t")
    assert figure_problems(fig) == []
    assert _bars(fig.axes[0]) == pytest.approx([x["long_pse"] or 0.0 for x in pts])
    plt.close(fig)
    fig = ppl_vs_downstream(pts, title="PL-Fig1: t")
    assert figure_problems(fig) == []
    assert [h for _, _, h in errorbar_halfwidths(fig.axes[0])["_bars"]] == pytest.approx(
        [x["long_pse"] or 0.0 for x in pts])
    plt.close(fig)
