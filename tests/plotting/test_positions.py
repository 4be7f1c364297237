import itertools

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from repro.plotting.positions import plot_lr_fig2  # noqa: E402

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
    return [{"method": m, "text": text, "target": t, "avg_token_distance": dist[m] * t / 81920,
             "mean_segment_length": seg[m], "share_at_or_beyond_n": share[m]}
            for text in ("mixed", "prose") for t in (81920, 131072) for m in METHODS]


def _overlap(a, b) -> bool:
    """Two display boxes share an area (touching edges do not count)."""
    return min(a.x1, b.x1) - max(a.x0, b.x0) > 0.5 and min(a.y1, b.y1) - max(a.y0, b.y0) > 0.5


def test_lr_fig2_value_labels_never_overlap():
    fig = plot_lr_fig2(_rows(), methods=METHODS)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        labels = [t for t in ax.texts if t.get_text()]
        assert len(labels) == 2 * len(METHODS)  # one per bar: 7 methods x 2 targets
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
    plt.close(fig)
