"""LR-Fig3 (repro.plotting.token_analysis) at the tiny profile's shape: eight tags over 16 position bins (the five
tags of the paper's claim plus the three most frequent), legend beside the axes, dotted lines named in it."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from repro.claims.longrecipe import FIG3_OTHERS, FIG3_TAG  # noqa: E402
from repro.figure_rules import figure_problems, series_count  # noqa: E402
from repro.plotting.token_analysis import change_by_position_figure, pos_frequency_figure  # noqa: E402

# shares among all tokens of the committed tiny LR-Fig3.csv
BASE = {"NOUN": 0.2338, "PROPN": 0.1102, "VERB": 0.1242, "PUNCT": 0.1132, "ADJ": 0.0712, "SPACE": 0.0945,
        "NUM": 0.023, "DET": 0.0582, "ADP": 0.0467, "X": 0.0163, "AUX": 0.0294, "PRON": 0.0169, "ADV": 0.0263,
        "SCONJ": 0.01, "CCONJ": 0.0127, "PART": 0.0105, "SYM": 0.0021, "INTJ": 0.001}
CLAIM = [FIG3_TAG, *FIG3_OTHERS]


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _figure(verdict="partly"):
    tags = list(BASE)
    rng = np.random.default_rng(0)
    # the NOUN and PROPN curves run high at the right, where the committed legend covered them
    freq = np.array([BASE[t] * (1 + 0.4 * rng.standard_normal(16)) + (0.08 if t in ("NOUN", "PROPN") else 0)
                     for t in tags]).clip(0)
    show = list(dict.fromkeys(CLAIM + ["NOUN", "PROPN", "VERB"]))
    return pos_frequency_figure(tags, freq, np.linspace(0, 1024, 17), show, BASE,
                                title="LR-Fig3: NUM above PRON, AUX, CCONJ and ADP", verdict=verdict,
                                claim_tags=CLAIM, subtitle="tiny profile"), freq


def test_lr_fig3_keeps_the_rules_at_the_tiny_shape():
    fig, _ = _figure()
    assert figure_problems(fig) == []
    ax = fig.axes[0]
    assert series_count(ax) == 8
    assert ax.get_title().splitlines()[0] == "LR-Fig3: NUM above PRON, AUX, CCONJ and ADP: partly"


def test_lr_fig3_legend_names_the_dotted_lines_and_the_context_tags():
    fig, _ = _figure()
    ax = fig.axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[:5] == CLAIM and "NOUN (context)" in labels
    assert any(lab.startswith("dotted") for lab in labels)
    dotted = [ln for ln in ax.lines if ln.get_linestyle() == ":"]
    assert sorted(round(float(ln.get_ydata()[0]), 4) for ln in dotted) == sorted(BASE[t] for t in
                                                                                 CLAIM + ["NOUN", "PROPN", "VERB"])
    widths = {ln.get_label(): ln.get_linewidth() for ln in ax.lines if ln.get_linestyle() != ":"}
    assert widths["NUM"] > widths["PRON"] > widths["NOUN (context)"]


def test_lr_fig3_draws_the_frequencies_it_is_given():
    fig, freq = _figure()
    ax = fig.axes[0]
    num = next(ln for ln in ax.lines if ln.get_label() == "NUM")
    assert np.allclose(num.get_ydata(), freq[list(BASE).index("NUM")])


def test_change_by_position_legend_is_beside_the_axes():
    rng = np.random.default_rng(1)
    changes = rng.random((4, 64))
    fig = change_by_position_figure(changes, changes > 0.8, 8, title="|logit change| by position")
    assert figure_problems(fig) == []
