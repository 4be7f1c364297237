"""The declared headlines of the LongRecipe targets: the comparisons the paper's own text rests each claim on.

Keys are target ids of :mod:`repro.targets`; values are :class:`repro.reports.headline.Headline` s whose
``source`` says where the paper makes the claim. The reports judge each target by its headline only
(:func:`repro.reports.headline.judge`); other pairs are shown beside it and never decide.

A table read on two metrics (NIAH(M) and RULER) names each arm on each metric with :func:`on`
(``"longrecipe [NIAH(M)]"``), so that all of a table's claims are tested, and Holm-corrected, together. A
threshold the paper states (``> 85% less compute``, ``about twice``) is an arm of its own holding that number.
LR-Tab6 (the training configuration) has no headline: there is nothing to compare.
"""

from __future__ import annotations

from repro.reports.headline import Claim, Headline

NIAH_M, RULER = "NIAH(M)", "RULER"
"""The two long-context metrics of LongRecipe Tables 1, 3 and 4."""
LM_LOSS, SHORT_NIAH = "LM loss", "NIAH@base"
"""The two short-context stand-ins for general abilities (LR-Tab2): LM loss on base-window windows (lower is
better) and the NIAH average at the base window."""
DISTANCE_RATIO, SEGMENT = "distance ratio", "segment"
"""LR-Fig2's statistics: LongRecipe / PoSE average token distance at the largest target, and the mean
continuous-segment length (tokens)."""
PAPER = "paper"
"""The arm holding a number the paper states (LR-Fig2's 2x)."""
COST_THRESHOLD = "85%"
"""The arm holding LongRecipe's stated saving (LR-Cost: "over 85%" less compute than full-length training)."""
FIG3_TAG, FIG3_OTHERS = "NUM", ("PRON", "AUX", "CCONJ", "ADP")
"""LR-Fig3: the tag the paper finds most frequent among the impactful tokens, and the tags its text compares it
with."""


def on(arm: str, metric: str) -> str:
    """The name of ``arm`` read on ``metric`` in a headline of several metrics: ``"longrecipe [NIAH(M)]"``."""
    if not arm or not metric or "[" in arm or "[" in metric:
        raise ValueError(f"arm={arm!r}, metric={metric!r}; allowed: non-empty names without '['")
    return f"{arm} [{metric}]"


def split_on(name: str) -> tuple[str, str]:
    """``(arm, metric)`` of a name made by :func:`on`; ValueError for any other name."""
    arm, sep, rest = name.partition(" [")
    if not sep or not rest.endswith("]") or not arm:
        raise ValueError(f"name {name!r}; allowed: 'arm [metric]' as repro.claims.longrecipe.on makes it")
    return arm, rest[:-1]


def _both(a: str, b: str, expect: str, what: str, paper: tuple[str, str]) -> tuple[Claim, Claim]:
    """The claim ``a`` vs ``b`` on NIAH(M) and on RULER; ``paper``: the paper's two numbers on each."""
    return tuple(Claim(on(a, m), on(b, m), expect, f"{m} at the target window{what}, paper {v}")
                 for m, v in zip((NIAH_M, RULER), paper))


