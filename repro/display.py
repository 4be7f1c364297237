"""Showing what the notebooks record, inside a Jupyter kernel: figures as inline PNG, tables as rendered Markdown,
each target's verdict as one line. Outside a kernel (the CLI, the benchmarks, tests) every function here is a no-op,
and IPython is never imported."""

from __future__ import annotations

import sys
from typing import Any, Mapping, Sequence


def in_kernel() -> bool:
    """Whether this process is a Jupyter kernel (JupyterLab, papermill, nbval): IPython imported and running with
    a kernel."""
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None else None
    return shell is not None and getattr(shell, "kernel", None) is not None


def show_png(data: bytes) -> None:
    """Display PNG bytes inline (an ``image/png`` output)."""
    from IPython.display import Image, display  # IPython: only inside a kernel (the CLI never imports it)

    display(Image(data=data, format="png"))


def show_markdown(text: str) -> None:
    """Display Markdown inline (``text/markdown``, with the text itself as the plain-text fallback)."""
    from IPython.display import display  # IPython: only inside a kernel

    display({"text/markdown": text, "text/plain": text}, raw=True)


def close_figure(fig) -> None:
    """Close ``fig`` in pyplot, so that the inline backend does not show it a second time at the end of the cell."""
    import matplotlib.pyplot as plt  # the figure's maker imported it already; only called inside a kernel

    plt.close(fig)


def verdict_line(target_id: str, claim: str, agrees: str, claims: Sequence[Mapping[str, Any]] = (),
                 width: int = 100) -> str:
    """One line per target: its id, the paper's claim (cut to ``width`` characters), the verdict and the first
    tested claim's gap +- standard error (with how many claims were tested); the reasoning stays in the records."""
    claim = claim if len(claim) <= width else claim[:width - 1].rstrip() + "…"
    line = f"{target_id} | {claim} | {agrees or 'n/a'}"
    tested = [c for c in claims if isinstance(c.get("gap"), (int, float)) and isinstance(c.get("se"), (int, float))]
    if tested:
        c = tested[0]
        more = f" (first of {len(tested)} claims)" if len(tested) > 1 else ""
        line += f" | gap {c['gap']:+.3g} ± {c['se']:.2g}{more}"
    return line
