"""LongRecipe's tables (LR-Tab1/2/3/4/6), the training-cost table (LR-Cost) and the LR-Fig2/LR-Fig3 verdicts.

Input is an *LR suite*: ``{checkpoint: {part: record}}`` with the parts of
:func:`repro.recipes.plans.lr_plan` (records as ``stages.evaluate_checkpoint`` returns
them with ``record=True``), plus ``{checkpoint: lm-loss record}`` from
``stages.short_lm_loss``. Scores are percent as in the paper. An arm trained with several
seeds (``flt``, ``flt@seed1``, ...; :mod:`repro.reports.seeds`) is one row, mean ± std across seeds, and
every order verdict counts a gap only when it exceeds twice its paired standard error
(:class:`repro.reports.noise.GapTest`, widened by the training-seed spread). The
general-ability benchmarks (MMLU, GSM8K, HumanEval) cannot run on a tiny
model; the short-window LM loss and base-window NIAH accuracy stand in for
them and are labelled so.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from repro.profiles import Profile
from repro.recipes.plans import TAB1_ARMS
from repro.reports.common import Noise, Report, combine_verdicts, compare, direction_agrees, order_verdict, pct, \
    scale_note, scores_of, significance
from repro.reports.noise import GapTest, macro, niah_m
from repro.reports.seeds import cell, multi_seed_note, seed_groups, seed_mean_std, seeds_label
from repro.stats import gap_se, seed_spread
from repro.tasks.summary import NIAH_M_TASKS, NIAH_TASKS, RULER_TASKS

NIAH_M_ALL = tuple(NIAH_M_TASKS)
"""RULER's multi-key, multi-value and multi-query tasks (NIAH(M), LongRecipe App. E)."""
TAB3_ARMS = ("pose", "longrecipe_wo_t", "longrecipe_random_t", "longrecipe")
"""Table 3 rows: PoSE, w/o T, Random T, LongRecipe."""
NAMES = {"flt": "FLT", "rpes": "RPES", "pose": "PoSE", "longrecipe": "LongRecipe",
         "longrecipe_wo_t": "LongRecipe (w/o T)", "longrecipe_random_t": "LongRecipe (Random T)", "base": "Base model"}

def display(name: str) -> str:
    """The paper's name of an arm (``longrecipe_r10`` -> ``LongRecipe (10%)``)."""
    from repro.methods.arms import ratio_of

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
    v1, how1 = direction_agrees(ours_nm, {k: v[0] for k, v in LR_TAB1.items() if v[0] is not None}, noise=nm_test)
    v2, how2 = direction_agrees(ours_ru, {k: v[1] for k, v in LR_TAB1.items() if v[1] is not None}, noise=ru_test)
    claim = _claim(ours_nm, ("longrecipe", "pose", "rpes"), nm_test)
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
                  agrees=combine_verdicts(v1, v2),
                  note=f"NIAH(M): {how1}; RULER: {how2}. LongRecipe >= PoSE >= RPES on NIAH(M)? {claim}")


def _seeds_note(groups: Mapping[str, Sequence[str]], arms: Sequence[str], names: Mapping[str, str] | None = None) \
        -> str:
    """Which of the table's arms are multi-seed."""
    return multi_seed_note({a: groups[a] for a in arms if a in groups},
                           lambda a: (names or {}).get(a) or display(a))


def _claim(ours: Mapping[str, float | None], order: Sequence[str], noise: Noise) -> str:
    """Is ``order`` descending on ``ours``? Each step counts when significant, ties within noise are named."""
    vals = [ours.get(n) for n in order]
    if any(v is None for v in vals):
        return "n/a"
    steps = [compare(ours[a] - ours[b], noise.se(a, b), noise.z)[0] for a, b in zip(order, order[1:])]
    ties = steps.count("tie")
    verdict = order_verdict(steps.count("higher"), steps.count("lower"), ties)
    return (verdict + " (" + " / ".join(f"{n} {v:.1f}" for n, v in zip(order, vals))
            + (f"; {ties} step(s) tied within noise" if ties else "") + ")")


