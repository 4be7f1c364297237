"""What the base model can do, tidy result rows, and the testbed verdicts (TB-NIAH, TB-BaseLoss, TB-ExtLoss).

"A table of zeros teaches nothing": every paper's table flags the tasks the base model cannot do at
its own window (accuracy below ``eval.doable_threshold``, :func:`base_can_do`) and gives RULER
averages over the tasks the base can do (:func:`doable_ruler`) beside all 13.
"""

from __future__ import annotations

import csv
import io
from typing import Any, Mapping, Sequence

from repro import stats
from repro.profiles import Profile
from repro.reports.common import TIE, Report, compare, label, pct, scores_of
from repro.reports.noise import pair_rows
from repro.tasks.summary import ruler_in_suite
from repro.timing import StepTiming, check_equal_timing


# -- what the base can do ------------------------------------------------------------------------
def base_can_do(suite: Mapping[str, Mapping[str, Any]], p: Profile) -> dict[str, dict]:
    """Per suite task: base accuracy at the base window, ``doable`` (True/False/None) and a label.

    Read from the base's ``window`` part (``TB-Base``'s grid, 100 prompts per task in ``tiny``) when the suite
    has it, else from its ``suite`` part at the base window."""
    window, thr = p.base.window, p.eval.doable_threshold
    s = scores_of(suite, "base", "window")
    if not s.rows:
        s = scores_of(suite, "base", "suite")
    out = {}
    for t in p.eval.suite_tasks:
        acc = s.mean(t, window)
        if "base" not in suite:
            out[t] = {"acc": None, "doable": None, "label": "n/a (no base checkpoint)"}
        elif acc is None:
            out[t] = {"acc": None, "doable": None, "label": s.why(t, window)}
        else:
            ok = acc >= thr
            out[t] = {"acc": acc, "doable": ok, "label": f"{'yes' if ok else 'no'} ({pct(acc)})"}
    return out


def doable_ruler(suite, p: Profile) -> tuple[str, ...]:
    can = base_can_do(suite, p)
    return tuple(t for t in ruler_in_suite(p) if can[t]["doable"])


def doable_caption(suite, p: Profile, tasks: Sequence[str]) -> str:
    can = base_can_do(suite, p)
    no = [label(t) for t in tasks if can[t]["doable"] is False]
    na = [label(t) for t in tasks if can[t]["doable"] is None]
    parts = [f"Base can do it at its window ({p.base.window} tokens, accuracy >= "
             f"{100 * p.eval.doable_threshold:g}%): {sum(bool(can[t]['doable']) for t in tasks)}/{len(tasks)} tasks"]
    if no:
        parts.append(f"cannot: {', '.join(no)}")
    if na:
        parts.append(f"not measurable: {', '.join(na)}")
    return "; ".join(parts) + "."


# -- tidy results --------------------------------------------------------------------------------
TIDY_COLUMNS = ("model", "part", "task", "length", "depth", "eval_seed", "seed", "n_tokens", "score", "status",
                "prediction", "references")


def tidy_rows(suite) -> list[dict]:
    """Every result (one per task x length x depth x seed) and every skipped cell, as flat rows."""
    out = []
    for name, parts in suite.items():
        for part, rec in parts.items():
            for r in rec.get("results", []):
                out.append({"model": name, "part": part, **{k: r.get(k) for k in TIDY_COLUMNS[2:9]},
                            "eval_seed": r.get("eval_seed", 0), "status": "ok", "prediction": r["prediction"],
                            "references": " | ".join(r["references"])})
            for sk in rec.get("skipped", []):
                out.append({"model": name, "part": part, "task": sk["task"], "length": sk["length"],
                            "depth": sk["depth"], "eval_seed": sk.get("eval_seed", 0),
                            "status": f"n/a (min length {sk['minimum']})"})
    return out


