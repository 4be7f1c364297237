"""Each paper's central claims (three to five), the targets that test each, and whether a run shows it.

``figures/INDEX.md`` opens with this table (:func:`shown_table`): a claim is *shown beyond noise* when every
target listed for it says ``yes``, *shown the other way* when any says ``no``, and *not shown at this scale*
otherwise (ties, ``partly`` — said in the cell — missing or ``n/a`` targets).
"""

from __future__ import annotations

from typing import Mapping

CENTRAL: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    "LongRecipe": (
        ("Extension on about 30% of the target length comes close to full-length training", ("LR-Tab1",)),
        ("Impactful tokens and the position transform each matter (ablations below LongRecipe)", ("LR-Tab3",)),
        ("30% of the target length is the sample length to use", ("LR-Tab4",)),
        ("Over 85% less training compute than full-length training", ("LR-Cost",)),
        ("Replay and model merging restore general abilities", ("LR-Tab2",)),
    ),
    "RoPE-perturbed self-distillation": (
        ("Self-distillation (skip, cyclic) beats standard fine-tuning at the target length", ("RP-Tab1/2",)),
        ("It extrapolates further with YaRN", ("RP-Tab4/5",)),
        ("Its objective beats the alternatives (forward KL, CLM on the perturbed view, ...)", ("RP-Tab8",)),
        ("Short-context ability is preserved", ("RP-Tab7",)),
        ("About 1.6x the cost of a step, still ahead at equal wall-clock", ("RP-Fig4",)),
    ),
    "Context denoising training": (
        ("CDT beats CE and LongCE on long-context tasks", ("CD-Tab2",)),
        ("Integrated gradients separate critical from irrelevant tokens better than FR", ("CD-Fig3",)),
        ("The embedding gradient detects the critical tokens", ("CD-Fig7",)),
        ("After CDT the model attends more to the key chunks", ("CD-Fig14",)),
        ("CDT costs one extra forward and one lightweight backward", ("CD-Cost",)),
    ),
    "ProLong": (
        ("All-long data improves perplexity but hurts downstream long-context tasks", ("PL-Fig1",)),
        ("A mix of 60% long and 40% short data is best", ("PL-Fig3",)),
        ("Training beyond the evaluation length helps", ("PL-Tab7",)),
        ("A larger RoPE base helps", ("PL-Tab18",)),
        ("Document masks help on long and short tasks", ("PL-Tab20",)),
    ),
}
"""Paper -> its central claims, each with the target ids that test it (:mod:`repro.targets`)."""
SHOWN, NOT_SHOWN, OTHER_WAY = "shown beyond noise", "not shown at this scale", "shown the other way"


def status(verdicts: Mapping[str, str], targets: tuple[str, ...]) -> str:
    """Whether a run shows a claim, from the verdicts (target id -> ``agrees``) of its targets."""
    got = [verdicts.get(t, "") or "not run" for t in targets]
    if all(v == "yes" for v in got):
        return SHOWN
    if any(v == "no" for v in got):
        return OTHER_WAY
    return f"{NOT_SHOWN} ({', '.join(f'{t}: {v}' for t, v in zip(targets, got))})"


def shown_table(verdicts: Mapping[str, str]) -> list[str]:
    """The markdown lines of the at-a-glance table: per paper, its claims, target ids and status."""
    lines = ["| paper | central claim | targets | this run |", "|---|---|---|---|"]
    for paper, claims in CENTRAL.items():
        for claim, targets in claims:
            lines.append(f"| {paper} | {claim} | {', '.join(targets)} | {status(verdicts, targets)} |")
    return lines
