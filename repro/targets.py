"""Every figure and table the project regenerates, with the paper's value or claim.

Ids follow the papers' own figure/table numbers (``LR`` LongRecipe, ``RP``
RoPE-perturbed self-distillation, ``CD`` context denoising training, ``PL``
ProLong); ``TB`` ids are the testbed's own figures (no paper counterpart).
The ``paper`` strings summarise the published numbers in our words; they are
what ``figures/INDEX.md`` shows beside our regenerated values.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Target:
    """One regenerated figure or table."""

    id: str
    """Identifier used for file names and the index."""
    what: str
    """What the figure or table shows."""
    paper: str
    """The paper's value or claim, in our words (empty for testbed-only figures)."""
    notebook: str
    """The notebook (without ``.ipynb``) that regenerates it, or the ``python -m repro`` command."""


_ROWS = [
    # testbed
    Target("TB-BaseLoss", "tiny base model pretraining loss over the curriculum "
                          "(copy, then retrieval at growing lengths)",
           "n/a (testbed)", "training"),
    Target("TB-ExtLoss", "training loss of each context-extension arm",
           "n/a (testbed)", "training"),
    Target("TB-NIAH", "single-needle exact match by length x depth, base and extended models",
           "FLT-extended models retrieve at the target window (LongRecipe Tab.1: FLT NIAH(M) 82.3 at 80K)",
           "evaluation"),
    Target("TB-Base", "the chosen base model's per-task accuracy at its own window (100+ fresh prompts per task), "
                      "with standard errors", "n/a (testbed)", "evaluation"),
    Target("TB-BaseSearch", "every base configuration tried: layers, width, steps, tokens, time, per-task accuracy",
           "n/a (testbed)", "base-search"),
    Target("TB-Throughput", "matmul ceiling; training tokens/s v1 vs new settings vs HF Trainer; share of the "
                            "ceiling; our generator vs HF generate", "n/a (testbed)", "bench"),
    Target("TB-GPU", "one GPU, random weights, bf16: Standard-step tokens/s and MFU at Llama-3.2-1B and Llama-3-8B "
                     "shapes (8K-128K tokens), each method's step time as a ratio to Standard, the IG scores' peak "
                     "memory, generation tokens/s (GPU-Throughput, GPU-Methods, GPU-IG, GPU-Generation)",
           "n/a (testbed; throughput anchors: ProLong 2,770-3,095 tokens/s/GPU at 64K on H100; self-distillation "
           "about 1.6x Standard)", "bench gpu"),
    Target("TB-TimedArms", "RP-Cost's and CD-Cost's timed arms trained alone by the trainer against the interleaved "
                           "benchmark on the same rows and threads; the two tables' proxy rows (RP-Cost-proxies, "
                           "CD-Cost-proxies)", "n/a (testbed; a trained arm's step ratio within 1.15x of the "
                           "benchmark's)", "bench costs"),
    # LongRecipe
    Target("LR-Alg1", "position index transformation worked example (App. D, Eq. 5-7)",
           "split on . ! ? newline; first sentence at 0, later sentences after random gaps re-drawn per example",
           "positions"),
    Target("LR-Fig2", "average token distance and mean continuous-segment length per method at 80K/128K",
           "LongRecipe about 2x PoSE's token distance at 128K; LongRecipe segments about 88 tokens; RPES about 0",
           "positions"),
    Target("LR-Fig3", "POS frequency of top-20% logit-change tokens across positions",
           "NUM about 0.4 throughout; PRON, AUX about 0.15; CCONJ, ADP about 0.1", "token_analysis"),
    Target("LR-Tab1", "NIAH(M) / RULER per method plus general abilities",
           "Llama3-8B-I 80K NIAH(M)/RULER: FLT 82.3/75.7, RPES 71.8/71.4, PoSE 68.8/69.9, LongRecipe 78.9/74.5",
           "evaluation"),
    Target("LR-Tab2", "general abilities before replay, after replay, after merging",
           "LongRecipe MMLU 58.6 -> 62.1 -> 63.0", "evaluation"),
    Target("LR-Tab3", "ablation PoSE / w/o T / Random T / LongRecipe",
           "NIAH(M) 68.8 / 71.9 / 70.1 / 78.9", "evaluation"),
    Target("LR-Tab4", "token ratio 10/20/30/40/100%",
           "NIAH(M) 65.3 / 70.9 / 78.9 / 72.0 / 82.3", "evaluation"),
    Target("LR-Cost", "seconds, sample tokens and estimated FLOPs per step of each extension arm, as ratios to FLT",
           "LongRecipe uses about 30% of FLT's tokens and over 85% less training compute (abstract, §1)", "training"),
    Target("LR-Tab6", "training configuration",
           "Llama3-8B 80K: 24K samples, dynamic NTK factor 10, batch 96, 104 steps, lr 5e-5, 240M tokens", "training"),
    # RoPE-perturbed self-distillation
    Target("RP-Fig1a", "accuracy vs normalized answer position, NIAH multikey-2",
           "baseline varies strongly with position; self-distillation flatter and higher", "evaluation"),
    Target("RP-Fig2", "signed query-key distance histogram of attention weights > 1e-3, last 256 queries",
           "self-distillation puts more mass at large distances", "attention_distance"),
    Target("RP-Fig4", "RULER vs wall-clock under matched compute",
           "about 1.6x cost per step, still ahead at equal wall-clock", "evaluation"),
    Target("RP-Tab1/2", "RULER average and per-task scores per method",
           "Llama 64K: Standard 57.3, LongCE 52.5, PoSE 67.5, cyclic 71.3, skip 69.3", "evaluation"),
    Target("RP-Tab4/5", "extrapolation with YaRN at 2x and 4x the training length",
           "Llama 128K: Standard 42.0 -> self-distillation 59.4", "evaluation"),
    Target("RP-Tab8", "objective ablations",
           "base 47.9, ours 59.2, forward KL 57.8, CLM on perturbed view 56.5, fixed skip 55.1, "
           "dropout 48.9, attention noise 49.6", "evaluation"),
    Target("RP-Tab9", "skipping range Y = L/2, L, 2L", "59.6 / 59.2 / 58.9", "evaluation"),
    Target("RP-Tab10", "perturbation schemes NoPE, random dilation, chunked permutation",
           "29.5 / 53.4 / 46.2 vs skip 59.2", "evaluation"),
    Target("RP-Tab11", "KL weight lambda in {0.2, 0.5, 1, 2}", "54.0 / 60.0 / 59.2 / 58.9", "evaluation"),
    Target("RP-Tab7", "short-context abilities (MMLU, HellaSwag, WinoGrande, OpenBookQA) per method",
           "preserved: Llama averages 63.7 base, 64.1 Standard, 63.8 skip", "evaluation"),
    Target("RP-Cost", "wall-clock per step vs Standard (§3.7): naive two passes, prefix-shared skip, cyclic",
           "about 1.6x", "training"),
    Target("RP-Tab14", "NIAH-position: ordinal retrieval of repeated keys",
           "skip 59.4 best; cyclic 42.0 below baseline 44.0", "evaluation"),
    Target("RP-Tab15", "evaluation variance across seeds", "std <= 0.17", "evaluation"),
    # Context denoising training
    Target("CD-TaskB", "synthetic multi-hop task with interference facts (App. B)",
           "supporting + interference (1-2x, one after the last supporting) facts in 10 slots of filler, "
           "optional emoji", "ig_scores"),
    Target("CD-Fig3", "FR vs IG score per token type, correct vs wrong answers",
           "IG separates critical from irrelevant tokens; FR puts much weight on irrelevant ones", "ig_scores"),
    Target("CD-Fig4", "attention on critical tokens before and after manual denoising",
           "about 10x more attention on critical tokens", "ig_scores"),
    Target("CD-Fig5", "IG score vs L2 norm of embedding gradients per token type", "proportional", "ig_scores"),
    Target("CD-Fig7", "critical-token detection: LongPPL vs attention vs embedding gradient (top-30)",
           "embedding gradient finds the most critical and fewest irrelevant tokens", "ig_scores"),
    Target("CD-Fig8", "attention on critical tokens vs learning rate (beta = 1)",
           "grows with lr, saturates near 8e-5", "ig_scores"),
    Target("CD-Fig10", "information flow and attention over EM steps", "rising over steps", "ig_scores"),
    Target("CD-Fig14", "chunked attention map before/after CDT",
           "more attention to key chunks after CDT", "attention_distance"),
    Target("CD-Tab2", "RULER, BABILong (qa1-qa5 generated offline: bAbI-style facts in background text, BABILong's "
                      "scoring), multi-hop accuracy by length and LongPPL per method (CE, LongCE, CDT)",
           "CDT best on RULER 32K/64K and LongPPL; BABILong average 4K-64K: CE 29.56, LongCE 33.48, CDT 33.76",
           "evaluation"),
    Target("CD-Mem", "memory of the IG score vs length (§4.1)", "12K tokens max on 8 x 92 GB (8B model)",
           "ig_scores"),
    Target("CD-Cost", "wall-clock per training step of CDT vs a CE step (and the authors' trainer's step)",
           "one lightweight backward and one extra forward: about 0.5 h more per 50 steps than SFT on 8xA100 "
           "(at most ~1.24x; the authors' trainer: a discarded clean forward and full backward, then two forwards "
           "and two full backwards, ~3x)", "training"),
    # ProLong
    Target("PL-Tab3", "long-document tokens per data source",
           "code repos 98.8B, books 33.2B, ... (>= 64K tokens)", "training"),
    Target("PL-Fig1", "perplexity vs downstream as the long-data ratio grows",
           "perplexity keeps improving while downstream drops at 100% long", "evaluation"),
    Target("PL-Fig3", "short/long data ratio", "best at 60% long / 40% short", "evaluation"),
    Target("PL-Tab7", "training longer than the evaluation length",
           "+4B at 512K beats +4B at 64K on all four categories", "evaluation"),
    Target("PL-Tab15", "throughput: full vs variable-length attention vs + minibatch reordering",
           "2770 / 2780 / 3095 tokens/s/GPU", "training"),
    Target("PL-Tab18", "RoPE base at the extended length", "0.5M 29.1, 4M 48.7, 8M 54.6 average", "evaluation"),
    Target("PL-Tab20", "document masks on/off", "masks win on long (54.6 vs 53.6) and short", "evaluation"),
]

TARGETS: dict[str, Target] = {t.id: t for t in _ROWS}


def get_target(target_id: str) -> Target:
    """The target with this id; a ``KeyError`` lists the known ids otherwise."""
    try:
        return TARGETS[target_id]
    except KeyError:
        raise KeyError(f"unknown target id {target_id!r}; known ids: {', '.join(TARGETS)}") from None
