"""LongRecipe's tables (LR-Tab1/2/3/4/6), the training-cost table (LR-Cost) and the LR-Fig2/LR-Fig3 verdicts.

Input is an *LR suite*: ``{checkpoint: {part: record}}`` with the parts of
:func:`repro.recipes.plans.lr_plan` (records as ``stages.evaluate_checkpoint`` returns
them with ``record=True``), plus ``{checkpoint: lm-loss record}`` from
``stages.short_lm_loss``. Scores are percent as in the paper. An arm trained with several
seeds (``flt``, ``flt@seed1``, ...; :mod:`repro.reports.seeds`) is one row, mean ± std across seeds, and
every order verdict counts a gap only when it exceeds twice its paired standard error
(:class:`repro.reports.noise.GapTest`, widened by the training-seed spread). Each target's verdict
(``agrees``) comes from its declared headline only (:mod:`repro.claims.longrecipe`, judged by
:func:`repro.reports.headline.judge`: two-sided tests beyond noise, Holm-corrected per table); the other pairs
are shown in the note for context and never decide. The
general-ability benchmarks (MMLU, GSM8K, HumanEval) cannot run on a tiny
model; the short-window LM loss and base-window NIAH accuracy stand in for
them and are labelled so.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from repro.claims import headline_of
from repro.claims.longrecipe import LM_LOSS, NIAH_M, RULER, SHORT_NIAH, on, split_on
from repro.general import benchmark_accuracy
from repro.profiles import Profile
from repro.recipes.plans import TAB1_ARMS
from repro.reports.common import Report, compare, direction_agrees, order_verdict, pct, scale_note, scores_of, \
    significance
from repro.reports.headline import Judgement, judge
from repro.reports.noise import GapTest, macro, niah_m
from repro.reports.seeds import cell, multi_seed_note, seed_groups, seed_mean_std, seeds_label
from repro.stats import Z, gap_se, seed_spread
from repro.tasks.summary import NIAH_M_TASKS, NIAH_TASKS, RULER_TASKS

SE = Callable[[str, str], "float | None"]
"""The standard error of the gap ``ours[a] - ours[b]`` between two arms (None without an estimate)."""

NIAH_M_ALL = tuple(NIAH_M_TASKS)
"""RULER's multi-key, multi-value and multi-query tasks (NIAH(M), LongRecipe App. E)."""
TAB3_ARMS = ("pose", "longrecipe_wo_t", "longrecipe_random_t", "longrecipe")
"""Table 3 rows: PoSE, w/o T, Random T, LongRecipe."""
NAMES = {"flt": "FLT", "rpes": "RPES", "pose": "PoSE", "longrecipe": "LongRecipe",
         "longrecipe_wo_t": "LongRecipe (w/o T)", "longrecipe_random_t": "LongRecipe (Random T)", "base": "Base model"}

def display(name: str) -> str:
    """The paper's name of an arm (``longrecipe_r10`` -> ``LongRecipe (10%)``)."""
    from repro.methods.arms import ratio_of  # lazy: repro.methods loads torch; the reports load without it

    pct = ratio_of(name)
    return f"LongRecipe ({pct}%)" if pct is not None else NAMES.get(name, name)


LR_TAB1 = {"base": (None, None, 65.7), "flt": (82.3, 75.7, 62.2), "rpes": (71.8, 71.4, 61.4),
           "pose": (68.8, 69.9, 62.6), "longrecipe": (78.9, 74.5, 63.0)}
"""Table 1, Llama3-8B-I at 80K: NIAH(M), RULER, MMLU."""
LR_TAB2 = {"flt": (58.1, 58.2, 62.2), "rpes": (54.0, 59.7, 61.8), "pose": (58.1, 60.7, 62.6),
           "longrecipe": (58.6, 62.1, 63.0)}
"""Table 2: MMLU before replay, after replay, after merging (Llama3-8B-I, 30% of 80K)."""
LR_TAB3 = {"pose": (68.8, 69.9), "longrecipe_wo_t": (71.9, 71.7), "longrecipe_random_t": (70.1, 69.8),
           "longrecipe": (78.9, 74.5)}
