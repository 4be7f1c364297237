"""The evaluation tables of the four papers, computed from result rows (no plotting, no models).

Input everywhere is a *suite*: ``{checkpoint: {part: record}}`` where a part
is one entry of :func:`suite_plan` and a record is what
:func:`repro.stages.evaluate_checkpoint` returns with ``record=True``
(``results`` rows and ``skipped`` cells). Every builder returns a
:class:`Report`: table rows (scores in percent, as the papers print them),
the paper's numbers beside ours where a direct analog exists, a scale note,
and an ``agrees`` verdict computed from the numbers.

"A table of zeros teaches nothing": every table flags the tasks the base model
cannot do at its own window (accuracy below ``eval.doable_threshold``), and
RULER averages are given over all 13 tasks and over the tasks the base can do.
A cell too short for its task reads ``n/a (min length X)``, never 0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations
from statistics import mean
from typing import Any, Mapping, Sequence

from repro.profiles import Profile
from repro.tasks.summary import MULTIKEY, RULER_TASKS, accuracy_by_depth_decile, mean_std

SHORT = {"niah_single_1": "S-1", "niah_single_2": "S-2", "niah_single_3": "S-3", "niah_multikey_1": "MK-1",
         "niah_multikey_2": "MK-2", "niah_multikey_3": "MK-3", "niah_multivalue": "MV", "niah_multiquery": "MQ",
         "vt": "VT", "cwe": "CWE", "fwe": "FWE", "qa_1": "QA-1", "qa_2": "QA-2"}
"""RULER task -> the column names of RoPE-perturbed self-distillation Table 2."""
NIAH_M_TASKS = MULTIKEY + ("niah_multivalue", "niah_multiquery")
NIAH_TASKS = tuple(t for t in RULER_TASKS if t.startswith("niah_"))
MULTIHOP = ("multihop_2", "multihop_3", "multihop_4")
ORDINALS = ("first", "second", "third", "last")
POSITION_SPECS = tuple(f"niah_position:ordinal={o}" for o in ORDINALS)
DECILE_DEPTHS = tuple(round(0.05 + 0.1 * i, 2) for i in range(10))
"""Depths of the answer-position curve: the centre of each decile."""
PAPER_VS_BASELINE = ("flt", "base")
"""Fallback comparison when fewer than two checkpoints have a paper number: extended vs base."""

# -- the papers' numbers, keyed by our checkpoint names ------------------------------------------
RP_NAMES = {"flt": "Standard", "longce": "LongCE", "pose": "PoSE", "rp_cyclic": "Ours (cyclic shift)",
            "rp_skip": "Ours (skip)"}
RP_METHODS = ("rp_skip", "rp_cyclic")
"""Checkpoint names of the self-distillation arms (the 'ours' of RP-Fig1a)."""
RP_TAB1 = {"flt": (85.23, 57.25), "longce": (86.11, 52.51), "pose": (87.20, 67.47), "rp_cyclic": (87.33, 71.30),
           "rp_skip": (87.87, 69.29)}
"""RoPE-perturbed self-distillation Table 1, Llama-3-8B-I RULER at 32K, 64K (half the target, the target)."""
RP_TAB2 = {
    "flt": (57.3, 76.8, 99.4, 67.2, 84.2, 31.0, 0.0, 85.2, 87.1, 70.4, 7.9, 54.7, 46.8, 33.6),
    "longce": (52.5, 98.2, 99.2, 74.6, 93.2, 18.4, 0.0, 90.3, 89.9, 4.9, 4.9, 18.9, 54.6, 35.6),
    "pose": (67.5, 99.6, 100.0, 75.6, 90.2, 70.6, 6.6, 86.2, 90.5, 61.4, 22.7, 79.8, 53.8, 40.2),
    "rp_cyclic": (71.3, 100.0, 100.0, 81.6, 86.8, 88.4, 27.4, 93.1, 93.6, 67.1, 16.1, 80.7, 51.6, 41.0),
    "rp_skip": (69.3, 100.0, 100.0, 75.0, 94.0, 82.6, 20.4, 88.6, 94.5, 43.9, 26.1, 82.5, 53.2, 40.0)}
"""Table 2 (Llama 64K): average, then S-1 ... QA-2 in RULER_TASKS order."""
RP_TAB4 = {"flt": (42.03, 23.90), "longce": (46.54, 26.91), "pose": (58.21, 43.18), "rp_cyclic": (60.89, 45.33),
           "rp_skip": (59.43, 44.74)}
"""Table 4, Llama with YaRN at 2x (128K) and 4x (256K) the 64K training length."""
RP_TAB14 = {"flt": 44.0, "longce": 56.2, "pose": 48.2, "rp_cyclic": 42.0, "rp_skip": 59.4}
"""Table 14, NIAH-position at 64K (baseline = standard fine-tuning)."""
RP_TAB15 = {"flt": ((85.26, 0.08), (57.32, 0.12)), "rp_cyclic": ((87.29, 0.08), (71.25, 0.14)),
            "rp_skip": ((87.82, 0.09), (69.32, 0.09))}
"""Table 15, mean (std) of RULER 32K and 64K over evaluation seeds."""
RP_TAB15_MAX_STD = 0.17
CD_NAMES = {"base": "Llama-3-8B-Base", "flt": "+ CE", "longce": "+ LongCE", "cdt": "+ CDT"}
CD_TAB2 = {"base": (None, None, 13.00), "flt": (36.01, 13.82, 29.56), "longce": (84.02, 71.50, 33.48),
           "cdt": (84.76, 73.40, 33.76)}
"""CDT Table 2 (Llama-3-8B-Base rows): RULER 32K, 64K, BABILong average 4K-64K."""


@dataclass
class Report:
    """One target's tables plus the index entry (``ours``, ``agrees``, ``note``)."""

    target: str
    """Target id (``repro.targets``)."""
    tables: list[dict] = field(default_factory=list)
    """``{"name", "rows", "columns", "caption"}`` per table (file names must match ``[A-Za-z0-9_.-]``)."""
    ours: str = ""
    """Our headline numbers in words."""
    agrees: str = "n/a"
    """``yes`` / ``no`` / ``partly`` / ``n/a``, computed from the numbers."""
    note: str = ""
    """How ``agrees`` was decided, and caveats."""


