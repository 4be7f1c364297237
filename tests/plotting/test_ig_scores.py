"""The IG-scores figures (CD-Fig3/4/5/7/8/10, CD-Mem) and CDT's chunk map (CD-Fig14) at the tiny profile's shape:
each keeps the figure rules, draws the SEs of its report's table, and shows what its claim needs."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.image import AxesImage  # noqa: E402

from repro.plotting.ig_scores import (TYPES, chunk_map_figure, denoising_figure, detection_figure,  # noqa: E402
                                      em_curve_figure, fr_vs_ig_figure, ig_vs_grad_figure, memory_figure,
                                      sweep_figure)
from repro.figure_rules import errorbar_halfwidths, figure_problems  # noqa: E402
from repro.profiles import get_profile  # noqa: E402
from repro.reports.cdt_analysis import cd_fig4  # noqa: E402
from repro.reports.cdt_effects import cd_fig8, cd_fig10, cd_fig14  # noqa: E402
from tests.plotting.artists import half_lengths  # noqa: E402

TINY = get_profile("tiny")


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _se_of(cell: str) -> float:
    """The SE of a table cell ``"mean ± se"``."""
    return float(cell.split("±")[1])


# -- CD-Fig8 -------------------------------------------------------------------------------------------------
def _rows(with_se: bool = True):
    """The tiny sweep's six lrs; the attention curves differ by less than their SEs; the gains carry paired SEs."""
    rows = []
    for k, (lr, gain) in enumerate(zip((0.1, 1.0, 3.0, 10.0, 30.0, 100.0), (0.001, 0.011, 0.022, -0.010, -0.111,
                                                                             -0.267))):
        after = 0.0204 * (1 + gain)
        r = {"lr": lr, "before": 0.0204, "after_denoising": after, "after_emphasizing": after - 0.0001,
             "irrelevant_before": 0.0084, "irrelevant_after_denoising": 0.0085, "noise_fraction": 0.73,
             "gain": gain, "gain_se": 0.004 + 0.003 * k, "emphasis_gain": -0.005, "emphasis_gain_se": 0.002}
        if with_se:
            r.update(before_se=0.005, after_denoising_se=0.004, after_emphasizing_se=0.003)
        rows.append(r)
    return rows


def test_cd_fig8_draws_the_tables_gain_ses_on_a_linear_axis_around_zero():
    rows = _rows()
    rep = cd_fig8(rows, TINY)
    table = rep.tables[0]["rows"]
    fig = sweep_figure(rows, title=f"CD-Fig8: claim: {rep.agrees}")
    assert figure_problems(fig) == []
    gains = fig.axes[0]
    assert gains.get_yscale() == "linear"
    drawn = errorbar_halfwidths(gains)["after denoising (vs before)"]
    # the figure is in percent, the table in fractions (3 decimals)
    assert [h / 100 for _, _, h in drawn] == pytest.approx([_se_of(r["gain after denoising (mean ± SE over samples)"])
                                                            for r in table], abs=5e-4)
    assert [h / 100 for _, _, h in drawn] == pytest.approx([r["gain_se"] for r in rows])
    assert [h / 100 for _, _, h in errorbar_halfwidths(gains)["after emphasizing (vs after denoising)"]] == \
        pytest.approx([0.002] * 6)
    lo, hi = gains.get_ylim()
    assert lo <= 100 * (-0.267 - 0.019) and hi >= 100 * (0.022 + 0.010)
    assert any(list(ln.get_ydata()) == [0.0, 0.0] for ln in gains.lines)  # the reference 0


def test_cd_fig8_attention_panel_draws_each_means_se_and_the_axis_holds_it():
    fig = sweep_figure(_rows(), title="CD-Fig8")
    ax = fig.axes[1]
    assert half_lengths(ax) == {"before": [0.005] * 6, "after denoising": [0.004] * 6,
                                "after emphasizing": [0.003] * 6}
    lo, hi = ax.get_ylim()
    assert lo <= 0.0204 * (1 - 0.267) - 0.004 and hi >= 0.0204 + 0.005
    assert "±1 SE over samples" in ax.get_ylabel()


