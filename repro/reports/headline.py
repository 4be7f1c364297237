"""A target's verdict from its declared headline: the comparisons the paper's claim rests on, each tested beyond noise.

A :class:`Headline` is a few :class:`Claim` s taken from the paper's own text (``skip > Standard at the target``,
``30% within noise of FLT``). :func:`check_claims` tests each on our numbers: the gap ``ours[a] - ours[b]`` against
its standard error (the caller's paired test, widened by the training-seed spread), as a two-sided normal test, with
the p-values of one table corrected together by Holm's step-down method, so that several comparisons in one table do
not make a significant one by chance. :func:`headline_verdict` then says:

- ``yes`` when every claim holds beyond noise in the paper's direction;
- ``no`` when none holds and at least one is significant the other way;
- ``tie within noise`` when none holds and none is significant the other way;
- ``partly`` when some claims hold and some do not (only a headline of several claims can say it);
- ``n/a`` when no claim could be tested (a missing arm, or no standard error: a raw number never decides).

A claim of sameness (``expect="same"``: the paper says two arms match) holds when the gap is not significant and is
contrary when it is. Pairs that are not headline claims can be shown beside the verdict; they never decide it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Mapping, Sequence

from repro.stats import Z

EXPECT = ("higher", "lower", "same")
"""What a claim says of ``a`` against ``b``."""
ALPHA = math.erfc(Z / math.sqrt(2))
"""The family-wise error rate: two-sided, the same as a gap beyond :data:`repro.stats.Z` standard errors when a
table makes one comparison (about 0.0455)."""
TIE = "tie within noise"


@dataclass(frozen=True)
class Claim:
    """One comparison a paper's claim rests on: ``a`` against ``b`` on our numbers.

    Attributes:
        a: the arm (row, column) the paper says is better, worse or the same.
        b: the arm it is compared with.
        expect: ``"higher"`` (a > b), ``"lower"`` (a < b) or ``"same"`` (a within noise of b).
        what: the metric and where it is read, for the notes (``"RULER-13 at the target"``).
    """

    a: str
    b: str
    expect: str = "higher"
    what: str = ""

    def __post_init__(self):
        if self.expect not in EXPECT:
            raise ValueError(f"expect={self.expect!r}; allowed: {', '.join(EXPECT)}")
        if self.a == self.b:
            raise ValueError(f"a claim compares two arms; got a=b={self.a!r}")

    def __str__(self) -> str:
        sign = {"higher": ">", "lower": "<", "same": "~"}[self.expect]
        return f"{self.a} {sign} {self.b}" + (f" ({self.what})" if self.what else "")


@dataclass(frozen=True)
class Headline:
    """A target's declared headline.

    Attributes:
        claims: the comparisons, all of which the paper's claim needs.
        source: where the paper says it (section, table, figure), in our words.
    """

    claims: tuple[Claim, ...]
    source: str = ""

    def __post_init__(self):
        if not self.claims:
            raise ValueError("a headline needs at least one claim")


@dataclass(frozen=True)
class Tested:
    """One claim on our numbers.

    Attributes:
        claim: the claim.
        gap: ``ours[a] - ours[b]`` (None when an arm is missing).
        se: its standard error (None without an estimate).
        p: the two-sided p-value of the gap (None when untested).
        adjusted: the Holm-adjusted p-value over the table's claims (None when untested).
        outcome: ``"holds"``, ``"contrary"``, ``"tie"`` or ``"untested"``.
    """

    claim: Claim
    gap: float | None
    se: float | None
    p: float | None
    adjusted: float | None
    outcome: str

    def __str__(self) -> str:
        if self.outcome == "untested":
            why = "an arm is missing" if self.gap is None else "no standard error"
            return f"{self.claim}: untested ({why})"
        return (f"{self.claim}: {self.outcome} (gap {self.gap:+.4g} +- {self.se:.2g}, p {self.p:.3g}, "
                f"Holm {self.adjusted:.3g})")


    def record(self) -> dict[str, Any]:
        """This test as index.json stores it (:meth:`repro.figures.Recorder.result`): the claim's arms, direction and
        words, the gap, its standard error, the raw and Holm-adjusted p-values and the outcome."""
        c = self.claim
        return {"a": c.a, "b": c.b, "expect": c.expect, "what": c.what, "gap": self.gap, "se": self.se,
                "p": self.p, "adjusted": self.adjusted, "outcome": self.outcome}


@dataclass(frozen=True)
class Judgement:
    """A headline's verdict with what it was decided from; unpacks and indexes as the pair ``(verdict, how)``.

    Attributes:
        verdict: ``yes`` / ``no`` / ``partly`` / ``tie within noise`` / ``n/a`` (:func:`headline_verdict`).
        how: the verdict in words, each claim's test, and any context a report adds.
        tested: each claim's test (empty when no headline was judged).
    """

    verdict: str
    how: str
    tested: tuple[Tested, ...] = ()

    def __iter__(self) -> Iterator[str]:
        return iter((self.verdict, self.how))

    def __getitem__(self, i: int) -> str:
        return (self.verdict, self.how)[i]

    @property
    def claims(self) -> tuple[dict[str, Any], ...]:
        """Each claim's test as index.json stores it (:meth:`Tested.record`)."""
        return tuple(t.record() for t in self.tested)

    def with_context(self, context: str, sep: str = ". ") -> "Judgement":
        """The same judgement with ``context`` (pairs shown, never deciding) after ``how``."""
        return Judgement(self.verdict, self.how + (sep + context if context else ""), self.tested)