# -- planning ------------------------------------------------------------------------------------
def ruler_in_suite(p: Profile) -> tuple[str, ...]:
    return tuple(t for t in p.eval.suite_tasks if t in RULER_TASKS)


def yarn_rope(p: Profile, name: str, factor: float, rope_theta: float) -> dict:
    """YaRN reaching ``factor`` x the target from the checkpoint's own training window
    (the base window for ``base``, the target window for extended checkpoints)."""
    window = p.base.window if name == "base" else p.extend.target_window
    length = factor * p.extend.target_window
    return {"rope_type": "yarn", "rope_theta": float(rope_theta), "factor": float(length / window),
            "original_max_position_embeddings": int(window)}


def suite_plan(p: Profile, name: str = "flt", rope_theta: float | None = None) -> dict[str, dict]:
    """Parts of the evaluation of one checkpoint -> keyword arguments of ``evaluate_checkpoint``.

    ``suite``: every suite task x length x suite depth (first evaluation seed);
    ``seeds``: RULER at the target for the other evaluation seeds (RP-Tab15);
    ``deciles``: the decile task at the target at 10 depths (RP-Fig1a);
    ``yarn<f>``: RULER at f x the target with a YaRN override (RP-Tab4/5).
    """
    ev, target = p.eval, p.extend.target_window
    ruler = ruler_in_suite(p)
    cell = {"depths": ev.suite_depths, "samples": ev.suite_samples}
    plan = {"suite": {"tasks": ev.suite_tasks, "lengths": ev.lengths, "seeds": ev.seeds[:1], **cell}}
    if len(ev.seeds) > 1 and ruler:
        plan["seeds"] = {"tasks": ruler, "lengths": (target,), "seeds": ev.seeds[1:], **cell}
    plan["deciles"] = {"tasks": (ev.decile_task,), "lengths": (target,), "depths": DECILE_DEPTHS,
                       "samples": ev.decile_samples, "seeds": ev.seeds[:1]}
    for f in ev.yarn_factors:
        if ruler:
            plan[f"yarn{f:g}"] = {"tasks": ruler, "lengths": (int(round(f * target)),), "seeds": ev.seeds[:1],
                                  "rope": yarn_rope(p, name, f, rope_theta or p.model.rope_theta), **cell}
    return plan