def test_cd_fig8_on_records_without_ses_says_so():
    fig = sweep_figure(_rows(with_se=False))
    ax = fig.axes[1]
    assert all(v == 0.0 for b in half_lengths(ax).values() for v in b)
    assert "no SE in these records" in ax.get_ylabel()


# -- CD-Fig3 -------------------------------------------------------------------------------------------------
def test_cd_fig3_panels_carry_their_counts_and_se_bars_and_mute_the_context_scores():
    scores = {"FR (all heads)": {t: (0.25, 0.01) for t in TYPES}, "FR (top heads)": {t: (0.25, 0.03) for t in TYPES},
              "IG (Eq. 1)": {t: (0.25, 0.02) for t in TYPES},
              "embedding-grad L1 (authors' proxy)": {t: (0.25, 0.04) for t in TYPES}}
    fig = fr_vs_ig_figure({"correct": scores, "wrong": scores}, title="CD-Fig3: claim: yes",
                          counts={"correct": 36, "wrong": 12})
    assert figure_problems(fig) == []
    titles = [ax.get_title() for ax in fig.axes]
    assert titles == ["correct answers (n = 36)", "wrong answers (n = 12)"]
    bars = half_lengths(fig.axes[0])
    assert sorted(bars.values()) == [[pytest.approx(s)] * 4 for s in (0.01, 0.02, 0.03, 0.04)]
    assert "±1 SE" in fig.axes[0].get_ylabel()
    hatched = {c.get_label(): c.patches[0].get_hatch() for c in fig.axes[0].containers if hasattr(c, "patches")}
    assert hatched == {"FR (all heads)": None, "IG (Eq. 1)": None, "FR (top heads)": "//",
                       "embedding-grad L1 (authors' proxy)": "//"}
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == list(scores)


def test_cd_fig3_with_no_right_answers_still_holds_the_wrong_answers_bars():
    """The smoke run's shape: every answer wrong, so the right answers' panel has no values (NaN)."""
    empty = {s: {t: (float("nan"), float("nan")) for t in TYPES} for s in ("FR (all heads)", "IG (Eq. 1)")}
    wrong = {"FR (all heads)": {t: (0.25, 0.02) for t in TYPES}, "IG (Eq. 1)": {t: (0.6, 0.05) for t in TYPES}}
    fig = fr_vs_ig_figure({"correct": empty, "wrong": wrong}, title="CD-Fig3: n/a", counts={"correct": 0, "wrong": 4})
    assert figure_problems(fig) == []
    lo, hi = fig.axes[1].get_ylim()
    assert lo == 0.0 and hi >= 0.65


# -- CD-Fig4 -------------------------------------------------------------------------------------------------
def _manual(n: int = 12):
    rng = np.random.default_rng(4)
    base = {"supporting": 0.029, "interference": 0.012, "irrelevant": 0.0084, "low_frequency": 0.0085}
    change = {"supporting": 0.96, "interference": 0.94, "irrelevant": 1.10, "low_frequency": 1.05}
    out = []
    for _ in range(n):
        before = {t: v * rng.uniform(0.8, 1.2) for t, v in base.items()}
        out.append({"before": before, "after": {t: before[t] * change[t] * rng.uniform(0.9, 1.1) for t in TYPES},
                    "noise_tokens": 700, "context_tokens": 960})
    return out


def test_cd_fig4_draws_the_ratios_on_a_linear_axis_with_the_tables_se_and_names_the_step():
    data, rep = cd_fig4(_manual(), TINY, 3.0)
    fig = denoising_figure(data, title=f"CD-Fig4: claim: {rep.agrees}", step_note="the step: -3 x dL/dE once")
    assert figure_problems(fig) == []
    ratio, paired = fig.axes[:2]
    assert ratio.get_yscale() == paired.get_yscale() == "linear"
    drawn = [errorbar_halfwidths(ratio)[t.replace("_", "-")][0][2] for t in TYPES]
    table = {r["type"]: r for r in rep.tables[0]["rows"]}
    assert drawn == pytest.approx([_se_of(table[t]["after / before"]) for t in TYPES], abs=5e-4)
    assert drawn == pytest.approx([data[t]["ratio"][1] for t in TYPES])
    lo, hi = ratio.get_ylim()
    assert lo < 1.0 < hi and hi - lo < 1.0  # 0.94x and 1.10x read as what they are, around 1
    assert paired.get_ylim()[0] == 0.0
    assert "the step: -3 x dL/dE once" in fig._suptitle.get_text()


