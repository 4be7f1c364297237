"""The declared headlines of the CDT targets: the comparisons the paper's own text rests each claim on.

Keys are target ids of :mod:`repro.targets`; values are :class:`repro.reports.headline.Headline` s whose
``source`` says where the paper makes the claim. The reports judge each target by its headline only
(:func:`repro.reports.headline.judge`); other pairs are shown beside it and never decide.

Arm names are the keys the reports put in ``ours`` (:mod:`repro.reports.cdt`, :mod:`repro.reports.cdt_analysis`,
:mod:`repro.reports.cdt_training`): ``"<group>: <quantity>"`` where one table compares several quantities, and a
constant reference (``"1 (unchanged)"``, ``"none"``) where the paper's claim is against a fixed value.
"""

from __future__ import annotations

from repro.reports.headline import Claim, Headline

PAPER_COST_RATIO = 2.6 / (2.6 - 0.5)
"""The paper's CDT step over an SFT step, at the upper end of its account (§6.3: CDT costs "approximately 0.5 hours
in 8xA100 GPUs for every 50 steps" more than SFT; Table 8: 6.5 h per epoch of 125 steps, i.e. 2.6 h per 50 steps):
2.6 / 2.1 = 1.238 when the 6.5 h is CDT's own time, 3.1 / 2.6 = 1.19 when it is SFT's. The larger is the bound."""
PAPER_COST_ARM = "paper: CDT / SFT <= 1.24"
"""The arm name of :data:`PAPER_COST_RATIO` in CD-Cost's ``ours``."""

_FIG3 = tuple(c for g in ("correct", "wrong") for c in (
    Claim(f"{g}: IG critical", f"{g}: IG irrelevant", "higher", f"IG share, {g} answers"),
    Claim(f"{g}: FR noise", f"{g}: IG noise", "higher",
          f"share on noise (irrelevant + low-frequency), FR vs IG, {g} answers")))