"""Table 3: NIAH(M), RULER."""
LR_TAB4 = {10: (65.3, 67.4), 20: (70.9, 70.7), 30: (78.9, 74.5), 40: (72.0, 71.0), 100: (82.3, 75.7)}
"""Table 4: token ratio (percent of 80K) -> NIAH(M), RULER."""
LR_TAB6 = {"extended context length": "80K", "training sample length": "24K (30%)",
           "RoPE scaling (dynamic NTK base)": "48.9M", "RoPE factor": "10", "batch size": "96", "steps": "104",
           "total tokens": "240M", "learning rate": "5e-5", "hardware": "1x A800/H100",
           "hours to train": "26 (A800) / 16 (H100)"}
"""Table 6, Llama3-8B at 80K."""


def long_scores(suite, name: str, p: Profile) -> tuple[float | None, float | None]:
    """NIAH(M) and RULER-13 (percent) at the target window."""
    s, t = scores_of(suite, name, "ruler"), p.extend.target_window
    return pct(s.niah_m(t)), pct(s.average(RULER_TASKS, t))


def doable_tasks(suite, p: Profile) -> tuple[str, ...]:
    """NIAH tasks the base model does at its own window (accuracy >= ``eval.doable_threshold``)."""
    s = scores_of(suite, "base", "short")
    return tuple(t for t in NIAH_TASKS if (s.mean(t, p.base.window) or 0.0) >= p.eval.doable_threshold)


def doable_score(suite, name: str, p: Profile) -> float | None:
    """Mean (percent) at the target over the tasks the base can do: where the tiny model has signal."""
    tasks = doable_tasks(suite, p)
    return pct(scores_of(suite, name, "ruler").average(tasks, p.extend.target_window)) if tasks else None


def short_scores(suite, lm: Mapping[str, Mapping], name: str, p: Profile) -> tuple[float | None, float | None]:
    """NIAH average (percent) at the base window and the short-window LM loss."""
    s = scores_of(suite, name, "short")
    rec = lm.get(name)
    return pct(s.average(NIAH_TASKS, p.base.window)), (round(rec["loss"], 4) if rec else None)


def _lm_source(lm: Mapping[str, Mapping]) -> str:
    """Where the LM-loss windows came from (held out or not), from the records."""
    sources = sorted({r.get("source", "corpus windows") for r in lm.values()})
    return "; ".join(sources) or "no LM-loss records"


def _tests(suite, p: Profile) -> tuple[GapTest, GapTest]:
    """The paired tests of NIAH(M) and RULER-13 at the target."""
    target = p.extend.target_window
    return GapTest(suite, "ruler", niah_m(target)), GapTest(suite, "ruler", macro(RULER_TASKS, target))


# -- headlines ------------------------------------------------------------------------------------
def headline(target: str, ours: Mapping[str, float | None], se: SE) -> Judgement:
    """``(verdict, how)`` of ``target``'s declared headline (:mod:`repro.claims.longrecipe`) on ``ours``;
    ``n/a`` when the target declares none."""
    h = headline_of(target)
    if h is None:
        return Judgement("n/a", f"{target} declares no headline claim (repro.claims.longrecipe)")
    return judge(h, ours, se)


def by_metric(values: Mapping[str, Mapping[str, float | None]], ses: Mapping[str, SE]) \
        -> tuple[dict[str, float | None], SE]:
    """``ours`` and ``se`` of a headline read on several metrics: ``values[metric][arm]`` becomes
    ``ours[on(arm, metric)]``, and ``se(on(a, m), on(b, m))`` is ``ses[m](a, b)``; a gap across two metrics
    has no standard error (ValueError)."""
    ours = {on(arm, m): v for m, vs in values.items() for arm, v in vs.items()}

    def se(x: str, y: str) -> float | None:
        (a, ma), (b, mb) = split_on(x), split_on(y)
        if ma != mb or ma not in ses:
            raise ValueError(f"gap {x!r} - {y!r}; allowed: two arms on one metric of {sorted(ses)}")
        return ses[ma](a, b)

    return ours, se


def _context(how: str, *others: str) -> str:
    """A note: the headline first, then the other pairs, shown for context only."""
    rest = "; ".join(o for o in others if o)
    return how + (f". Not deciding (context): {rest}" if rest else "")


def _se(test: GapTest, name: str) -> float | str:
    se = test.arm_se(name)
    return "n/a" if se is None else round(se, 1)