def lr_tab2(suite, lm, p: Profile, general: dict | None = None) -> Report:
    """Short-context stand-ins before replay, after replay and after merging with the base (Eq. 8); with
    ``general`` (checkpoint name -> its :func:`repro.general.lm_eval_scores` record, paper profile) each of
    ``longrecipe.general_benchmarks`` (MMLU, GSM8K, HumanEval through lm-evaluation-harness) gets a column too.

    Each step counts when significant: NIAH by the paired test over prompts; the LM loss (one mean per
    checkpoint is recorded, no per-window losses) by the training-seed spread of the loss where a stage has
    several seeds, else taken as it is (the note says which).
    """
    window = p.base.window
    groups = seed_groups([*suite, *(n for n in lm if n not in suite)])
    short_test = GapTest(suite, "short", macro(NIAH_TASKS, window))
    rows, loss_pairs, niah_steps, stage_arms, spreads = [], [], [], [], []
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
        losses = {s: [v[1] for v in vals[s] if v[1] is not None] for s in stages}
        spreads += [seed_spread(v) for v in losses.values() if len(v) > 1]
        niahs = {s: seed_mean_std([v[0] for v in vals[s]])[0] for s in stages}
        for s0, s1 in zip(stages, stages[1:]):
            if losses[s0] and losses[s1]:  # the paper: each stage restores general abilities (loss should fall)
                loss_pairs.append((losses[s0], losses[s1]))
            if niahs[s0] is not None and niahs[s1] is not None:  # ... and short-window NIAH should rise
                niah_steps.append(compare(niahs[s1] - niahs[s0], short_test.se(s1, s0), short_test.z))
    pooled = (sum(x ** 2 for x in spreads) / len(spreads)) ** 0.5 if spreads else None

    def loss_se(v0: list[float], v1: list[float]) -> float | None:
        if pooled is None:
            return None
        (a, ka), (b, kb) = [(seed_spread(v), len(v)) if len(v) > 1 else (pooled, 1) for v in (v0, v1)]
        return gap_se(0.0, a, ka, b, kb)

    loss_steps = [compare(sum(v0) / len(v0) - sum(v1) / len(v1), loss_se(v0, v1)) for v0, v1 in loss_pairs]
    lv, loss_how = _steps(loss_steps)
    nv, niah_how = _steps(niah_steps)
    loss_how += (f" (2 SE of the training-seed spread of the loss, pooled {pooled:.4f})" if pooled is not None else
                 " (no per-window losses recorded and one training seed: taken as they are)")
    niah_how += "; " + significance(sum(o != "tie" for o, _ in niah_steps), len(niah_steps), short_test,
                                    sum(not t for _, t in niah_steps))
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
                  agrees=combine_verdicts(lv, nv),
                  note=f"as MMLU rises at each stage in the paper: LM loss falls on {loss_how}; "
                       f"NIAH @{window} rises on {niah_how}")


def _bench_cell(record: dict | None, bench: str) -> str:
    """``accuracy ± SE`` in percent of one benchmark in a general-ability record; ``n/a`` without it."""
    from repro.general import benchmark_accuracy

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
                       "anchor tokens of the impactful-token analysis.",
                       claim_order=("longrecipe", "longrecipe_random_t"))


def lr_tab4(suite, p: Profile) -> Report:
    """The token-ratio sweep (100% is FLT)."""
    from repro.methods import ratio_arm

    arms = {ratio_arm(r, p.longrecipe.sample_ratio): int(round(r * 100)) for r in p.longrecipe.ratios}
    arms["flt"] = 100
    paper = {n: LR_TAB4.get(pc) for n, pc in arms.items()}
    names = {n: f"{pc}%" + (" (FLT)" if n == "flt" else "") for n, pc in arms.items()}
    return _long_table("LR-Tab4", tuple(sorted(arms, key=arms.get)), paper, suite, p,
                       "LR-Tab4 analog: LongRecipe at each token ratio of the target window; 100% is FLT.",
                       names=names)