def plan_cost(p: Profile, n_checkpoints: int = 1) -> list[dict]:
    """Generations and prompt tokens per part (upper bounds: cells too short for a task are skipped)."""
    rows = []
    for part, kw in suite_plan(p).items():
        k = len(kw["tasks"]) * len(kw["depths"]) * kw["samples"] * len(kw["seeds"])
        rows.append({"part": part, "generations": k * len(kw["lengths"]) * n_checkpoints,
                     "prompt_tokens": k * sum(kw["lengths"]) * n_checkpoints})
    rows.append({"part": "total", "generations": sum(r["generations"] for r in rows),
                 "prompt_tokens": sum(r["prompt_tokens"] for r in rows)})
    return rows


# -- reading records -----------------------------------------------------------------------------
class Scores:
    """Mean scores of one part of one checkpoint, with the skipped cells."""

    def __init__(self, record: Mapping[str, Any] | None):
        record = record or {}
        self.rows = [r for r in record.get("results", []) if r.get("score") is not None]
        self.skipped: dict[tuple[str, int], int] = {}
        for s in record.get("skipped", []):
            k = (s["task"], s["length"])
            self.skipped[k] = max(self.skipped.get(k, 0), int(s["minimum"]))

    def mean(self, task: str, length: int, eval_seed: int | None = None) -> float | None:
        """Mean score of ``task`` at ``length`` (None when skipped or not evaluated)."""
        if (task, length) in self.skipped:
            return None
        v = [r["score"] for r in self.rows if r["task"] == task and r["length"] == length
             and (eval_seed is None or r.get("eval_seed", 0) == eval_seed)]
        return sum(v) / len(v) if v else None

    def why(self, task: str, length: int) -> str:
        """Why a cell has no number."""
        if (task, length) in self.skipped:
            return f"n/a (min length {self.skipped[(task, length)]})"
        return "n/a (not evaluated)"

    def cell(self, task: str, length: int) -> float | str:
        """Percent (one decimal), or the reason there is none."""
        m = self.mean(task, length)
        return pct(m) if m is not None else self.why(task, length)

    def average(self, tasks: Sequence[str], length: int, eval_seed: int | None = None) -> float | None:
        """Macro average over ``tasks`` (None when any is missing or ``tasks`` is empty)."""
        vals = [self.mean(t, length, eval_seed) for t in tasks]
        return sum(vals) / len(vals) if vals and None not in vals else None

    def niah_m(self, length: int) -> float | None:
        """LongRecipe's NIAH(M): mean of multikey (mean of 1/2/3), multivalue, multiquery."""
        mk = self.average(MULTIKEY, length)
        mv, mq = self.mean("niah_multivalue", length), self.mean("niah_multiquery", length)
        return None if None in (mk, mv, mq) else (mk + mv + mq) / 3


def pct(x: float | None) -> float | None:
    return None if x is None else round(100.0 * x, 1)


def show(x: float | None, why: str = "n/a") -> float | str:
    """Percent with one decimal, or the reason there is none."""
    return pct(x) if x is not None else why


def _scores(suite: Mapping[str, Mapping[str, Any]], name: str, part: str) -> Scores:
    return Scores(suite.get(name, {}).get(part))


def _missing(s: Scores, tasks: Sequence[str], length: int) -> str:
    gone = [t for t in tasks if s.mean(t, length) is None]
    return f"n/a ({len(tasks) - len(gone)}/{len(tasks)} tasks; missing {', '.join(label(t) for t in gone)})"