def lr_tab1(suite, lm, p: Profile) -> Report:
    """NIAH(M)/RULER at the target (and with YaRN at 2x) plus the short-context stand-ins per arm."""
    target, window = p.extend.target_window, p.base.window
    groups, lm_groups = seed_groups(suite), seed_groups(lm)
    nm_test, ru_test = _tests(suite, p)
    rows, ours_nm, ours_ru = [], {}, {}
    f = p.eval.yarn_factors[0] if p.eval.yarn_factors else None
    for name in ("base", *TAB1_ARMS):
        if name not in groups:
            continue
        reps = groups[name]
        nm_v, ru_v = zip(*(long_scores(suite, n, p) for n in reps))
        short = [short_scores(suite, lm, n, p) for n in dict.fromkeys(reps + lm_groups.get(name, ()))]
        if name != "base":
            ours_nm[name], ours_ru[name] = seed_mean_std(nm_v)[0], seed_mean_std(ru_v)[0]
        row = {"method": seeds_label(display(name), reps), f"NIAH(M) @{target}": cell(nm_v, scale=1),
               "NIAH(M) SE": _se(nm_test, name), f"RULER @{target}": cell(ru_v, scale=1),
               f"base-doable @{target}": cell([doable_score(suite, n, p) for n in reps], scale=1)}
        if f:
            L = int(round(f * target))
            ys = [scores_of(suite, n, "yarn") for n in reps]
            row[f"NIAH(M) YaRN {f:g}x @{L}"] = cell([y.niah_m(L) for y in ys])
            row[f"RULER YaRN {f:g}x @{L}"] = cell([y.average(RULER_TASKS, L) for y in ys])
        row[f"NIAH @{window} (stand-in)"] = cell([v[0] for v in short], scale=1)
        row[f"LM loss @{window} (stand-in, lower is better)"] = cell([v[1] for v in short], scale=1, digits=4)
        pap = LR_TAB1.get(name)
        row["paper NIAH(M) / RULER / MMLU (Llama3-8B-I 80K)"] = " / ".join("-" if v is None else str(v) for v in pap) \
            if pap else "-"
        rows.append(row)
    _, how1 = direction_agrees(ours_nm, {k: v[0] for k, v in LR_TAB1.items() if v[0] is not None}, noise=nm_test)
    _, how2 = direction_agrees(ours_ru, {k: v[1] for k, v in LR_TAB1.items() if v[1] is not None}, noise=ru_test)
    verdict, how = judged = headline("LR-Tab1", *_long_values(suite, ("longrecipe", "pose"), nm_test, ru_test))
    caption = (f"LR-Tab1 analog at the target window {target}: NIAH(M) = mean of MK-1/2/3, MV, MQ; RULER = 13 tasks; "
               f"base-doable = mean over the tasks the base model does at its window "
               f"({', '.join(doable_tasks(suite, p)) or 'none'}) "
               f"({p.longrecipe.eval_samples} examples x {len(p.eval.suite_depths)} depths per task; NIAH(M) SE = "
               f"its standard error over those prompts). MMLU/GSM8K/"
               f"HumanEval cannot run on a tiny model: NIAH at the base window and the LM loss on "
               f"{p.longrecipe.short_lm_windows} windows of {window} tokens ({_lm_source(lm)}) stand in for general "
               f"abilities. {_seeds_note(groups, ('base', *TAB1_ARMS))} "
               f"Scale: {scale_note(p, p.longrecipe.eval_samples)}.")
    return Report("LR-Tab1", [{"name": "LR-Tab1", "rows": rows, "columns": list(rows[0]) if rows else [],
                               "caption": caption}],
                  ours="; ".join(f"{r['method']} {r[f'NIAH(M) @{target}']}/{r[f'RULER @{target}']}" for r in rows),
                  agrees=verdict,
                  claims=judged.claims, note=_context(how, f"full order, NIAH(M): {how1}", f"RULER: {how2}"))


def _seeds_note(groups: Mapping[str, Sequence[str]], arms: Sequence[str], names: Mapping[str, str] | None = None) \
        -> str:
    """Which of the table's arms are multi-seed."""
    return multi_seed_note({a: groups[a] for a in arms if a in groups},
                           lambda a: (names or {}).get(a) or display(a))