# -- CD-Fig5, CD-Fig7 -----------------------------------------------------------------------------------------
def test_cd_fig5_keeps_the_rules_with_the_legend_beside_the_scatter():
    rng = np.random.default_rng(5)
    types = rng.choice(TYPES, 4000, p=[0.12, 0.17, 0.65, 0.06])
    grad = 10 ** rng.uniform(-5, 1, 4000)
    fig = ig_vs_grad_figure({"types": types, "grad": grad, "ig": grad * 1e-2}, title="CD-Fig5: claim: yes")
    assert figure_problems(fig) == []
    labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert labels == [f"{t.replace('_', '-')} ({int((types == t).sum())})"
                      for t in ("irrelevant", "low_frequency", "interference", "supporting")]


def test_cd_fig7_draws_each_detectors_se_with_cdts_detector_first():
    data = {d: {t: (0.1 + 0.1 * k, 0.005 * (k + 1)) for t in TYPES} for k, d in
            enumerate(("attention", "gradient", "longppl"))}
    fig = detection_figure(data, title="CD-Fig7: claim: partly")
    assert figure_problems(fig) == []
    ax = fig.axes[0]
    bars = [c for c in ax.containers if hasattr(c, "patches")]
    assert [c.get_label() for c in bars] == ["embedding gradient (CDT)", "attention", "LongPPL gap"]
    assert sorted(half_lengths(ax).values()) == [[pytest.approx(s)] * 4 for s in (0.005, 0.01, 0.015)]


# -- CD-Fig10 ------------------------------------------------------------------------------------------------
def test_cd_fig10_draws_the_three_headline_metrics_with_the_tables_ses():
    rng = np.random.default_rng(10)
    curve = {o: {s: {"accuracy": rng.uniform(0.6, 0.8), "accuracy_se": rng.uniform(0.05, 0.07),
                     "ig_critical": [rng.uniform(0.8, 0.95), rng.uniform(0.005, 0.012)],
                     "attention_critical": [rng.uniform(0.68, 0.71), rng.uniform(0.004, 0.006)]}
                 for s in range(100, 700, 100)} for o in ("ce", "cdt")}
    data, rep = cd_fig10(curve, TINY)
    fig = em_curve_figure(data, title=f"CD-Fig10: claim: {rep.agrees}")
    assert figure_problems(fig) == []
    table = rep.tables[0]["rows"]
    for ax, col in zip(fig.axes, ("accuracy", "IG share on critical", "attention share on critical")):
        for obj in ("CE", "CDT"):
            drawn = [h for _, _, h in errorbar_halfwidths(ax)[obj]]
            assert drawn == pytest.approx([_se_of(r[col]) for r in table if r["objective"] == obj], abs=5e-4)
    assert len(fig.legends) == 1


# -- CD-Mem --------------------------------------------------------------------------------------------------
def _mem_rows():
    """The tiny profile's sweep: 1K..32K, naive out of memory at 16K (then not attempted)."""
    rows = []
    for k, length in enumerate((1024, 2048, 4096, 8192, 16_384, 32_768)):
        rows.append({"method": "ours", "length": length, "peak_mib": 1270.9 + 10 * k, "seconds": 0.18 * 3 ** k,
                     "delta_mib": 884.0, "status": "ok"})
    for k, length in enumerate((1024, 2048, 4096, 8192)):
        rows.append({"method": "naive", "length": length, "peak_mib": 1270.9 * 2 ** k, "seconds": 0.33 * 4 ** k,
                     "delta_mib": 884.0, "status": "ok"})
    rows.append({"method": "naive", "length": 16_384, "peak_mib": None, "seconds": None, "delta_mib": 13806.7,
                 "status": "out of memory (> 16384 MiB)"})
    rows.append({"method": "naive", "length": 32_768, "peak_mib": None, "seconds": None, "delta_mib": None,
                 "status": "not attempted"})
    return rows