def scale_note(p: Profile) -> str:
    """The scale of our numbers, printed beside the paper's."""
    ev = p.eval
    if p.model.pretrained:
        model = p.model.pretrained
    else:
        m = p.model
        model = f"tiny {m.num_layers}-layer d={m.hidden_size} Llama trained here"
    return (f"{p.name}: {model}, window {p.base.window} -> {p.extend.target_window}; synthetic tasks, "
            f"{ev.suite_samples} samples x {len(ev.suite_depths)} depths per cell")


# -- what the base can do ------------------------------------------------------------------------
def base_can_do(suite: Mapping[str, Mapping[str, Any]], p: Profile) -> dict[str, dict]:
    """Per suite task: base accuracy at the base window, ``doable`` (True/False/None) and a label."""
    window, thr = p.base.window, p.eval.doable_threshold
    s = _scores(suite, "base", "suite")
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


def _doable_caption(suite, p: Profile, tasks: Sequence[str]) -> str:
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


# -- agreement -----------------------------------------------------------------------------------
def count_verdict(ok: int, total: int) -> str:
    """``yes`` when all ``total`` checks hold, ``no`` when none does, ``partly`` otherwise (``n/a``: none made)."""
    return "n/a" if not total else "yes" if ok == total else "no" if ok == 0 else "partly"


def direction_agrees(ours: Mapping[str, float | None], paper: Mapping[str, float | None],
                     fallback: tuple[str, str] = PAPER_VS_BASELINE) -> tuple[str, str]:
    """Does the order of our checkpoints match the paper's? ``(verdict, how)``.

    With two or more checkpoints that have a paper number: ``yes`` when every
    pair is ordered as in the paper, ``no`` when none is, ``partly`` otherwise;
    pairs tied in our run are left out (and counted in the note), ``n/a`` when all are.
    With fewer: ``fallback = (hi, lo)`` checks ours[hi] > ours[lo] (the
    extended model beats the base at the target, implicit in every paper).
    """
    common = [n for n in paper if paper[n] is not None and ours.get(n) is not None]
    pairs = [(a, b) for a, b in combinations(common, 2) if paper[a] != paper[b]]
    if pairs:
        ordered = [(a, b) for a, b in pairs if ours[a] != ours[b]]
        ties = len(pairs) - len(ordered)
        tie_note = f"; {ties} tied pair(s) left out" if ties else ""
        if not ordered:
            return "n/a", f"every pair of {', '.join(common)} is tied in our run"
        ok = sum((ours[a] - ours[b]) * (paper[a] - paper[b]) > 0 for a, b in ordered)
        return count_verdict(ok, len(ordered)), f"order of {', '.join(common)} as in the paper on {ok}/{len(ordered)} pairs{tie_note}"
    hi, lo = fallback
    if ours.get(hi) is None or ours.get(lo) is None:
        return "n/a", f"needs {hi} and {lo} (or two checkpoints with paper numbers)"
    if ours[hi] == ours[lo]:
        return "n/a", f"one paper method present; {hi} and {lo} are tied"
    return ("yes" if ours[hi] > ours[lo] else "no"), f"one paper method present; checked {hi} > {lo}"


def _headline(s: Scores, suite, p: Profile, length: int) -> tuple[float | None, str]:
    """RULER over the tasks the base can do when there are any, else over all 13."""
    doable = doable_ruler(suite, p)
    if doable:
        return s.average(doable, length), f"RULER-doable ({len(doable)} tasks)"
    return s.average(RULER_TASKS, length), "RULER-13"