def _long_table(target_id: str, arms: Sequence[str], paper: Mapping[str, Any], suite, p: Profile, caption: str,
                names: Mapping[str, str] | None = None, claim_order: Sequence[str] = ()) -> Report:
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
    v1, how1 = direction_agrees(nm_ours, {k: v[0] for k, v in paper.items() if v}, noise=nm_test)
    v2, how2 = direction_agrees(ru_ours, {k: v[1] for k, v in paper.items() if v}, noise=ru_test)
    note = f"NIAH(M): {how1}; RULER: {how2}"
    if claim_order:
        note += f". {' >= '.join(claim_order)} on NIAH(M)? {_claim(nm_ours, claim_order, nm_test)}"
    cap = (f"{caption} Percent at the target window {target} ({p.longrecipe.eval_samples} examples x "
           f"{len(p.eval.suite_depths)} depths per task; NIAH(M) SE = its standard error over those prompts); "
           f"base-doable = mean over the tasks the base model does at its window "
           f"({', '.join(doable_tasks(suite, p)) or 'none'}). {_seeds_note(groups, arms, names)} "
           f"Scale: {scale_note(p, p.longrecipe.eval_samples)}.")
    return Report(target_id, [{"name": target_id, "rows": rows, "columns": list(rows[0]) if rows else [],
                               "caption": cap}],
                  ours="; ".join(f"{r['method']} {r[f'NIAH(M) @{target}']}/{r[f'RULER @{target}']}" for r in rows),
                  agrees=combine_verdicts(v1, v2), note=note)


def lr_tab6(p: Profile, seconds: float | None, tokens: int | None) -> Report:
    """The LongRecipe configuration actually used beside the paper's Table 6 (Llama3-8B, 80K)."""
    e, lr = p.extend, p.longrecipe
    n = max(1, int(round(lr.sample_ratio * e.target_window)))
    rope = "none (RoPE unchanged)" if e.rope_type == "default" else f"{e.rope_type} base {e.rope_theta}"
    ours = {"extended context length": str(e.target_window), "training sample length": f"{n} ({lr.sample_ratio:.0%})",
            "RoPE scaling (dynamic NTK base)": rope, "RoPE factor": str(e.rope_factor or "-"),
            "batch size": str(e.batch_size), "steps": str(e.steps),
            "total tokens": "-" if tokens is None else f"{tokens:,}", "learning rate": f"{e.lr:g}",
            "hardware": "CPU (this machine)", "hours to train": "-" if seconds is None else f"{seconds / 3600:.3f}"}
    rows = [{"setting": k, f"ours ({p.name})": ours[k], "paper (Llama3-8B 80K)": v} for k, v in LR_TAB6.items()]
    return Report("LR-Tab6", [{"name": "LR-Tab6", "rows": rows, "columns": list(rows[0]),
                               "caption": f"LongRecipe training configuration: the {p.name} profile beside LongRecipe "
                                          "Table 6 (Llama3-8B at 80K). Tokens and time are measured on the "
                                          "longrecipe arm's run."}],
                  ours=f"{n}-token samples to {e.target_window}, batch {e.batch_size}, {e.steps} steps, lr {e.lr:g}",
                  agrees="n/a", note="configuration table; nothing to agree with")


def cost_rows(runs: Mapping[str, Mapping[str, Any]], reference: str = "flt") -> list[dict]:
    """Per-arm cost as ratios to ``reference``.

    ``runs[name]`` holds ``seconds_per_step`` (median compute time of the steps), optionally
    ``data_seconds_per_step`` (the read of a prepared batch) and ``prepare_seconds_per_step`` (the
    one-time preparation before training, per step; shown, not compared), ``tokens_per_step``
    (sample tokens, padding excluded) and ``flops_per_step``. ``wall vs FLT`` compares compute
    plus data per step.
    """
    def wall(r):
        return r["seconds_per_step"] + r.get("data_seconds_per_step", 0.0)

    ref = runs.get(reference)
    rows = []
    for name, r in runs.items():
        row = {"method": display(name), "seconds/step (compute)": round(r["seconds_per_step"], 4),
               "data seconds/step": round(r["data_seconds_per_step"], 4) if "data_seconds_per_step" in r else "-",
               "preparation seconds/step (before training)":
                   round(r["prepare_seconds_per_step"], 4) if "prepare_seconds_per_step" in r else "-",
               "tokens/step": round(r["tokens_per_step"], 1), "GFLOPs/step": round(r["flops_per_step"] / 1e9, 3)}
        for key, col in (("seconds_per_step", "time vs FLT"), ("tokens_per_step", "tokens vs FLT"),
                         ("flops_per_step", "FLOPs vs FLT")):
            row[col] = round(r[key] / ref[key], 3) if ref else "n/a"
        row["wall vs FLT (compute + data)"] = round(wall(r) / wall(ref), 3) if ref else "n/a"
        rows.append(row)
    return rows