HEADLINES: dict[str, Headline] = {
    "CD-TaskB": Headline(
        (Claim("cells breaking the 1-2x interference count", "none", "same",
               "(hops, length) cells with a prompt outside 1-2x as many interference as supporting facts"),
         Claim("cells without interference after the last supporting fact", "none", "same",
               "(hops, length) cells with a prompt lacking an interference fact after the last supporting one")),
        "App. B.1: \"we ensure that the number of interference facts is between one and two times the number of "
        "supporting facts\" and \"We ensure that at least one interference fact is placed after the last "
        "supporting fact\". Every generated prompt is checked (a census, no sampling: standard error 0)."),
    "CD-Fig3": Headline(
        _FIG3,
        "§3.1, Observation (Fig. 3): \"regardless of whether the response is correct or not, the IG score for "
        "critical tokens is significantly higher than that for irrelevant tokens\"; \"the IG score detects "
        "significantly less noise (irrelevant documents and low-frequency tokens) compared to the FR score\" and "
        "\"in both cases, the FR score indicates that the model significantly focuses on irrelevant tokens\". "
        "FR is the all-heads score (\"We average FR scores from all heads\")."),
    "CD-Fig4": Headline(
        (Claim("critical: after / before", "1 (unchanged)", "higher", "attention per critical token"),
         Claim("irrelevant: after / before", "1 (unchanged)", "lower", "attention per irrelevant token")),
        "§3.2 and the Fig. 4 caption: \"After context denoising, attention scores on critical tokens boost x10 "
        "times, and show a reduction on irrelevant tokens\" (the x10 is shown beside ours, not tested)."),
    "CD-Fig5": Headline(
        (Claim("Pearson r (IG, grad L2)", "0 (uncorrelated)", "higher",
               "over every context token, bootstrap over samples"),),
        "§4.1 and the Fig. 5 caption: \"Relationship between attention IG score and L2-normalized embedding "
        "gradients on different types of tokens. It shows a proportional correlation.\""),
    "CD-Fig7": Headline(
        (Claim("gradient: critical", "attention: critical", "higher", "share of the top-k"),
         Claim("gradient: critical", "longppl: critical", "higher", "share of the top-k"),
         Claim("gradient: irrelevant", "attention: irrelevant", "lower", "share of the top-k")),
        "§6.1 (Fig. 7): \"the attention-based method can detect a high proportion of supporting tokens and "
        "interference tokens, but it also detects a large number of irrelevant tokens [...] Our CDT method not "
        "only identifies the largest number of critical tokens but also effectively suppresses the detection of "
        "irrelevant tokens\" (the largest critical share against both detectors; fewer irrelevant tokens than "
        "attention, the detector it is contrasted with; LongPPL's irrelevant share is shown, not tested)."),
    "CD-Fig8": Headline(
        (Claim("gain after denoising (mean over lrs)", "0 (unchanged)", "higher",
               "relative change of the attention per critical token"),
         Claim("gain after emphasizing (mean over lrs)", "0 (unchanged)", "higher",
               "relative change after the emphasizing step, against after denoising"),
         Claim("gain at the largest lr", "gain at the smallest lr", "higher", "denoising gain")),
        "§6.2 (Fig. 8): \"the attention scores on critical tokens have already increased significantly after the "
        "context denoising step. Furthermore, after the Emphasizing Training stage, there is an additional "
        "improvement. Additionally, we observe that a larger learning rate results in more pronounced "
        "improvements [...] a saturation point exists (e.g., at 8e-5), beyond which the benefits plateau\" (a "
        "plateau keeps the largest lr's gain above the smallest's)."),
    "CD-Fig10": Headline(
        (Claim("cdt: accuracy", "ce: accuracy", "higher", "at the last checkpoint"),
         Claim("cdt: IG critical", "ce: IG critical", "higher", "IG share on critical tokens at the last checkpoint"),
         Claim("cdt: attention critical", "ce: attention critical", "higher",
               "attention share on critical tokens at the last checkpoint")),
        "§6.3 with Figs. 9-10: over the same steps CDT \"consistently and largely improves the model performance "
        "[...] while SFT even demonstrates a decline\", and \"Such a great improvement can be largely attributed "
        "to the EM process shown in Figure 10\" (\"both the information flow and attention distribution "
        "progressively improve\"): CDT ahead of the CE fine-tune of the same steps, on accuracy and on the IG and "
        "attention shares of critical tokens (any fine-tune rises; rising alone is shown, not tested)."),
    "CD-Fig14": Headline(
        (Claim("after CDT", "before CDT (CE)", "higher",
               "share of the question's attention on chunks holding critical facts, mean over layers"),),
        "App. F (Fig. 14): \"after CDT training, the model not only attends to the question but also shows "
        "significantly increased attention to relevant contextual information\" (the paper shows the layer it "
        "found clearest, 24 of 32; we test the mean over layers and show each layer beside it)."),
    "CD-Tab2": Headline(
        (Claim("cdt: RULER-13", "rp_standard: RULER-13", "higher", "at the target"),
         Claim("cdt: RULER-13", "rp_longce: RULER-13", "higher", "at the target"),
         Claim("cdt: LongPPL", "rp_standard: LongPPL", "lower", "at the target"),
         Claim("cdt: LongPPL", "rp_longce: LongPPL", "lower", "at the target"),
         Claim("cdt: BABILong", "rp_standard: BABILong", "higher", "mean over the lengths up to the target"),
         Claim("cdt: BABILong", "rp_longce: BABILong", "higher", "mean over the lengths up to the target")),
        "§5.2 (Table 2): \"our CDT method achieves the best model performance on the RULER benchmark from 32K to "
        "128K settings. Besides, in the language model task, CDT exhibits the lowest LongPPL\"; on BABILong \"our "
        "CDT achieves the highest overall score in each group\" (Llama-3-8B-Base: RULER 64K CE 13.82, LongCE "
        "71.50, CDT 73.40; LongPPL 3.90, 3.55, 3.04; BABILong avg 29.56, 33.48, 33.76)."),
    "CD-Mem": Headline(
        (Claim("ours: longest length", "naive: longest length", "higher", "tokens scored within the memory cap"),),
        "§4.1: \"computing the IG score in long-context scenario is highly GPU memory-intensive [...] Even with "
        "8x92GB GPUs (H20), the maximum computable sequence length for the IG score is limited to 12K\": the "
        "direct Eq. 1 runs out of memory where a memory-linear score does not. A peak memory repeats for a fixed "
        "computation and lengths double, so the longest length is exact at that resolution (standard error 0)."),
    "CD-Cost": Headline(
        (Claim("cdt / ce", PAPER_COST_ARM, "lower", "seconds per step, mean over interleaved rounds"),),
        "§6.3: \"CDT adds merely one lightweight backward [...] and one extra forward, resulting in minimal "
        "wall-clock overhead relative to standard training\"; \"approximately 0.5 hours in 8xA100 GPUs for every "
        "50 steps compared with SFT\", with Table 8's 6.5 h per epoch of 125 steps (2.6 h per 50 steps): a CDT "
        "step costs at most 2.6 / 2.1 = 1.24 SFT steps (3.1 / 2.6 = 1.19 if the 6.5 h is SFT's)."),
}