def two_sided_p(gap: float, se: float) -> float:
    """The two-sided normal p-value of ``gap`` with standard error ``se`` (1.0 for a zero gap with zero SE)."""
    if se < 0 or math.isnan(se) or math.isnan(gap):
        raise ValueError(f"se={se!r}, gap={gap!r}; allowed: a finite gap and se >= 0")
    if se == 0:
        return 1.0 if gap == 0 else 0.0
    return math.erfc(abs(gap) / se / math.sqrt(2))


def holm(pvalues: Sequence[float]) -> list[float]:
    """Holm's step-down adjusted p-values, in the input order: sorted ascending, the i-th (from 0) of m is
    multiplied by ``m - i``, made non-decreasing, capped at 1. A claim is significant when its adjusted p-value is at
    most the family-wise rate (:data:`ALPHA`)."""
    m = len(pvalues)
    order = sorted(range(m), key=lambda i: pvalues[i])
    adjusted, running = [0.0] * m, 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * pvalues[i]))
        adjusted[i] = running
    return adjusted


def check_claims(claims: Sequence[Claim], ours: Mapping[str, float | None],
                se: Callable[[str, str], float | None], alpha: float = ALPHA) -> list[Tested]:
    """Each claim on ``ours`` (arm -> value), ``se(a, b)`` the standard error of ``ours[a] - ours[b]``; the
    p-values of the claims that can be tested are Holm-corrected together."""
    rows = []
    for c in claims:
        a, b = ours.get(c.a), ours.get(c.b)
        gap = None if a is None or b is None else a - b
        s = None if gap is None else se(c.a, c.b)
        rows.append((c, gap, s, None if s is None else two_sided_p(gap, s)))
    tested = [i for i, r in enumerate(rows) if r[3] is not None]
    adjusted = dict(zip(tested, holm([rows[i][3] for i in tested])))
    out = []
    for i, (c, gap, s, p) in enumerate(rows):
        if p is None:
            out.append(Tested(c, gap, s, None, None, "untested"))
            continue
        significant = adjusted[i] <= alpha
        if c.expect == "same":
            outcome = "contrary" if significant else "holds"
        elif not significant:
            outcome = "tie"
        else:
            outcome = "holds" if (gap > 0) == (c.expect == "higher") else "contrary"
        out.append(Tested(c, gap, s, p, adjusted[i], outcome))
    return out


def headline_verdict(tested: Sequence[Tested]) -> Judgement:
    """The :class:`Judgement` of a headline's tested claims (the rules in the module docstring); it unpacks as
    ``(verdict, how)``."""
    outcomes = [t.outcome for t in tested]
    made = [o for o in outcomes if o != "untested"]
    holds, contrary = made.count("holds"), made.count("contrary")
    if not made:
        verdict = "n/a"
    elif holds == len(outcomes):
        verdict = "yes"
    elif holds:
        verdict = "partly"
    elif contrary:
        verdict = "no"
    else:
        verdict = TIE
    how = (f"headline: {holds}/{len(outcomes)} claims hold beyond noise"
           + (f", {contrary} significant the other way" if contrary else "")
           + (f", {made.count('tie')} tied" if made.count("tie") else "")
           + (f", {outcomes.count('untested')} untested" if outcomes.count("untested") else "")
           + f" (two-sided, Holm over {len(made)} at {ALPHA:.3f}): " + "; ".join(map(str, tested)))
    return Judgement(verdict, how, tuple(tested))


def judge(headline: Headline, ours: Mapping[str, float | None],
          se: Callable[[str, str], float | None]) -> Judgement:
    """:func:`headline_verdict` of :func:`check_claims` for a declared headline."""
    return headline_verdict(check_claims(headline.claims, ours, se))


def rejudge(recorded: Sequence[Mapping[str, Any]]) -> Judgement:
    """The judgement of claim tests as index.json records them (:meth:`Tested.record`): each claim's recorded gap and
    standard error tested again by :func:`check_claims` (two-sided, Holm over the recorded claims) and the verdict
    said by :func:`headline_verdict`, so a row's ``agrees`` can be checked against what it was decided from."""
    claims, ours, ses = [], {}, {}
    for i, r in enumerate(recorded):
        c = Claim(f"#{i} {r['a']}", f"#{i} {r['b']}", r["expect"], r.get("what", ""))
        claims.append(c)
        ours[c.a], ours[c.b] = r["gap"], (None if r["gap"] is None else 0.0)
        ses[(c.a, c.b)] = r["se"]
    return headline_verdict(check_claims(claims, ours, lambda a, b: ses[(a, b)]))