# -- RP-Tab1/2 -----------------------------------------------------------------------------------
def rp_tab1_2(suite, p: Profile) -> Report:
    """Per-task RULER at the target (Table 2 shape) and RULER average per length (Table 1 shape)."""
    target = p.extend.target_window
    can = base_can_do(suite, p)
    doable = doable_ruler(suite, p)
    cols = ["model", "source", "Avg-13", "Avg-doable", *SHORT.values()]
    rows = [{"model": "base can do it at its window", "source": f"base @{p.base.window}", "Avg-13": "",
             "Avg-doable": f"{len(doable)} tasks", **{SHORT[t]: can[t]["label"] for t in ruler_in_suite(p)}}]
    avg = {}
    for name in suite:
        s = _scores(suite, name, "suite")
        avg[name] = s.average(RULER_TASKS, target)
        rows.append({"model": name, "source": f"ours @{target}",
                     "Avg-13": show(avg[name], _missing(s, RULER_TASKS, target)),
                     "Avg-doable": show(s.average(doable, target), "n/a (no task the base can do)"),
                     **{SHORT[t]: s.cell(t, target) for t in ruler_in_suite(p)}})
    for name, vals in RP_TAB2.items():
        rows.append({"model": RP_NAMES[name], "source": "paper (Llama-3-8B-I, 64K)", "Avg-13": vals[0],
                     "Avg-doable": "-", **dict(zip(SHORT.values(), vals[1:]))})
    len_cols = ["model", *(f"RULER-13 @{L}" for L in p.eval.lengths), *(f"RULER-doable @{L}" for L in p.eval.lengths),
                "paper RULER 32K / 64K", "scale"]
    by_len = []
    for name in suite:
        s = _scores(suite, name, "suite")
        r = {"model": name}
        for L in p.eval.lengths:
            r[f"RULER-13 @{L}"] = show(s.average(RULER_TASKS, L), _missing(s, RULER_TASKS, L))
            r[f"RULER-doable @{L}"] = show(s.average(doable, L), "n/a (no task the base can do)")
        pap = RP_TAB1.get(name)
        r["paper RULER 32K / 64K"] = f"{RP_NAMES[name]} {pap[0]} / {pap[1]}" if pap else "-"
        r["scale"] = scale_note(p)
        by_len.append(r)
    head = {n: _headline(_scores(suite, n, "suite"), suite, p, target)[0] for n in suite}
    metric = _headline(Scores(None), suite, p, target)[1]
    verdict, how = direction_agrees(head, {k: v[1] for k, v in RP_TAB1.items()})
    ours = "; ".join(f"{n} Avg-13 {show(avg[n])}, {metric} {show(head[n])}" for n in suite)
    cap = (f"RP-Tab2 analog: RULER per task (percent) at the target {target}, with the paper's rows. "
           f"{_doable_caption(suite, p, RULER_TASKS)} Scale: {scale_note(p)}.")
    cap1 = f"RP-Tab1 analog: RULER average per evaluation length. Scale: {scale_note(p)}."
    return Report("RP-Tab1/2", [{"name": "RP-Tab1-2", "rows": rows, "columns": cols, "caption": cap},
                                {"name": "RP-Tab1-2-lengths", "rows": by_len, "columns": len_cols, "caption": cap1}],
                  ours=f"@{target}: {ours}", agrees=verdict, note=f"{metric} at the target: {how}")


# -- RP-Fig1a ------------------------------------------------------------------------------------
def rp_fig1a(suite, p: Profile) -> tuple[dict[str, list[float | None]], Report]:
    """Accuracy by answer-depth decile of ``eval.decile_task`` at the target, per checkpoint."""
    task, target = p.eval.decile_task, p.extend.target_window
    curves, rows, stats = {}, [], {}
    for name in suite:
        s = _scores(suite, name, "deciles")
        rs = [r for r in s.rows if r["task"] == task]
        if not rs:
            rows.append({"model": name, "decile": "all", "accuracy": "n/a (not evaluated)", "n": 0})
            continue
        curve = accuracy_by_depth_decile(rs, task)
        curves[name] = curve
        vals = [v for v in curve if v is not None]
        stats[name] = (mean(vals), max(vals) - min(vals))
        for i, v in enumerate(curve):
            rows.append({"model": name, "decile": f"{i / 10:.1f}-{(i + 1) / 10:.1f}", "accuracy": show(v),
                         "n": sum(min(int(r["depth"] * 10), 9) == i for r in rs)})
    for name, (m, spread) in stats.items():
        rows.append({"model": name, "decile": "mean / spread (max-min)", "accuracy": f"{pct(m)} / {pct(spread)}",
                     "n": ""})
    ours_rp = [n for n in RP_METHODS if n in stats]
    if ours_rp and "flt" in stats:
        hits = [(stats[n][1] < stats["flt"][1]) + (stats[n][0] > stats["flt"][0]) for n in ours_rp]
        verdict = "yes" if min(hits) == 2 else "no" if max(hits) == 0 else "partly"
        how = "self-distillation flatter (smaller spread) and higher (mean) than FLT"
    else:
        verdict, how = "n/a", "no self-distillation checkpoint yet; curves shown for what exists"
    can = base_can_do(suite, p).get(task, {"label": "n/a (not in suite)"})
    ours = "; ".join(f"{n} mean {pct(m)}, spread {pct(sp)}" for n, (m, sp) in stats.items())
    cap = (f"RP-Fig1a data: {task} accuracy (percent) by needle-depth decile at the target {target}, "
           f"{p.eval.decile_samples} samples per decile. Base can do {task} at its window: {can['label']}. "
           f"Scale: {scale_note(p)}.")
    table = {"name": "RP-Fig1a", "rows": rows, "columns": ["model", "decile", "accuracy", "n"], "caption": cap}
    return curves, Report("RP-Fig1a", [table], ours=ours, agrees=verdict, note=how)


