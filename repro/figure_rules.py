"""The rules every committed figure keeps, checked on the matplotlib figure object itself.

:func:`figure_problems` returns what a figure breaks (an empty list when nothing);
:class:`repro.figures.Recorder` runs it on every figure it saves and records the result in ``index.json``
(``rules``: figure name -> its problems), where :mod:`repro.reports.index_check` reports it. The rules:

- at most :data:`MAX_SERIES` data series on one axes (more: small multiples, or mute the context arms);
- no legend over any axes' data area (legends sit beside the axes or below them);
- a colour bar for every heat map (an image or a mesh on non-colour-bar axes; heat maps of one colour scale may
  share one);
- no bars on a log value axis (a bar's length on a log axis has no meaning);
- a title (the figure's or each axes') that says what the figure claims.

The error bars are checked against the tables' SE columns where the figure is made
(:func:`errorbar_halfwidths` reads them back; the plotting tests compare them with the reports' SE).
"""

from __future__ import annotations


from matplotlib.collections import PathCollection, QuadMesh
from matplotlib.container import BarContainer, ErrorbarContainer
from matplotlib.lines import Line2D
from matplotlib.patches import StepPatch

MAX_SERIES = 8
"""The most data series one axes may hold."""
OVERLAP_PX = 2.0
"""Legend and axes boxes may touch by this many pixels (rounding of the layout) without counting as overlap."""


def _is_colorbar_axes(ax) -> bool:
    """Whether ``ax`` is a colour bar's own axes (matplotlib marks them with ``_colorbar``)."""
    return getattr(ax, "_colorbar", None) is not None


def _errorbar_lines(ax) -> set[int]:
    """ids of the lines that draw error bars' caps (the data line of an errorbar counts as its series)."""
    out: set[int] = set()
    for c in ax.containers:
        if isinstance(c, ErrorbarContainer):
            _, caps, _ = c.lines
            out.update(id(x) for x in caps)
    return out


def _is_reference(line: Line2D) -> bool:
    """A horizontal or vertical reference line (``axhline``/``axvline``: every x or every y the same)."""
    x, y = line.get_xdata(), line.get_ydata()
    if len(x) < 2:
        return False
    return len(set(map(float, x))) == 1 or len(set(map(float, y))) == 1


def series_count(ax) -> int:
    """Data series on ``ax``: lines that are not reference lines or error-bar caps, bar groups, scatter sets,
    step histograms."""
    caps = _errorbar_lines(ax)
    n = sum(1 for ln in ax.lines if id(ln) not in caps and not _is_reference(ln)
            and len(ln.get_xdata()) > 0)
    n += sum(1 for c in ax.containers if isinstance(c, BarContainer))
    n += sum(1 for c in ax.collections if isinstance(c, PathCollection) and len(c.get_offsets()) > 0)
    n += sum(1 for c in ax.patches if isinstance(c, StepPatch))  # ax.stairs: a histogram line
    return n


def _heat_maps(ax) -> list:
    """The images and meshes drawn on ``ax``."""
    return [*ax.images, *(c for c in ax.collections if isinstance(c, QuadMesh))]


def _scale_of(mappable) -> tuple:
    """A heat map's colour scale: its colour map and limits (heat maps of one scale can share one colour bar)."""
    return mappable.get_cmap().name, mappable.norm.vmin, mappable.norm.vmax


def _overlap(a, b) -> float:
    """Overlap of two display boxes in pixels along the smaller side (0 when apart)."""
    w = min(a.x1, b.x1) - max(a.x0, b.x0)
    h = min(a.y1, b.y1) - max(a.y0, b.y0)
    return min(w, h) if w > 0 and h > 0 else 0.0


def figure_problems(fig) -> list[str]:
    """What ``fig`` breaks of the rules above, one line each (empty when it keeps them all)."""
    fig.canvas.draw()  # legend and axes boxes are known only after a draw
    renderer = fig.canvas.get_renderer()
    axes = [ax for ax in fig.axes if ax.get_visible() and ax.axison and not _is_colorbar_axes(ax)]
    problems: list[str] = []
    scales = {_scale_of(m) for ax in axes for m in _heat_maps(ax) if getattr(m, "colorbar", None) is not None}
    titled = bool(fig._suptitle and fig._suptitle.get_text())
    for i, ax in enumerate(axes):
        where = f"axes {i}" + (f" ({ax.get_title()!r})" if ax.get_title() else "")
        titled = titled or bool(ax.get_title())
        if (n := series_count(ax)) > MAX_SERIES:
            problems.append(f"{where}: {n} series; allowed: at most {MAX_SERIES} per axes")
        if any(_scale_of(m) not in scales for m in _heat_maps(ax)):
            problems.append(f"{where}: a heat map without a colour bar")
        logs = {ax.get_xscale() if c.orientation == "horizontal" else ax.get_yscale()
                for c in ax.containers if isinstance(c, BarContainer)} - {"linear"}
        if logs:
            problems.append(f"{where}: bars on a {'/'.join(sorted(logs))} value axis; allowed: linear")
    legends = [(lg, f"legend of axes {i}") for i, ax in enumerate(axes) if (lg := ax.get_legend()) is not None]
    legends += [(lg, "figure legend") for lg in fig.legends]
    for lg, name in legends:
        if not lg.get_visible():
            continue
        box = lg.get_window_extent(renderer)
        for j, ax in enumerate(axes):
            if _overlap(box, ax.get_window_extent(renderer)) > OVERLAP_PX:
                problems.append(f"{name} lies over the data area of axes {j}; allowed: beside or below the axes")
    if not titled:
        problems.append("no title; allowed: a title that states the claim")
    return problems


def errorbar_halfwidths(ax) -> dict[str, list[tuple[float, float, float]]]:
    """Each labelled error-bar series of ``ax`` as ``label -> [(x, y, half-width of its bar), ...]`` (symmetric
    vertical bars; 0 where a point has none), read back from the drawn segments."""
    out: dict[str, list[tuple[float, float, float]]] = {}
    for c in ax.containers:
        if not isinstance(c, ErrorbarContainer) or not c.has_yerr:
            continue
        line, _, bars = c.lines
        xs, ys = line.get_xdata(), line.get_ydata()
        segs = bars[-1].get_segments() if bars else []
        half: dict[float, float] = {}
        for s in segs:
            (x0, y0), (_, y1) = s[0], s[-1]
            half[float(x0)] = abs(float(y1) - float(y0)) / 2
        out[c.get_label()] = [(float(x), float(y), half.get(float(x), 0.0)) for x, y in zip(xs, ys)]
    return out

