"""TB-BaseLoss and TB-ExtLoss (repro.plotting.training) at the tiny profile's shape: the figure rules hold, every
arm is drawn, and arms whose objectives differ never share an axis."""

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from repro.arms import extension_arms  # noqa: E402
from repro.methods.armspec import split_seed  # noqa: E402
from repro.methods.cdt import cd_arm  # noqa: E402
from repro.methods.selfdistill import rp_arm  # noqa: E402
from repro.figure_rules import MAX_SERIES, figure_problems, series_count  # noqa: E402
from repro.plotting.training import (CE, KL, LONGCE, base_loss_figure, ce_key, extension_loss_figure,  # noqa: E402
                                     loss_panels)
from repro.profiles import get_profile  # noqa: E402

TINY = extension_arms(get_profile("tiny"))
SMOKE = extension_arms(get_profile("smoke"))


@pytest.fixture(autouse=True)
def _close():
    yield
    plt.close("all")


def _metrics(name: str, steps: int, seed: int) -> list[dict]:
    """Logged steps shaped like the arm's own (``clm``/``consistency`` for self-distillation arms, ``detect_loss``
    for CDT), falling from about 5 to 3 with noise."""
    rng = np.random.default_rng(seed)
    out = []
    for s in range(steps):
        ce = 3.0 + 2.0 * np.exp(-s / 50) + rng.normal(0, 0.2)
        m = {"step": s, "loss": ce, "seconds": 1.0, "tokens": 4096}
        stem = split_seed(name)[0]
        if stem.startswith("rp_"):
            m.update(clm=ce, consistency=0.3 * np.exp(-s / 80) + abs(rng.normal(0, 0.01)))
            m["loss"] = ce + m["consistency"]
        if stem == "cdt":
            m.update(detect_loss=ce + 0.05)
        out.append(m)
    return out


def _runs(names) -> dict[str, list[dict]]:
    """Metrics for every arm of ``names`` at the tiny schedule: 200 steps, the early ablations 40, the matched
    Standard 300."""
    runs = {}
    for i, n in enumerate(names):
        arm = rp_arm(n)
        steps = {"early": 40, "matched": 300}.get(arm.schedule, 200) if arm else 200
        runs[n] = _metrics(n, steps, i)
    return runs


def test_tiny_profile_ext_loss_keeps_the_rules_and_draws_every_arm():
    assert len(TINY) > 40 and any("@seed" in n for n in TINY)  # the shape the committed figure failed at
    fig = extension_loss_figure(_runs(TINY))
    assert figure_problems(fig) == []
    drawn = {h.get_text().split(" ")[0] for ax in fig.axes if ax.get_legend() for h in ax.get_legend().get_texts()}
    assert drawn == {split_seed(n)[0] for n in TINY}
    assert all(series_count(ax) <= MAX_SERIES for ax in fig.axes)
    # every replicate is drawn: main and replicate lines together hold every run's points
    n_points = sum(len(ln.get_xdata()) for ax in fig.axes for ln in ax.lines)
    assert n_points > sum(1 for n in TINY if "@seed" in n) * 150


def test_smoke_profile_ext_loss_keeps_the_rules():
    fig = extension_loss_figure(_runs(SMOKE))
    assert figure_problems(fig) == []
    assert "TB-ExtLoss" in fig._suptitle.get_text()


def test_panels_never_mix_objectives():
    """A CE panel holds only arms whose CE term is the logged key; LongCE-weighted CE and the KL term have panels
    of their own; every arm has a CE-type panel; KL panels hold only reverse-KL arms."""
    panels = loss_panels(TINY)
    ce_type = {a for p in panels if p.term in (CE, LONGCE) for a in p.arms}
    assert ce_type == {split_seed(n)[0] for n in TINY}
    for p in panels:
        assert len(p.arms) + sum(1 for a in p.arms if f"{a}@seed1" in TINY) <= MAX_SERIES
        for a in p.arms:
            spec = rp_arm(a).spec if rp_arm(a) else None
            if p.term == LONGCE:
                assert spec is not None and spec.longce, (p.title, a)
            elif p.term == KL:
                assert spec is not None and spec.consistency == "kl" and spec.direction == "reverse", (p.title, a)
            else:
                assert spec is None or not spec.longce, (p.title, a)
    assert ce_key("rp_skip@seed1") == "clm" and ce_key("cdt") == "detect_loss" and ce_key("pose") == "loss"
    assert cd_arm("cdt") is not None


def test_panels_cut_at_eight_series_keep_the_reference():
    names = ["flt", "flt@seed1"] + [f"longrecipe_r{p}" for p in range(10, 100, 10)] + ["longrecipe", "longrecipe@seed1"]
    parts = [p for p in loss_panels(names) if "Tab. 3-4" in p.title]
    assert len(parts) == 2 and all(p.arms[0] == "longrecipe" for p in parts)
    assert sorted({a for p in parts for a in p.arms}) == sorted({"longrecipe", *names[2:-2]})


def test_unknown_arms_are_drawn_in_a_panel_of_their_paper():
    panels = loss_panels(["flt", "rp_new_view", "pl_new"])
    titles = {a: p.title for p in panels for a in p.arms}
    assert titles["rp_new_view"].startswith("Other self-distillation") and titles["pl_new"] == "Other ProLong arms"


def _base_metrics():
    out = []
    for s in range(300):
        phase, level, final = ("copy", 0, -1) if s < 100 else ("retrieval", (s - 100) // 50, -1) if s < 250 else \
            ("retrieval", 2, 300 - s)
        out.append({"step": s, "loss": 5 * np.exp(-s / 60) + 0.3, "method_phase": phase, "method_level": level,
                    "method_final_left": final, "method_em": min(1.0, max(0.0, (s - 100) / 150))})
    return out


def test_base_loss_legend_is_outside_and_title_names_the_end_state():
    fig = base_loss_figure(_base_metrics(), verdict="n/a")
    assert figure_problems(fig) == []
    title = fig.axes[0].get_title()
    assert title.startswith("TB-BaseLoss") and "train exact match 1.00" in title and "no paper claim" in title
    labels = [t.get_text() for t in fig.axes[0].texts]
    assert labels == ["copy", "retrieval L0", "retrieval L1", "retrieval L2", "anneal"]
    assert all(t.get_position()[1] > 1 for t in fig.axes[0].texts)  # the phase names sit above the data area
