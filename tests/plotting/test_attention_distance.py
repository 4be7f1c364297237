"""RP-Fig2's figure at the tiny profile's shape (six models, three layers): it keeps the figure rules, every panel
says what it shows, the share panel draws the table's SE over texts, the deciding arms stand out; and CD-Fig14's key
chunks come from the map's own prompts."""

from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.patches import StepPatch  # noqa: E402

from repro.plotting.attention_distance import distance_figure  # noqa: E402
from repro.figure_rules import errorbar_halfwidths, figure_problems, series_count  # noqa: E402
from repro.profiles import get_profile  # noqa: E402
from repro.reports.attention import BASELINES, key_share_beyond, rp_fig2  # noqa: E402
from repro.reports.selfdistill import RP_METHODS  # noqa: E402

TINY = get_profile("tiny")
MODELS = ("base", "flt", "rp_standard", "rp_pose", "rp_skip", "rp_cyclic")
DECIDING = (BASELINES[0], *RP_METHODS)


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _record(seed: int, layers: int = 3, length: int = 1024, texts: int = 8) -> dict:
    """One model's attention-distance record as stages.attention writes it (the fields the report and figure read)."""
    rng = np.random.default_rng(seed)
    edges = np.linspace(0, length, 33).tolist()
    out = []
    for k in range(layers):
        per_text = rng.uniform(0.3, 0.6, texts).tolist()
        counts = rng.integers(50, 20_000, 32)
        out.append({"layer": k, "counts": counts.tolist(), "mass": (counts / counts.sum()).tolist(), "edges": edges,
                    "rows": 64 * texts, "entries": int(counts.sum()), "entries_per_row": counts.sum() / (64 * texts),
                    "mean_distance": 400.0, "weighted_mean_distance": 300.0, "far_share": float(np.mean(per_text)),
                    "far_mass_share": rng.uniform(0.1, 0.5),
                    "per_sample": {"far_share": per_text, "far_mass_share": rng.uniform(0.1, 0.5, texts).tolist()}})
    return {"far": 0.5, "length": length, "queries": 64, "threshold": 1e-3, "samples": texts, "layers": out}


def _records(layers: int = 3) -> dict:
    return {m: _record(k, layers) for k, m in enumerate(MODELS)}


def test_rp_fig2_keeps_the_rules_and_every_panel_says_what_it_shows():
    records = _records()
    rep = rp_fig2(records, {}, TINY)
    fig = distance_figure(records, title=f"RP-Fig2: claim: {rep.agrees}", note="setup", emphasis=DECIDING)
    assert figure_problems(fig) == []
    shown = [ax for ax in fig.axes if ax.axison]
    assert [ax.get_title() for ax in shown] == [*(f"layer {k} (dotted: 0.5 T)" for k in range(3)),
                                                "entries beyond 0.5 T (dashed: key positions)",
                                                "attention mass beyond 0.5 T"]
    assert all(ax.get_ylabel() for ax in shown)  # the summary panels too (the old fourth panel had none)
    assert [sum(isinstance(a, StepPatch) for a in ax.patches) for ax in shown[:3]] == [len(MODELS)] * 3
    assert [series_count(ax) for ax in shown[3:]] == [len(MODELS)] * 2
    assert len(fig.legends) == 1  # one legend for every panel, below them
    assert [t.get_text() for t in fig.legends[0].get_texts()] == [*DECIDING, "base", "flt", "rp_pose"]


def test_rp_fig2_share_panel_draws_the_tables_se_over_texts_and_the_blind_reference():
    records = _records()
    rep = rp_fig2(records, {}, TINY)
    fig = distance_figure(records, title="RP-Fig2", emphasis=DECIDING)
    share = [ax for ax in fig.axes if ax.get_title().startswith("entries beyond")][0]
    table = {(r["model"], r["layer"]): r for r in rep.tables[0]["rows"] if r["model"] in records}
    drawn = errorbar_halfwidths(share)
    for m in MODELS:
        assert [x for x, _, _ in drawn[m]] == [0, 1, 2]
        assert [h for _, _, h in drawn[m]] == pytest.approx([table[(m, k)]["SE over texts"] for k in range(3)],
                                                            abs=5e-4)
        assert [y for _, y, _ in drawn[m]] == pytest.approx([table[(m, k)]["share beyond far"] for k in range(3)],
                                                            abs=5e-4)
    blind = key_share_beyond(1024, 64, 0.5)
    assert any(list(ln.get_ydata()) == [blind, blind] for ln in share.lines)


def test_rp_fig2_draws_the_deciding_arms_strong_and_on_top():
    fig = distance_figure(_records(), title="RP-Fig2", emphasis=DECIDING)
    mass = [ax for ax in fig.axes if ax.get_title().startswith("attention mass")][0]
    steps = {p.get_label(): p for p in fig.axes[0].patches if isinstance(p, StepPatch)}
    for drawn in ({ln.get_label(): ln for ln in mass.lines}, steps):
        for arm in DECIDING:
            for context in ("base", "flt", "rp_pose"):
                assert drawn[arm].get_linewidth() > drawn[context].get_linewidth()
                assert drawn[arm].get_zorder() > drawn[context].get_zorder()


def test_rp_fig2_at_the_smoke_shape_one_layer_keeps_the_rules():
    records = {m: _record(k, layers=1, length=384, texts=3) for k, m in enumerate(MODELS)}
    fig = distance_figure(records, title="RP-Fig2: claim: tie within noise", emphasis=DECIDING)
    assert figure_problems(fig) == []
    assert sum(ax.axison for ax in fig.axes) == 3


def test_rp_fig2_of_the_pretrained_base_alone_draws_it_strong():
    fig = distance_figure({"base": _record(0)}, title="RP-Fig2: n/a", emphasis=DECIDING)
    assert figure_problems(fig) == []
    mass = [ax for ax in fig.axes if ax.get_title().startswith("attention mass")][0]
    assert mass.lines[0].get_color() == "#111111" and mass.lines[0].get_linewidth() == 1.4


def test_cd_fig14_key_chunks_are_the_chunks_holding_supporting_or_interference_tokens():
    from repro.stages.cdt_analysis import _key_chunks  # loads torch: only here

    types = ["irrelevant"] * 40
    types[3] = "supporting"  # chunk 0 of 4 (tokens 0..9)
    types[25] = "interference"  # chunk 2 (20..29)
    types[35] = "low_frequency"  # not critical
    sample = SimpleNamespace(prompt_tokens=40, types=tuple(types) + ("answer",) * 3)
    assert _key_chunks(sample, 4).tolist() == [True, False, True, False]