def _long_values(suite, arms: Sequence[str], nm_test: GapTest, ru_test: GapTest) \
        -> tuple[dict[str, float | None], SE]:
    """``ours`` and ``se`` of a NIAH(M) + RULER headline over ``arms``: each arm's value is its paired test's
    (per-prompt scores averaged over its training seeds), each gap's SE the test's, widened by the seed spread."""
    tests = {NIAH_M: nm_test, RULER: ru_test}
    return by_metric({m: {a: t.value(a) for a in arms} for m, t in tests.items()},
                     {m: t.se for m, t in tests.items()})


class LossTest:
    """Noise of the gaps in the short-window LM loss (LR-Tab2's stand-in) between checkpoints of ``lm``
    (``{checkpoint: stages.short_lm_loss record}``).

    A gap's SE is the paired one over the shared windows (``window_losses`` of the records, the same windows for
    every checkpoint; an arm's replicates averaged per window) widened by the training-seed spread of the loss:
    an arm's own over its seeds (``s^2 / k``), the pooled spread of the multi-seed arms among ``arms`` for a
    single-seed arm (``s^2 / 1``). Without per-window losses only the seed terms remain; with neither, None.
    """

    def __init__(self, lm: Mapping[str, Mapping], arms: Sequence[str]):
        self.lm, self.groups = lm, seed_groups(lm)
        spreads = [seed_spread(v) for a in arms if len(v := self.losses(a)) > 1]
        self.pooled = math.sqrt(sum(x ** 2 for x in spreads) / len(spreads)) if spreads else None

    def losses(self, arm: str) -> list[float]:
        """The mean loss of each replicate of ``arm``."""
        return [self.lm[n]["loss"] for n in self.groups.get(arm, ()) if self.lm[n].get("loss") is not None]

    def value(self, arm: str) -> float | None:
        """Mean loss of ``arm`` over its replicates (None without a record)."""
        v = self.losses(arm)
        return sum(v) / len(v) if v else None

    def windows(self, arm: str) -> np.ndarray | None:
        """Per-window losses of ``arm``, averaged over its replicates; None when a replicate has none or they
        differ in number."""
        w = [self.lm[n].get("window_losses") for n in self.groups.get(arm, ())]
        if not w or any(x is None for x in w) or len({len(x) for x in w}) != 1:
            return None
        return np.mean(np.asarray(w, dtype=float), axis=0)

    def _seed(self, arm: str) -> tuple[float, int]:
        v = self.losses(arm)
        if len(v) > 1:
            return seed_spread(v), len(v)
        return (self.pooled or 0.0), 1

    def se(self, a: str, b: str) -> float | None:
        """SE of ``loss(a) - loss(b)``; None without per-window losses and without any seed spread."""
        if self.value(a) is None or self.value(b) is None:
            return None
        wa, wb = self.windows(a), self.windows(b)
        paired = wa is not None and wb is not None and wa.size == wb.size and wa.size > 1
        if not paired and self.pooled is None:
            return None
        eval_se = float(np.std(wa - wb, ddof=1) / math.sqrt(wa.size)) if paired else 0.0
        return gap_se(eval_se, *self._seed(a), *self._seed(b))

    def method(self) -> str:
        """How :meth:`se` is computed, for the notes."""
        windows = all(self.windows(a) is not None for a in self.groups)
        how = "paired over the shared windows" if windows else "no per-window losses recorded"
        spread = (f"; training-seed spread of the loss, pooled {self.pooled:.4f}" if self.pooled is not None else
                  "; one training seed per stage")
        return how + spread + f" ({Z:g} SE)"