# -- CD-Tab2 -------------------------------------------------------------------------------------
def cd_tab2(suite, p: Profile) -> Report:
    """RULER and multi-hop (BABILong-style) accuracy by length per checkpoint."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    can = base_can_do(suite, p)
    hops = [t for t in MULTIHOP if t in p.eval.suite_tasks]
    rows = [{"model": "base can do it at its window", "length": p.base.window,
             **{f"{t.split('_')[1]}-hop": can[t]["label"] for t in hops}}]
    mh_avg = {}
    for name in suite:
        s = _scores(suite, name, "suite")
        upto = [L for L in p.eval.lengths if L <= target]
        per_len = [s.average(hops, L) for L in upto]
        known = [v for v in per_len if v is not None]
        mh_avg[name] = sum(known) / len(known) if known else None
        for L in p.eval.lengths:
            pap = CD_TAB2.get(name)
            rows.append({"model": name, "length": L,
                         "RULER-13": show(s.average(RULER_TASKS, L), _missing(s, RULER_TASKS, L)),
                         "RULER-doable": show(s.average(doable, L), "n/a (no task the base can do)"),
                         **{f"{t.split('_')[1]}-hop": s.cell(t, L) for t in hops},
                         "multi-hop mean": show(s.average(hops, L), _missing(s, hops, L)),
                         "paper RULER 32K/64K, BABILong avg": (
                             f"{CD_NAMES[name]}: {pap[0] or '-'} / {pap[1] or '-'}, {pap[2]}" if pap else "-"),
                         "scale": scale_note(p)})
    verdict, how = direction_agrees(mh_avg, {k: v[2] for k, v in CD_TAB2.items()})
    cols = list(dict.fromkeys(k for r in rows for k in r))
    ours = "; ".join(f"{n} multi-hop mean over lengths <= {target}: {show(v)}" for n, v in mh_avg.items())
    cap = (f"CD-Tab2 analog: RULER and multi-hop accuracy (percent) by length; multi-hop stands in for BABILong. "
           f"{_doable_caption(suite, p, hops)} Scale: {scale_note(p)}.")
    return Report("CD-Tab2", [{"name": "CD-Tab2", "rows": rows, "columns": cols, "caption": cap}],
                  ours=ours, agrees=verdict, note=f"multi-hop mean (BABILong avg in the paper): {how}")


# -- RP-Tab14 ------------------------------------------------------------------------------------
def rp_tab14(suite, p: Profile) -> Report:
    """NIAH-position accuracy per ordinal at the target per checkpoint."""
    target = p.extend.target_window
    specs = [s for s in POSITION_SPECS if s in p.eval.suite_tasks]
    can = base_can_do(suite, p)
    rows = [{"model": "base can do it at its window", **{sp.split("=")[1]: can[sp]["label"] for sp in specs}}]
    avg = {}
    for name in suite:
        s = _scores(suite, name, "suite")
        avg[name] = s.average(specs, target)
        pap = RP_TAB14.get(name)
        rows.append({"model": name, **{sp.split("=")[1]: s.cell(sp, target) for sp in specs},
                     "mean": show(avg[name], _missing(s, specs, target)),
                     "paper (64K NIAH-position)": f"{RP_NAMES[name]} {pap}" if pap else "-", "scale": scale_note(p)})
    verdict, how = direction_agrees(avg, RP_TAB14)
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cap = (f"RP-Tab14 analog: NIAH-position (4 occurrences of one key) accuracy (percent) per ordinal at the "
           f"target {target}. {_doable_caption(suite, p, specs)} Scale: {scale_note(p)}.")
    return Report("RP-Tab14", [{"name": "RP-Tab14", "rows": rows, "columns": cols, "caption": cap}],
                  ours="; ".join(f"{n} {show(v)}" for n, v in avg.items()), agrees=verdict,
                  note=f"mean over ordinals at the target: {how}")


# -- RP-Tab15 ------------------------------------------------------------------------------------
def seed_rows(suite, name: str, p: Profile) -> list[dict]:
    """RULER rows at the target from every evaluation seed (suite part + seeds part), ``seed`` = eval seed."""
    target = p.extend.target_window
    out = []
    for part in ("suite", "seeds"):
        for r in _scores(suite, name, part).rows:
            if r["length"] == target and r["task"] in RULER_TASKS:
                out.append({**r, "seed": r.get("eval_seed", 0)})
    return out


def rp_tab15(suite, p: Profile) -> Report:
    """Mean and sample std over evaluation seeds of RULER-13 and RULER-doable at the target."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    rows, stats = [], {}
    for name in suite:
        rs = seed_rows(suite, name, p)
        row = {"model": name}
        for label, tasks in (("RULER-13", RULER_TASKS), ("RULER-doable", doable)):
            def agg(rows_, tasks=tasks):
                v = Scores({"results": rows_}).average(tasks, target)
                if v is None:
                    raise ValueError("missing tasks")
                return v
            try:
                m, sd, n = mean_std(rs, agg) if rs and tasks else (None, None, 0)
            except ValueError:
                m, sd, n = None, None, 0
            why = (_missing(_scores(suite, name, "suite"), tasks, target) if tasks
                   else "n/a (no task the base can do)")
            row[f"{label} mean (std) @{target}"] = f"{pct(m)} ({100 * sd:.2f})" if m is not None else why
            if label == "RULER-doable" or (label == "RULER-13" and not doable):
                if m is not None:
                    stats[name] = (100 * m, 100 * sd, n)
        row["seeds"] = len({r["seed"] for r in rs})
        pap = RP_TAB15.get(name)
        row["paper RULER 32K / 64K mean (std)"] = (f"{RP_NAMES[name]} {pap[0][0]} ({pap[0][1]}) / {pap[1][0]} "
                                                   f"({pap[1][1]})" if pap else "-")
        row["scale"] = scale_note(p)
        rows.append(row)
    metric = f"RULER-doable ({len(doable)} tasks)" if doable else "RULER-13"
    if not stats or max(n for *_, n in stats.values()) < 2:
        verdict, how = "n/a", "fewer than two evaluation seeds with complete results"
    else:
        worst = max(sd for _, sd, _ in stats.values())
        means = sorted(m for m, _, _ in stats.values())
        gap = min((b - a for a, b in zip(means, means[1:])), default=None)
        if worst <= RP_TAB15_MAX_STD:
            verdict, how = "yes", f"max std {worst:.2f} <= {RP_TAB15_MAX_STD} points"
        elif gap is not None and worst < gap:
            verdict, how = "partly", (f"max std {worst:.2f} points is above the paper's {RP_TAB15_MAX_STD} but below "
                                      f"the smallest gap between checkpoints ({gap:.2f})")
        else:
            verdict, how = "no", f"max std {worst:.2f} points" + (
                f" >= smallest gap {gap:.2f}" if gap is not None else "")
    ours = "; ".join(f"{n} {m:.1f} ({sd:.2f}) over {k} seeds" for n, (m, sd, k) in stats.items()) or "n/a"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cap = (f"RP-Tab15 analog: mean (sample std) over evaluation seeds of RULER (percent) at the target {target}; "
           f"each seed draws fresh examples. {_doable_caption(suite, p, RULER_TASKS)} Scale: {scale_note(p)}.")
    return Report("RP-Tab15", [{"name": "RP-Tab15", "rows": rows, "columns": cols, "caption": cap}],
                  ours=f"{metric}: {ours}", agrees=verdict, note=how)