def lr_cost(runs: Mapping[str, Mapping[str, Any]], p: Profile, cost_steps: int, reference: str = "flt") -> Report:
    """LR-Cost: :func:`cost_rows` as a table and the verdict on LongRecipe's arm: ``yes`` when it needs <= 35% of
    FLT's FLOPs per step, ``partly`` below 100%, else ``no`` (``cost_steps``: timed steps per arm, for the caption)."""
    rows = cost_rows(runs, reference)
    caption = (f"Per-step cost of each arm as a ratio to FLT ({p.name} profile; median compute time of "
               f"{cost_steps} interleaved steps on this machine; batch {p.extend.batch_size}, target "
               f"{p.extend.target_window}).")
    columns = list(dict.fromkeys(k for r in rows for k in r))
    lr_row = next(r for r in rows if r["method"] == "LongRecipe")
    flops = lr_row["FLOPs vs FLT"]
    return Report("LR-Cost", [{"name": "LR-Cost", "rows": rows, "columns": columns, "caption": caption}],
                  ours=f"LongRecipe: {lr_row['tokens vs FLT']:.2f}x FLT's tokens, {lr_row['FLOPs vs FLT']:.2f}x its "
                       f"FLOPs, {lr_row['time vs FLT']:.2f}x its step time",
                  agrees="yes" if flops <= 0.35 else "partly" if flops < 1 else "no",
                  note="yes when LongRecipe needs <= 35% of FLT's FLOPs per step (paper: ~30% tokens, >85% less "
                       "compute)")


def lr_fig2(summary: Mapping[str, Any]) -> Report:
    """LR-Fig2 verdict from the position statistics' summary (``repro.positions.lr_fig2_summary``): ``yes`` when
    LongRecipe's average token distance is 1.7-2.3x PoSE's and its mean segment 50-130 tokens, else ``partly``.

    The verdict uses the papers' definitions (PoSE, LongRecipe Algorithm 1) on the summary's text; ``ours`` also
    names the LongRecipe reading and text whose segments come nearest the paper's 88 tokens and PoSE's share of
    tokens at positions >= n under the paper's and the official code's first-chunk law, where the summary has
    them."""
    ratio = summary["distance_ratio_longrecipe_pose"]
    ours = (f"LongRecipe/PoSE token distance {ratio:.2f}x at {summary['target']}; "
            f"LongRecipe segment {summary['longrecipe_segment']:.1f} tokens; "
            f"RPES segment {summary['rpes_segment']:.2f} tokens ({summary['rpes_segment_steps']:.2f} steps)")
    if summary.get("nearest_segment"):
        method, text, seg = summary["nearest_segment"]
        ours += f"; nearest 88: {method} on {text} text, {seg:.1f} tokens"
    share = summary.get("share_at_or_beyond_n") or {}
    text = summary.get("text", "mixed")
    if f"pose/{text}" in share and f"pose_official/{text}" in share:
        ours += (f"; PoSE tokens at positions >= n: {share[f'pose/{text}']:.2f} (paper law), "
                 f"{share[f'pose_official/{text}']:.2f} (official)")
    agrees = "yes" if 1.7 <= ratio <= 2.3 and 50 <= summary["longrecipe_segment"] <= 130 else "partly"
    return Report("LR-Fig2", ours=ours, agrees=agrees,
                  note="distance = mean pairwise |dp| (paper undefined); segments = sentence lengths of our "
                       "Python-docs/stdlib corpus under our BPE, split on . ! ? newline; RPES ~0 in +1 steps; "
                       "verdict on the papers' definitions, mixed text")