def lr_tab2(suite, lm, p: Profile, general: dict | None = None) -> Report:
    """Short-context stand-ins before replay, after replay and after merging with the base (Eq. 8); with
    ``general`` (checkpoint name -> its :func:`repro.general.lm_eval_scores` record, paper profile) each of
    ``longrecipe.general_benchmarks`` (MMLU, GSM8K, HumanEval through lm-evaluation-harness) gets a column too.

    The verdict is LR-Tab2's headline (replay, then merging, improve LongRecipe's stand-ins beyond noise):
    NIAH by the paired test over prompts, the LM loss by :class:`LossTest`. The same steps of every method are
    shown in the note, for context.
    """
    window = p.base.window
    groups = seed_groups([*suite, *(n for n in lm if n not in suite)])
    short_test = GapTest(suite, "short", macro(NIAH_TASKS, window))
    rows, stage_arms = [], []
    for name in p.longrecipe.replay_methods:
        stages = [name, f"{name}+replay", f"{name}+merge"]
        if not all(s in groups for s in stages):
            continue
        stage_arms += stages
        vals = {s: [short_scores(suite, lm, n, p) for n in groups[s]] for s in stages}
        row = {"method": display(name)}
        for label, s in zip(("before replay", "after replay", "after merging"), stages):
            row[f"LM loss @{window} {label}"] = cell([v[1] for v in vals[s]], scale=1, digits=4)
            row[f"NIAH @{window} {label}"] = cell([v[0] for v in vals[s]], scale=1)
        for bench in p.longrecipe.general_benchmarks:
            row[f"{bench} before / after replay / after merging"] = " / ".join(
                _bench_cell((general or {}).get(s), bench) for s in stages)
        pap = LR_TAB2.get(name)
        row["paper MMLU before / after replay / after merging"] = " / ".join(map(str, pap)) if pap else "-"
        rows.append(row)
    loss = LossTest(lm, stage_arms)
    loss_steps, niah_steps = [], []
    for s0, s1 in zip(stage_arms, stage_arms[1:]):
        if "+" not in s1:  # the next method's first stage
            continue
        l0, l1 = loss.value(s0), loss.value(s1)
        if l0 is not None and l1 is not None:  # the paper: each stage restores general abilities (loss falls)
            loss_steps.append(compare(l0 - l1, loss.se(s0, s1)))
        n0, n1 = short_test.value(s0), short_test.value(s1)
        if n0 is not None and n1 is not None:  # ... and short-window NIAH rises
            niah_steps.append(compare(n1 - n0, short_test.se(s1, s0), short_test.z))
    _, loss_how = _steps(loss_steps)
    _, niah_how = _steps(niah_steps)
    loss_how += f" ({loss.method()}; untested steps taken as they are)"
    niah_how += "; " + significance(sum(o != "tie" for o, _ in niah_steps), len(niah_steps), short_test,
                                    sum(not t for _, t in niah_steps))
    lr_stages = ("longrecipe", "longrecipe+replay", "longrecipe+merge")
    verdict, how = judged = headline("LR-Tab2", *by_metric(
        {LM_LOSS: {s: loss.value(s) for s in lr_stages}, SHORT_NIAH: {s: short_test.value(s) for s in lr_stages}},
        {LM_LOSS: loss.se, SHORT_NIAH: short_test.se}))
    base_loss = lm.get("base", {}).get("loss")
    caption = (f"LR-Tab2 analog: short-context stand-ins for general abilities (LM loss on windows of {window} "
               f"tokens, {_lm_source(lm)}, lower is better; NIAH average at {window}) after extension, "
               "after pretraining-data replay "
               f"({p.longrecipe.replay_token_fraction:.1%} of the extension tokens at "
               f"{p.longrecipe.replay_lr_ratio:g} x the learning rate) and after merging with the base model "
               f"(lambda = {p.longrecipe.merge_lambdas}). Base model LM loss: "
               f"{'n/a' if base_loss is None else round(base_loss, 4)}. {_seeds_note(groups, stage_arms)} "
               f"Scale: {scale_note(p, p.longrecipe.eval_samples)}."
               + (f" {', '.join(p.longrecipe.general_benchmarks)}: lm-evaluation-harness's own tasks on each "
                  "checkpoint (accuracy ± SE over its samples, in percent; n/a: not run)."
                  if p.longrecipe.general_benchmarks else ""))
    return Report("LR-Tab2", [{"name": "LR-Tab2", "rows": rows, "columns": list(rows[0]) if rows else [],
                               "caption": caption}],
                  ours="; ".join(f"{r['method']} loss " + " -> ".join(str(r[k]) for k in r if k.startswith("LM loss"))
                                 for r in rows),
                  agrees=verdict, claims=judged.claims,
                  note=_context(how, f"every method's steps, as MMLU rises at each stage in the paper: LM loss "
                                     f"falls on {loss_how}", f"NIAH @{window} rises on {niah_how}"))


def _bench_cell(record: dict | None, bench: str) -> str:
    """``accuracy ± SE`` in percent of one benchmark in a general-ability record; ``n/a`` without it."""
    got = benchmark_accuracy(record, bench) if record else None
    return "n/a" if got is None else f"{100 * got[0]:.1f} ± {100 * got[1]:.1f}"