# -- RP-Tab4/5 -----------------------------------------------------------------------------------
def rp_tab4_5(suite, p: Profile) -> Report:
    """RULER beyond the target: without RoPE change (when in the grid) and with YaRN per factor."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    rows, head = [], {}
    first = p.eval.yarn_factors[0] if p.eval.yarn_factors else None
    for name in suite:
        s = _scores(suite, name, "suite")
        row = {"model": name, f"RULER-13 @{target}": show(s.average(RULER_TASKS, target),
                                                          _missing(s, RULER_TASKS, target))}
        for f in p.eval.yarn_factors:
            L = int(round(f * target))
            y = _scores(suite, name, f"yarn{f:g}")
            if L in p.eval.lengths:
                row[f"RULER-13 @{L} no YaRN"] = show(s.average(RULER_TASKS, L), _missing(s, RULER_TASKS, L))
            row[f"RULER-13 YaRN {f:g}x @{L}"] = show(y.average(RULER_TASKS, L), _missing(y, RULER_TASKS, L))
            row[f"RULER-doable YaRN {f:g}x @{L}"] = show(y.average(doable, L), "n/a (no task the base can do)")
            if f == first:
                head[name] = _headline(y, suite, p, L)[0]
        pap = RP_TAB4.get(name)
        row["paper YaRN 2x / 4x (Llama 128K / 256K)"] = f"{RP_NAMES[name]} {pap[0]} / {pap[1]}" if pap else "-"
        row["scale"] = scale_note(p)
        rows.append(row)
    verdict, how = direction_agrees(head, {k: v[0] for k, v in RP_TAB4.items()}) if first else ("n/a", "no YaRN factor")
    metric = f"RULER-doable ({len(doable)} tasks)" if doable else "RULER-13"
    cols = list(dict.fromkeys(k for r in rows for k in r))
    cap = (f"RP-Tab4/5 analog: RULER (percent) beyond the target {target} with YaRN at evaluation time "
           f"(base: from its {p.base.window} window; extended checkpoints: from {target}). "
           f"{_doable_caption(suite, p, RULER_TASKS)} Scale: {scale_note(p)}.")
    return Report("RP-Tab4/5", [{"name": "RP-Tab4-5", "rows": rows, "columns": cols, "caption": cap}],
                  ours=f"{metric} YaRN {first:g}x: " + "; ".join(f"{n} {show(v)}" for n, v in head.items())
                  if first else "", agrees=verdict, note=how)


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
    import csv
    import io

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(TIDY_COLUMNS), extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def label(task: str) -> str:
    """Short column name of a task spec (``S-1``, ``MH-2``, ``pos-first``)."""
    if task in SHORT:
        return SHORT[task]
    if task.startswith("multihop_"):
        return "MH-" + task.split("_")[1]
    if task.startswith("niah_position:ordinal="):
        return "pos-" + task.split("=")[1]
    return task


def task_percent(suite, p: Profile, length: int) -> dict[str, dict[str, float | None]]:
    """Checkpoint -> short task label -> accuracy in percent at ``length`` (None when n/a)."""
    return {n: {label(t): pct(_scores(suite, n, "suite").mean(t, length)) for t in p.eval.suite_tasks} for n in suite}


def all_reports(suite, p: Profile) -> tuple[dict[str, list], list[Report]]:
    """Every report of the evaluation notebook; also the RP-Fig1a curves."""
    curves, fig1a = rp_fig1a(suite, p)
    reps = [rp_tab1_2(suite, p), fig1a, cd_tab2(suite, p), rp_tab14(suite, p),
            rp_tab15(suite, p)]
    if p.eval.yarn_factors:
        reps.append(rp_tab4_5(suite, p))
    return curves, reps

