"""The declared headlines of the ProLong targets: the comparisons the paper's own text rests each claim on.

Keys are target ids of :mod:`repro.targets`; values are :class:`repro.reports.headline.Headline` s whose
``source`` says where the paper makes the claim. The reports judge each target by its headline only
(:func:`repro.reports.headline.judge`); other pairs are shown beside it and never decide.

Arm names are those of :mod:`repro.reports.prolong`: a plain arm (``prolong``, ``pl_nomask``, ...) is its downstream
average at the target (percent); ``short:<arm>`` its NIAH average at the base window (percent); ``loss:<arm>`` its
held-out long-document loss (nats, PL-Fig1's perplexity); PL-Tab15's ``<order>@<k>`` the simulated training speed of
``k`` data-parallel workers with the micro-batches in that order (percent of unsorted's); PL-Tab3's ``code`` and
``books`` the tokens in long documents of each source.
"""

from __future__ import annotations

from repro.reports.headline import Claim, Headline

SHARES = ("pl_long0", "pl_long20", "pl_long40", "pl_long80", "pl_long100")
"""PL-Fig3's long-data shares other than the recipe's 60%."""

HEADLINES: dict[str, Headline] = {
    "PL-Tab3": Headline(
        (Claim("code", "books", what="tokens in documents at or above the long threshold"),),
        "§3.1, Table 3 (long documents >= 64K tokens by source): 'Table 3 shows that books account for the majority "
        "of long-context tokens' of SlimPajama, and concatenating all files of a repository from the Stack gives "
        "'an abundant source of long-context data': Code Repos 98.8B > SP/Books 33.2B long tokens."),
    "PL-Fig1": Headline(
        (Claim("loss:pl_long100", "loss:prolong", "lower", what="held-out long-document loss, 100% vs 60% long"),
         Claim("pl_long100", "prolong", "lower", what="downstream at the target, 100% vs 60% long")),
        "§2.1, Figure 1: 'while using more long data continues to improve PPL, it is clear that using 100% long "
        "data significantly hurts downstream long-context performance' (the caption: design decisions made on "
        "perplexity are not optimal): PPL prefers 100% long over the 60% the downstream average picks."),
    "PL-Fig3": Headline(
        tuple(Claim("prolong", s, what=f"downstream at the target, 60% vs {s[len('pl_long'):]}% long")
              for s in SHARES),
        "§3.2, Figure 3: 'the best average performance is achieved at 60% long data and 40% short data'; the "
        "caption: 'More long data initially improves long-context performance, but then becomes impairing.'"),
    "PL-Tab7": Headline(
        (Claim("pl_train2x", "prolong", what="downstream at the target (the evaluation length)"),),
        "§4, Table 7: 'training at a maximum length beyond the evaluation context window consistently improves the "
        "long-context performance' (+4B tokens at 512K vs at 64K, both evaluated at 64K)."),
    "PL-Tab15": Headline(
        (Claim("sorted_per_worker@8", "unsorted@8", what="simulated training speed on 8 workers, "
                                                          "ProLong's per-worker sort"),),
        "App. A.3, Table 15 (8 H100s, FSDP): variable-length attention 2780 vs full attention 2770 tokens/s/GPU "
        "(+0.4%), '+ Minibatch reordering 3095 (+11.7%)': 'Our strategy of reordering minibatches is important for "
        "realizing the speed benefits from variable-length attention'; App. A.3: 'We sort all the minibatches per "
        "training step by the sum of the squared lengths of documents in the sequence', which ProLong's code does "
        "within each device's share of the step (the per-worker sort; our global sort is shown beside it)."),
    "PL-Tab18": Headline(
        (Claim("prolong", "pl_rope_ntk", what="downstream at the target, 2x the dynamic-NTK base vs it"),
         Claim("pl_rope_ntk", "pl_rope_orig", what="downstream at the target, dynamic-NTK base vs the original")),
        "App. B.1, Table 18 (64K): 'using the original 500,000 frequency base from Llama-3 leads to significant "
        "performance degradation. While dynamic NTK suggests 4x10^6, we find that further scaling it to 8x10^6 "
        "leads to better performance' (long-context average 29.1 / 48.7 / 54.6)."),
    "PL-Tab20": Headline(
        (Claim("prolong", "pl_nomask", what="downstream at the target, document masks vs none"),
         Claim("short:prolong", "short:pl_nomask", what="NIAH at the base window, document masks vs none")),
        "App. B.2, Table 20: 'using document masks in continual long-context training leads to both better "
        "long-context results and short-context performance' (long average 54.6 vs 53.6, short 65.5 vs 64.9)."),
}