HEADLINES: dict[str, Headline] = {
    "LR-Alg1": Headline(
        (Claim("first sentence's position", "0", "same", "Algorithm 1: the first sentence stays at position 0"),
         Claim("broken steps inside sentences", "0", "same", "each sentence keeps consecutive positions"),
         Claim("positions out of order or outside the window", "0", "same",
               "positions strictly increase and stay below the target")),
        "App. D, Algorithm 1 / Eq. 5-7: the sentences of a short sample keep their order and inner positions, the "
        "first at 0, the others moved by random gaps so the sample spans the target window (exact position "
        "arithmetic: no sampling noise, SE 0)"),
    "LR-Fig2": Headline(
        (Claim(on("longrecipe/pose", DISTANCE_RATIO), on(PAPER, DISTANCE_RATIO), "same",
               "LongRecipe / PoSE average token distance at the largest target vs the paper's 2x"),
         Claim(on("longrecipe", SEGMENT), on("rpes", SEGMENT), "higher",
               "mean continuous-segment length (tokens)")),
        "§6.4, Fig. 2: 'the LongRecipe approach achieves approximately twice the token distance compared to PoSE "
        "in the 128k setting ... LongRecipe maintains an average continuous segment length of 88 ... the average "
        "continuous segment length with RPES is nearly 0'. The 88 itself is the sentence length of the paper's "
        "text under its tokenizer, not a property of the method: shown, not tested"),
    "LR-Fig3": Headline(
        tuple(Claim(FIG3_TAG, t, "higher", "share among the top-20% logit-change tokens") for t in FIG3_OTHERS),
        "§6.4, Fig. 3: 'NUM (numerals) has the highest frequency, stabilizing around 0.4 ... PRON and AUX have "
        "frequencies around 0.15, while CCONJ and ADP have frequencies around 0.1'"),
    "LR-Tab1": Headline(
        _both("longrecipe", "pose", "higher", "", ("78.9 vs 68.8", "74.5 vs 69.9")),
        "§6.1 on Table 1: 'LongRecipe shows an average improvement of ... 7.8% over PoSE in the NIAH(M) task ... "
        "In the RULER evaluation, LongRecipe outperforms ... PoSE by 4.7%. Especially, in the NIAH task, "
        "Llama3-8B-I (80k) shows a 10.1% improvement with LongRecipe over PoSE' (our setting). RPES is shown "
        "beside it, not tested: our short RPES fine-tune collapses (the testbed's RPES breaks local structure), "
        "the opposite of the paper's RPES > PoSE, so a win over it says nothing of the method"),
    "LR-Tab2": Headline(
        (Claim(on("longrecipe+replay", LM_LOSS), on("longrecipe", LM_LOSS), "lower",
               "short-window LM loss, after vs before replay"),
         Claim(on("longrecipe+merge", LM_LOSS), on("longrecipe+replay", LM_LOSS), "lower",
               "short-window LM loss, after merging vs after replay"),
         Claim(on("longrecipe+replay", SHORT_NIAH), on("longrecipe", SHORT_NIAH), "higher",
               "NIAH at the base window, after vs before replay"),
         Claim(on("longrecipe+merge", SHORT_NIAH), on("longrecipe+replay", SHORT_NIAH), "higher",
               "NIAH at the base window, after merging vs after replay")),
        "§6.3 on Table 2: 'comparing the models before and after replaying shows noticeable improvement ... By "
        "further merging with the original model, we can enhance the model's general capabilities' (LongRecipe "
        "MMLU 58.6 -> 62.1 -> 63.0); our stand-ins for general abilities: short-window LM loss and NIAH"),
    "LR-Tab3": Headline(
        (*_both("longrecipe", "longrecipe_random_t", "higher", "", ("78.9 vs 70.1", "74.5 vs 69.8")),
         *_both("longrecipe_wo_t", "pose", "higher", "", ("71.9 vs 68.8", "71.7 vs 69.9"))),
        "§6.3 on Table 3: 'the performance will drop significantly in NIAH(M) and RULER metrics when we randomly "
        "select sentence from long sequence (LongRecipe (Random T)) ... the application of Position Index "
        "Transformation can bring average 3.3% improvement from PoSE to LongRecipe (w/o T)'"),
    "LR-Tab4": Headline(
        (*_both("longrecipe", "longrecipe_r40", "higher", ", 30% vs 40% of the tokens",
                ("78.9 vs 72.0", "74.5 vs 71.0")),
         *_both("longrecipe", "flt", "same", ", 30% vs 100% (FLT)", ("78.9 vs 82.3", "74.5 vs 75.7"))),
        "§6.3 on Table 4: 'Even when we increase the token ratio from 30% to 100%, only around 1% improvement "
        "can be obtained', and the table's 30% row above its 40% row (78.9 vs 72.0 NIAH(M))"),
    "LR-Cost": Headline(
        (Claim("longrecipe", COST_THRESHOLD, "higher",
               "percent less step time than FLT (compute + data), paired over interleaved rounds"),),
        "Abstract and §7: LongRecipe 'reduces computational training resource over 85% compared to full "
        "sequence training' (§1: 'around 1/8 of the GPU computational resources'); a threshold claim: it holds "
        "when the measured saving is above 85% beyond noise, and is 'no' when its interval lies below 85%"),
}