LR_FIG3 = {"NUM": 0.4, "PRON": 0.15, "AUX": 0.15, "CCONJ": 0.1, "ADP": 0.1}
"""Figure 3's approximate frequencies among the top-20% logit-change tokens (read off the figure)."""


def lr_fig3(analysis, tokenizer, p: Profile, top_anchors: int = 30) -> tuple[dict, Report]:
    """POS frequency of the impactful tokens (overall and per position bin) and the anchor table.

    Returns the curves ``{"tags", "freq", "edges", "base_rate"}`` for the figure and the report
    (a POS table, an anchor table, the verdict: is NUM the most frequent tag among the top tokens?).
    """
    import numpy as np

    from repro.analysis import tokens as ta

    tags, freq, edges = ta.pos_frequency_by_position(analysis.selected, analysis.tags, p.longrecipe.pos_bins)
    base = ta.pos_base_rate(analysis.tags)
    arr = np.asarray(analysis.tags, dtype=str)
    top = ta.pos_base_rate(arr[analysis.selected].tolist())
    order = sorted(top, key=top.get, reverse=True)
    pos_rows = [{"POS": t, "share among top tokens": round(top[t], 4), "share among all tokens": round(base[t], 4),
                 "enrichment": round(top[t] / base[t], 2), "paper (Fig. 3, approx.)": LR_FIG3.get(t, "-")}
                for t in order]
    # anchor table: the anchors ranked by Delta(t), with their selection rate and majority tag
    targets = analysis.samples[:, 1:]
    rows = []
    for a in sorted(analysis.anchors.tolist(), key=lambda v: -analysis.delta[v])[:top_anchors]:
        where = targets == a
        t, c = np.unique(arr[where], return_counts=True)
        rows.append({"token": repr(tokenizer.decode([int(a)])), "id": int(a),
                     "Delta(t)": round(float(analysis.delta[a]), 2),
                     "count": int(analysis.counts[a]),
                     "share in top tokens": round(float(analysis.selected[where].mean()), 3),
                     "POS (majority)": str(t[np.argmax(c)]) if c.size else "-"})
    frac = p.longrecipe.top_fraction
    first = order[0] if order else None
    num = top.get("NUM", 0.0)
    if first == "NUM":
        verdict = "yes"
    elif num > base.get("NUM", 0.0):
        verdict = "partly"
    else:
        verdict = "no"
    ours = (f"top tags among the top {frac:.0%} tokens: " + ", ".join(f"{t} {top[t]:.2f}" for t in order[:5])
            + f"; NUM {num:.2f} vs {base.get('NUM', 0.0):.2f} among all tokens; {len(analysis.anchors)} anchor types")
    cap = (f"LR-Fig3 analog: UPOS (spaCy) of the top {frac:.0%} tokens by |logit change| between the base and the "
           f"FLT-extended model at each position, {len(analysis.samples)} {p.longrecipe.analysis_source} texts of "
           f"{analysis.samples.shape[1]} tokens. Scale: {scale_note(p)}.")
    rep = Report("LR-Fig3", [
        {"name": "LR-Fig3", "rows": pos_rows, "columns": list(pos_rows[0]) if pos_rows else [], "caption": cap},
        {"name": "LR-Fig3-anchors", "rows": rows, "columns": list(rows[0]) if rows else [],
         "caption": "The anchor token types (LongRecipe's selection keys), by Delta(t) (Eq. 4); "
                    f"first {top_anchors}."}],
        ours=ours, agrees=verdict,
        note="yes if NUM is the most frequent tag among the top tokens (as in the paper), partly if NUM is only "
             "over-represented relative to all tokens")
    return {"tags": tags, "freq": freq, "edges": edges, "base_rate": base}, rep
