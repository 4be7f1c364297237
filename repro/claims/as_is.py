"""The declared headlines of a profile that trains nothing (``real.enabled``: ``smol``), built from its settings:
its targets test claims about the pretrained model itself, not the paper's arms (:mod:`repro.reports.as_is`)."""

from __future__ import annotations

from repro.profiles import Profile
from repro.reports.headline import Claim, Headline

TASK = "niah_single_1"


def headlines(p: Profile) -> dict[str, Headline]:
    """``TB-NIAH``: accuracy at the longest of ``eval.lengths`` the same as at the shortest (retrieval holds through
    the window); ``RP-Tab4/5``: each of ``real.scalings`` other than ``none`` above no scaling at each of
    ``real.scaled_lengths``. A target without two lengths or a scaling to compare has none."""
    out: dict[str, Headline] = {}
    short, long_ = min(p.eval.lengths), max(p.eval.lengths)
    if short != long_:
        out["TB-NIAH"] = Headline((Claim(str(long_), str(short), "same",
                                         f"{TASK} accuracy at {long_} vs {short} tokens"),),
                                  "LongRecipe Tab. 1 (NIAH at the window), on the pretrained model as it is")
    claims = tuple(Claim(f"{s} @{L}", f"none @{L}", "higher", f"{TASK} at {L} tokens")
                   for s in p.real.scalings if s != "none" for L in p.real.scaled_lengths)
    if claims and "none" in p.real.scalings:
        out["RP-Tab4/5"] = Headline(claims, "RP §4.3, Tab. 4/5 (YaRN at evaluation time), without training")
    return out