def tidy_csv(rows: Sequence[Mapping[str, Any]]) -> str:
    """:func:`tidy_rows` as CSV text (columns :data:`TIDY_COLUMNS`)."""
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(TIDY_COLUMNS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def task_percent(suite, p: Profile, length: int) -> dict[str, dict[str, float | None]]:
    """Checkpoint -> short task label -> accuracy in percent at ``length`` (None when n/a)."""
    return {n: {label(t): pct(scores_of(suite, n, "suite").mean(t, length)) for t in p.eval.suite_tasks} for n in suite}


# -- testbed verdicts (training and evaluation notebooks) -----------------------------------------
def tb_niah(by_length: Mapping[str, Mapping[int, float]], p: Profile,
            tables: Mapping[str, Mapping[tuple[int, float], float]] | None = None,
            results: Mapping[str, Sequence[Mapping[str, Any]]] | None = None) -> Report:
    """TB-NIAH: ``niah_single_1`` accuracy of base and FLT; ``yes`` when FLT beats the base at the target by
    more than 2 standard errors, ``tie within noise`` when by less.

    ``by_length[name][length]`` is the mean accuracy (:func:`repro.evaluate.accuracy_by_length`);
    ``tables[name][(length, depth)]`` (:func:`repro.evaluate.accuracy_table`), when given, becomes the table.
    The standard error is the paired bootstrap over prompts when ``results[name]`` (the result rows) are given,
    else the unpaired binomial ``sqrt(sum acc (1 - acc) / n)`` with ``n = eval.samples x len(eval.depths)``
    per checkpoint (only the means are at hand); the note says which.
    """
    tabs = []
    if tables is not None:
        rows = [{"model": name, "length": L, "depth": d, "accuracy": acc, "n": p.eval.samples}
                for name, t in tables.items() for (L, d), acc in t.items()]
        tabs.append({"name": "TB-NIAH", "rows": rows, "columns": list(dict.fromkeys(k for r in rows for k in r)),
                     "caption": f"niah_single_1, {p.eval.samples} samples per cell, {p.name} profile"})
    target = p.extend.target_window
    base_acc, flt_acc, base_t = by_length["base"][p.base.window], by_length["flt"][target], by_length["base"][target]
    if results is not None:
        def at_target(name):
            return [r for r in results[name] if r["task"] == "niah_single_1" and r["length"] == target]

        _, f, b = pair_rows(at_target("flt"), at_target("base"), ("flt", "base"))
        se = stats.paired_bootstrap(f, b).eval_se if f.size > 1 else None
        how = f"paired bootstrap over the {f.size} prompts at {target}"
    else:
        n = p.eval.samples * len(p.eval.depths)
        se = (flt_acc * (1 - flt_acc) / n + base_t * (1 - base_t) / n) ** 0.5
        how = f"binomial SE from the two means, {n} prompts each (no per-prompt rows given: unpaired)"
    o, tested = compare(flt_acc - base_t, se)
    verdict = {"higher": "yes", "lower": "no", "tie": TIE}[o]
    return Report("TB-NIAH", tabs,
                  ours=f"base @{p.base.window}: {base_acc:.2f}; FLT @{target}: {flt_acc:.2f}; "
                       f"base @{target}: {base_t:.2f}",
                  agrees=verdict, note=f"FLT vs base at {target}: gap {100 * (flt_acc - base_t):.1f} points, "
                                       + (f"SE {100 * se:.1f} ({how}); 2 SE decides" if tested else
                                          "no noise estimate (one prompt): taken as it is"))


def tb_base_loss(metrics: Sequence[Mapping[str, Any]]) -> Report:
    """TB-BaseLoss: steps, final loss and running train exact match of the base curriculum (nothing to agree with)."""
    state = metrics[-1]
    return Report("TB-BaseLoss", ours=f"{len(metrics)} steps; final loss {state['loss']:.3f}; "
                  f"running train exact match {state['method_em']:.2f}", agrees="n/a")


def tb_ext_loss(ext: Mapping[str, Sequence[Mapping[str, Any]]], timings: Mapping[str, StepTiming]) -> Report:
    """TB-ExtLoss: each extension arm's steps, final loss and how its own training run was timed (``timings``:
    arm -> :class:`repro.timing.StepTiming`, as the training notebook takes it from the schedule). Tokens per second
    are given only for the arms timed alike: the largest group timed under one condition with nothing beside it (the
    arms trained alone at equal threads, :func:`repro.timing.check_equal_timing`); an arm trained beside other stages
    has no comparable clock (the same objective ran 3.4x slower per token beside another stage than alone), so its
    cell names the condition instead."""
    alone = [n for n in ext if n in timings and timings[n].beside == 0]
    by_threads: dict[int, list[str]] = {}
    for n in alone:
        by_threads.setdefault(timings[n].threads, []).append(n)
    fair = max(by_threads.values(), key=len, default=[])
    check_equal_timing({n: timings[n] for n in fair}, "TB-ExtLoss tokens per second")
    rows = []
    for name, ms in ext.items():
        t = timings.get(name)
        tps = sum(m["tokens"] for m in ms) / sum(m["seconds"] for m in ms)
        cond = ("not recorded" if t is None else
                f"alone, {t.threads or 'default'} thread(s)" if t.beside == 0 else
                f"beside up to {t.beside} other stage(s), {t.threads} thread(s) each")
        rows.append({"arm": name, "steps": len(ms), "final loss": round(ms[-1]["loss"], 4), "trained": cond,
                     "tokens / s": round(tps) if name in fair else ""})
    cap = ("TB-ExtLoss: each extension arm's final training loss and, for the arms trained alone at the same "
           "threads (one timing condition), tokens per second over all steps. The arms trained side by side have no "
           "comparable clock (a neighbour's load changes it), so their tokens per second are left out; comparisons "
           "of step time use the interleaved benchmarks (LR-Cost, RP-Cost, CD-Cost, PL-Tab15). The losses differ "
           "by objective (CLM, LongCE-weighted, plus a KL term for self-distillation): compare within an objective.")
    return Report("TB-ExtLoss", [{"name": "TB-ExtLoss", "rows": rows, "columns": list(rows[0]) if rows else ["arm"],
                                  "caption": cap}],
                  ours=f"{len(ext)} arms trained; tokens/s compared only among {len(fair)} arms trained alone at "
                       f"{timings[fair[0]].threads if fair else 0} thread(s): "
                       + ", ".join(f"{n} {r['tokens / s']}" for n, r in zip(ext, rows) if n in fair),
                  agrees="n/a")