def _steps(outcomes: Sequence[tuple[str, bool]]) -> tuple[str, str]:
    """Verdict and ``"k/n significant steps; t tied within noise"`` of improvements (``higher`` holds)."""
    o = [x for x, _ in outcomes]
    ok, bad, ties = o.count("higher"), o.count("lower"), o.count("tie")
    return order_verdict(ok, bad, ties), (f"{ok}/{ok + bad} significant steps"
                                          + (f", {ties} tied within noise" if ties else ""))


def lr_tab3(suite, p: Profile) -> Report:
    """The ablation: PoSE, LongRecipe w/o T, Random T, LongRecipe."""
    return _long_table("LR-Tab3", TAB3_ARMS, {n: v for n, v in LR_TAB3.items()}, suite, p,
                       "LR-Tab3 analog: w/o T = PoSE's contiguous short samples with the LongRecipe transform; "
                       "Random T = random whole sentences of a target-length sample; LongRecipe = sentences holding "
                       "anchor tokens of the impactful-token analysis.")


def lr_tab4(suite, p: Profile) -> Report:
    """The token-ratio sweep (100% is FLT)."""
    from repro.methods import ratio_arm  # lazy: repro.methods loads torch; the reports load without it

    arms = {ratio_arm(r, p.longrecipe.sample_ratio): int(round(r * 100)) for r in p.longrecipe.ratios}
    arms["flt"] = 100
    paper = {n: LR_TAB4.get(pc) for n, pc in arms.items()}
    names = {n: f"{pc}%" + (" (FLT)" if n == "flt" else "") for n, pc in arms.items()}
    return _long_table("LR-Tab4", tuple(sorted(arms, key=arms.get)), paper, suite, p,
                       "LR-Tab4 analog: LongRecipe at each token ratio of the target window; 100% is FLT.",
                       names=names)


def _long_table(target_id: str, arms: Sequence[str], paper: Mapping[str, Any], suite, p: Profile, caption: str,
                names: Mapping[str, str] | None = None) -> Report:
    """A NIAH(M) + RULER table of ``arms`` judged by ``target_id``'s headline; the full order against the
    paper's is in the note, for context."""
    target = p.extend.target_window
    groups = seed_groups(suite)
    nm_test, ru_test = _tests(suite, p)
    rows, nm_ours, ru_ours = [], {}, {}
    for name in arms:
        if name not in groups:
            continue
        reps = groups[name]
        nm_v, ru_v = zip(*(long_scores(suite, n, p) for n in reps))
        nm_ours[name], ru_ours[name] = seed_mean_std(nm_v)[0], seed_mean_std(ru_v)[0]
        pap = paper.get(name)
        rows.append({"method": seeds_label((names or {}).get(name) or display(name), reps),
                     f"NIAH(M) @{target}": cell(nm_v, scale=1), "NIAH(M) SE": _se(nm_test, name),
                     f"RULER @{target}": cell(ru_v, scale=1),
                     f"base-doable @{target}": cell([doable_score(suite, n, p) for n in reps], scale=1),
                     "paper NIAH(M) / RULER (Llama3-8B-I 80K)": f"{pap[0]} / {pap[1]}" if pap else "-"})
    _, how1 = direction_agrees(nm_ours, {k: v[0] for k, v in paper.items() if v}, noise=nm_test)
    _, how2 = direction_agrees(ru_ours, {k: v[1] for k, v in paper.items() if v}, noise=ru_test)
    verdict, how = judged = headline(target_id, *_long_values(suite, arms, nm_test, ru_test))
    cap = (f"{caption} Percent at the target window {target} ({p.longrecipe.eval_samples} examples x "
           f"{len(p.eval.suite_depths)} depths per task; NIAH(M) SE = its standard error over those prompts); "
           f"base-doable = mean over the tasks the base model does at its window "
           f"({', '.join(doable_tasks(suite, p)) or 'none'}). {_seeds_note(groups, arms, names)} "
           f"Scale: {scale_note(p, p.longrecipe.eval_samples)}.")
    return Report(target_id, [{"name": target_id, "rows": rows, "columns": list(rows[0]) if rows else [],
                               "caption": cap}],
                  ours="; ".join(f"{r['method']} {r[f'NIAH(M) @{target}']}/{r[f'RULER @{target}']}" for r in rows),
                  agrees=verdict,
                  claims=judged.claims, note=_context(how, f"full order, NIAH(M): {how1}", f"RULER: {how2}"))
