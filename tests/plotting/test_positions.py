import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from repro.plotting.positions import plot_coverage, plot_lr_alg1, plot_lr_fig2, plot_transform_examples  # noqa: E402
from repro.figure_rules import errorbar_halfwidths, figure_problems, series_count  # noqa: E402

METHODS = ("flt", "rpes", "pose", "pose_official", "longrecipe_eq7", "longrecipe", "longrecipe_official")


def _rows():
    """LR-Fig2's rows at two targets and two texts, with neighbouring bars of near-equal height (the labels of
    27.3k and 27.3k, or 0.7 and 0.7, used to print over each other)."""
    dist = {"flt": 27307, "rpes": 27300, "pose": 19400, "pose_official": 18300, "longrecipe_eq7": 26400,
            "longrecipe": 26800, "longrecipe_official": 30700}
    seg = {"flt": 81920, "rpes": 1.43, "pose": 12300, "pose_official": 12300, "longrecipe_eq7": 8.75,
           "longrecipe": 8.53, "longrecipe_official": 24.2}
    share = {"flt": 0.0, "rpes": 0.7, "pose": 0.49, "pose_official": 0.64, "longrecipe_eq7": 0.7, "longrecipe": 0.7,
             "longrecipe_official": 0.68}
    # std over 64 draws as in the committed tiny LR-Fig2.csv (FLT: one draw, no spread)
    dist_std = {"flt": 0.0, "rpes": 52.3, "pose": 8374, "pose_official": 7665, "longrecipe_eq7": 226,
                "longrecipe": 147, "longrecipe_official": 2039}
    rows = [{"method": m, "text": text, "target": t, "draws": 1 if m == "flt" else 64,
             "avg_token_distance": dist[m] * t / 81920, "avg_token_distance_std": dist_std[m],
             "mean_segment_length": seg[m], "mean_segment_length_std": 0.1 * seg[m] if m != "flt" else 0.0,
             "share_at_or_beyond_n": share[m]}
            for text in ("mixed", "prose") for t in (81920, 131072) for m in METHODS]
    for r in rows:  # the SE columns as lr_fig2_rows writes them: std / sqrt(draws - 1), none with one draw
        for key in ("avg_token_distance", "mean_segment_length"):
            r[f"{key}_se"] = r[f"{key}_std"] / np.sqrt(r["draws"] - 1) if r["draws"] > 1 else None
    return rows


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _overlap(a, b) -> bool:
    """Two display boxes share an area (touching edges do not count)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5


def test_lr_fig2_value_labels_never_overlap():
    fig = plot_lr_fig2(_rows(), methods=METHODS)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_text()]
        assert len(labels) == 2 * len(METHODS)  # one per point: 7 methods x 2 targets
        boxes = [t.get_window_extent(renderer) for t in labels]
        clash = [(labels[i].get_text(), labels[j].get_text()) for i, j in itertools.combinations(range(len(boxes)), 2)
                 if _overlap(boxes[i], boxes[j])]
        assert not clash, f"{ax.get_title()}: overlapping labels {clash}"
        inside = ax.get_window_extent(renderer)
        assert all(b.y1 <= inside.y1 + 0.5 for b in boxes), f"{ax.get_title()}: a label leaves the axes"
    plt.close(fig)


def test_lr_fig2_labels_are_compact():
    fig = plot_lr_fig2(_rows(), methods=METHODS)
    texts = {t.get_text() for t in fig.axes[0].texts}
    assert {"27.3k", "19.4k"} <= texts and not any("e+" in t for t in texts)
    assert {"0.7", "0.49", "0"} <= {t.get_text() for t in fig.axes[2].texts}


def test_lr_fig2_labels_of_thousands_are_compact_at_the_smoke_lengths():
    rows = [{**r, "target": r["target"] // 40, "avg_token_distance": r["avg_token_distance"] / 40} for r in _rows()]
    texts = {t.get_text() for t in plot_lr_fig2(rows, methods=METHODS).axes[0].texts}
    assert "1.09k" in texts and not any("e+" in t for t in texts)  # flt at 131072 / 40: 1092 positions


def test_lr_fig2_keeps_the_rules_and_states_the_verdict():
    fig = plot_lr_fig2(_rows(), methods=METHODS, verdict="partly")
    assert figure_problems(fig) == []
    assert series_count(fig.axes[0]) == len(METHODS) and all(series_count(ax) <= len(METHODS) for ax in fig.axes)
    assert fig._suptitle.get_text().splitlines()[0].endswith(": partly")
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(METHODS)


def test_lr_fig2_error_bars_are_the_verdicts_se():
    """±1 SE = the table's SE column (std / sqrt(draws - 1), the SE lr_fig2_summary gives the verdict); FLT (one
    draw) has none."""
    rows = _rows()
    fig = plot_lr_fig2(rows, methods=METHODS)
    ax = fig.axes[0]  # average token distance, mixed text
    bars = errorbar_halfwidths(ax)
    for m in METHODS:
        want = [r["avg_token_distance_se"] or 0.0 for r in rows if r["method"] == m and r["text"] == "mixed"]
        assert [h for _, _, h in bars[m]] == pytest.approx(want, rel=1e-9)
    assert [h for _, _, h in bars["pose"]][0] == pytest.approx(8374 / np.sqrt(63))


def test_lr_fig2_segment_panel_is_not_bars_on_a_log_axis():
    fig = plot_lr_fig2(_rows(), methods=METHODS)
    ax = fig.axes[1]
    assert ax.get_yscale() == "log" and not ax.patches
    assert fig.axes[0].get_ylim()[0] == 0.0  # ratios read off a zero-based axis


def _alg1_trace():
    lengths = np.array([7, 5, 1, 22, 5])
    starts = np.r_[0, np.cumsum(lengths)[:-1]]
    firsts = np.array([0, 24, 43, 50, 84])
    positions = np.concatenate([f + np.arange(n) for f, n in zip(firsts, lengths)])
    cells = np.full(100, -1)
    cells[positions] = np.repeat(np.arange(lengths.size), lengths)
    return {"sentence_starts": starts, "sentence_lengths": lengths, "slots": np.array([0, 17, 31, 37, 49]),
            "cells": cells, "positions": positions, "target": 100}


def test_lr_alg1_has_no_image_without_colour_bar_and_states_the_verdict():
    trace = _alg1_trace()
    fig = plot_lr_alg1(trace, tokens=[f"t{i}" for i in range(40)], verdict="yes")
    assert figure_problems(fig) == []
    assert not fig.axes[0].images
    assert fig._suptitle.get_text().endswith(": yes")
    assert all(t.get_fontsize() >= 7 for t in fig.axes[1].get_xticklabels())


def test_coverage_and_transforms_keep_the_rules():
    rng = np.random.default_rng(0)
    pos = {m: rng.random(4096) * 16 for m in METHODS}
    dist = {m: rng.random(4096) * 1e3 + 1 for m in METHODS}
    fig = plot_coverage(pos, dist, draws=16, bins=64, sample_len=1200)
    assert figure_problems(fig) == []
    assert [t.get_text() for t in fig.legends[0].get_texts()] == list(METHODS)
    names = ("flt", "pose", "pose_official", "rpes", "longrecipe_eq7", "longrecipe_alg1", "longrecipe_official",
             "skip", "cyclic", "dilation", "chunk_permutation")
    fig = plot_transform_examples({n: np.sort(rng.integers(0, 4096, 1200)) for n in names}, 4096)
    assert figure_problems(fig) == []
    assert "LR-Fig2" in fig._suptitle.get_text()