def test_cd_mem_draws_the_cap_and_marks_where_naive_ran_out_of_memory():
    fig = memory_figure(_mem_rows(), title="CD-Mem: claim: yes", cap_mib=TINY.cdt.mem_cap_gib * 1024)
    assert figure_problems(fig) == []
    mem = fig.axes[0]
    caps = [ln for ln in mem.lines if list(ln.get_ydata()) == [16384.0, 16384.0]]
    assert len(caps) == 1 and caps[0].get_label() == "memory cap (16 GiB)"
    oom = [c for c in mem.collections if c.get_label() == "naive: out of memory"]
    assert len(oom) == 1 and oom[0].get_offsets().tolist() == [[16384.0, 16384.0]]
    legend = [t.get_text() for t in fig.axes[1].get_legend().get_texts()]
    assert "naive: out of memory" in legend and "memory cap (16 GiB)" in legend


# -- CD-Fig14 ------------------------------------------------------------------------------------------------
def _map(seed: int, layers: int = 3, chunks: int = 46, prompts: int = 8):
    rng = np.random.default_rng(seed)
    m = np.tril(rng.uniform(0.001, 0.05, (layers, chunks, chunks)))
    m[:, range(chunks), range(chunks)] += 0.5
    m /= m.sum(-1, keepdims=True)
    return {"map": m.tolist(), "last_row_critical": rng.uniform(0.1, 0.2, (prompts, layers)).tolist(),
            "chunks": chunks, "samples": prompts, "length": 1024}


def test_cd_fig14_compares_before_and_after_cdt_with_colour_bars_key_chunks_and_the_tables_se():
    maps = {"rp_standard": _map(1), "cdt": _map(2), "cdt@seed1": _map(3), "cdt@seed2": _map(4)}
    key = np.zeros(46)
    key[[5, 6, 19, 30]] = [0.375, 0.625, 0.25, 0.5]
    rep = cd_fig14(maps, TINY)
    fig = chunk_map_figure(maps, title=f"CD-Fig14: claim: {rep.agrees}", key_share=key)
    assert figure_problems(fig) == []
    before, after, diff = fig.axes[0], fig.axes[1], fig.axes[3]  # axes 2: the maps' shared colour bar
    assert before.get_title().startswith("before CDT (rp_standard)")
    assert after.get_title().startswith("after CDT (cdt, mean of 3 seeds)")
    assert diff.get_title().startswith("after - before")
    images = [im for ax in fig.axes for im in ax.get_images() if isinstance(im, AxesImage)]
    assert len(images) == 3 and all(im.colorbar is not None for im in images)
    # the maps drawn are the arms' means over their seeds, at the last layer
    cdt_mean = np.mean([np.asarray(maps[n]["map"])[2] for n in ("cdt", "cdt@seed1", "cdt@seed2")], axis=0)
    assert np.allclose(np.nan_to_num(after.get_images()[0].get_array().filled(np.nan)), cdt_mean)
    for ax in (before, after, diff):
        assert ax.get_yticklabels()[-1].get_text() == "question"
        marks = [c for c in ax.collections if len(c.get_offsets())]
        assert len(marks) == 1 and marks[0].get_offsets()[:, 0].tolist() == [5, 6, 19, 30]
    share = fig.axes[-1]
    table = rep.tables[0]["rows"]
    for arm, label in (("rp_standard", "before CDT"), ("cdt", "after CDT")):
        drawn = [h for _, _, h in errorbar_halfwidths(share)[label]]
        assert drawn == pytest.approx([_se_of(r[arm]) for r in table], abs=5e-4)


def test_cd_fig14_with_one_arm_trained_draws_its_map_alone():
    fig = chunk_map_figure({"cdt": _map(2, layers=1, chunks=8, prompts=1)}, title="CD-Fig14: n/a")
    assert figure_problems(fig) == []
    assert [ax.get_title() for ax in fig.axes if ax.get_images()] == ["after CDT (cdt), layer 0"]


def test_cd_fig14_rejects_a_key_share_of_the_wrong_length():
    with pytest.raises(ValueError, match="one share per chunk"):
        chunk_map_figure({"cdt": _map(2)}, key_share=[0.5] * 8)
