"""The trained arms' own step times against RP-Cost's and CD-Cost's interleaved benchmark, in one command.

RP-Cost and CD-Cost show beside each benchmarked arm the step time of the arm trained in the reproduce. The two
agree only when they time the same work under the same conditions: the same rows (the arm's prepared batches,
whose packed documents get a dense mask: at 1,024 tokens that alone costs about 40% of a CE step on the tiny
model), the same torch threads, and no stage running beside the trained arm (beside another 1-thread stage a skip
step ran 30% slower, beside a Standard one hardly at all, so the reproduce's side-by-side arms had ratios that
depended on their neighbours: 3.56x for skip against the benchmark's 2.27x). The reproduce therefore trains
:data:`repro.recipes.plans.TIMED_ARMS` one at a time on all the cores, and the benchmark runs on their rows at
that thread count.

:func:`measure_timed_arms` checks it without a full reproduce: from an untrained base of the profile's shape (step
time does not depend on the weights) it trains each timed arm alone with :class:`repro.train.Trainer` for a few
steps on its own prepared rows, runs the two benchmarks on the same rows at the same threads, and compares each
arm's ratio to the reference (Standard for RP-Cost, CE, i.e. ``rp_standard``, for CD-Cost). In the benchmark
every timed step follows an untimed step of its own arm (``settle``, :func:`repro.timing.interleaved_rounds`), as
a trained step follows the arm's previous one: right after a bigger arm's step, the Standard step ran about 10%
slower than trained alone (0.72 s against 0.65 s), which put every benchmark ratio about 10% below the trained one.

The trained arms are interleaved the same way: each arm trains in ``rounds`` chunks of ``steps`` steps, the arms in
turn, every chunk resuming from the arm's checkpoint of the previous one; the first ``settle`` steps of a chunk are
untimed. A trained arm's ratio is the median over rounds of its median step over the reference's median step in
the same round, as the benchmark's, shown with the SE over rounds. Trained one after another instead (20 steps
each), the reference's step drifted between arms by as much as the goal allows: rp_standard trained three times in one
process took 0.686, 0.757 and 0.691 s/step, and in one run its trained step (0.743 s) was 16% above its
benchmarked one (0.642 s) while every other arm's agreed within 7%, which left 3 of 5 ratios outside 1.15x.
"""

from __future__ import annotations

import math
import shutil
import statistics
from dataclasses import replace
from pathlib import Path
from typing import Any, Sequence

from repro.arms import ArmData, build_arm, prepare_model
from repro.bench.cdt_cost import measure_cd_step_costs, prepared_rows
from repro.bench.selfdistill_cost import COST_ARMS, measure_rp_step_costs
from repro.data.tokenizer import load_tokenizer
from repro.methods.prepared import PreparedBatches
from repro.methods.selfdistill import longce_config
from repro.models import build_tiny, load_model, rope_parameters
from repro.recipes.plans import TIMED_ARMS, timed_threads
from repro.reports.cdt_training import RUN_NAMES as CD_RUN_NAMES
from repro.reports.selfdistill_training import RUN_NAMES as RP_RUN_NAMES
from repro.stages.arms import prepare_extension_data
from repro.stages.cache import as_profile
from repro.stages.corpus import build_corpus
from repro.stages.extension import metrics
from repro.train import Trainer

GOAL = 1.15
"""The trained arms' ratio within this factor of the benchmark's."""
RP_BENCH = {run: arm for arm, run in RP_RUN_NAMES.items()}
"""Trained arm -> its RP-Cost arm (the report's :data:`repro.reports.selfdistill_training.RUN_NAMES`, inverted)."""
CD_BENCH = {run: arm for arm, run in CD_RUN_NAMES.items() if arm != "ce"}
"""Trained arm -> its CD-Cost arm (the reference: ``rp_standard``, CD-Cost's ``ce``)."""


def _untrained_base(p, run_dir: Path, tok) -> Path:
    base = run_dir / "untrained-base"
    if not (base / "config.json").exists():
        max_pos = max(max(p.eval.lengths), p.extend.target_window) * 2
        model = build_tiny(p.model, len(tok), max_pos, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id,
                           p.base.seed)
        model.save_pretrained(base)
        tok.save_pretrained(base)
    return base


def measure_timed_arms(profile, run_dir: str | Path, arms: Sequence[str] | None = None, rounds: int = 4,
                       steps: int = 6, settle: int = 2, bench_steps: int = 6, progress: bool = True
                       ) -> dict[str, Any]:
    """Train each of ``arms`` (default every :data:`repro.recipes.plans.TIMED_ARMS`; ``rp_standard`` always) from an
    untrained base under ``run_dir``, interleaved: ``rounds`` rounds, in each of which every arm in turn trains
    ``steps`` more steps resumed from its checkpoint, the first ``settle`` of them untimed. Then time RP-Cost's and
    CD-Cost's arms on the same rows at the same threads in ``bench_steps`` interleaved rounds. Returns
    ``{"trained": {arm: [median seconds per timed step, per round]}, "rp": RP-Cost's measurement, "cd": CD-Cost's
    (or None), "threads": ..., "rounds", "steps", "settle"}``."""
    p = as_profile(profile)
    arms = list(dict.fromkeys(["rp_standard", *(arms or TIMED_ARMS)]))
    if bad := [a for a in arms if a not in TIMED_ARMS]:
        raise ValueError(f"arms {bad}; allowed: {', '.join(TIMED_ARMS)}")
    if rounds < 1 or not 0 <= settle < steps or bench_steps < 1:
        raise ValueError(f"rounds={rounds}, steps={steps}, settle={settle}, bench_steps={bench_steps}; allowed: "
                         "rounds >= 1, 0 <= settle < steps, bench_steps >= 1")
    run_dir = Path(run_dir)
    corpus = build_corpus(p, run_dir)
    tok = load_tokenizer(corpus.path / "tokenizer")
    base = _untrained_base(p, run_dir, tok)
    threads = timed_threads(p)
    total = rounds * steps
    rows = {}
    for arm in arms:
        m = build_arm(p, arm, tok, ArmData(corpus_rows=corpus.rows())).method
        rows[arm] = prepare_extension_data(p, arm, m, run_dir, steps=max(total, bench_steps + 1))
        shutil.rmtree(run_dir / f"timed-{arm}", ignore_errors=True)
    trained: dict[str, list[float]] = {a: [] for a in arms}
    for r in range(rounds):
        for arm in arms:
            spec = build_arm(p, arm, tok, ArmData(corpus_rows=corpus.rows()))
            model = load_model(base, attn_implementation=p.model.attn_implementation, **spec.model)
            m = spec.method
            prepare_model(p, m, model)
            cfg = replace(spec.train, max_steps=(r + 1) * steps, checkpoint_every=steps, threads=threads)
            out = run_dir / f"timed-{arm}"
            Trainer(model, PreparedBatches(rows[arm], inner=m), cfg, out, progress=progress).train()
            secs = [x["seconds"] for x in metrics(out)[r * steps:]]
            if len(secs) != steps:
                raise RuntimeError(f"{out}: round {r} logged {len(secs)} steps; expected {steps}")
            trained[arm].append(statistics.median(secs[settle:]))
            del model
    sd, cd = p.selfdistill, p.cdt
    cost_model = load_model(base, rope=rope_parameters("default", sd.rope_theta),
                            attn_implementation=p.model.attn_implementation, max_positions=2 * p.extend.target_window)
    pad = cost_model.config.pad_token_id
    rp_arms = [RP_BENCH[a] for a in arms if a in RP_BENCH]
    rp = measure_rp_step_costs(cost_model, p.extend.batch_size, p.extend.target_window, bench_steps, 1, sd.bf16,
                               longce_config(p), {k: COST_ARMS[k] for k in rp_arms}, progress=progress,
                               batches=prepared_rows(rows["rp_standard"], bench_steps + 1), pad_id=pad,
                               threads=threads or None)
    cdr = None
    if "cdt" in arms:
        cdr = measure_cd_step_costs(cost_model, p.extend.lr, cd.beta, prepared_rows(rows["cdt"], bench_steps + 1),
                                    steps=bench_steps, warmup=1, bf16=sd.bf16, threshold=cd.threshold, pad_id=pad,
                                    threads=threads or None, arms=("ce", "cdt"), progress=progress)
    return {"trained": trained, "rp": rp, "cd": cdr, "threads": threads, "rounds": rounds, "steps": steps,
            "settle": settle}


def _se(xs: Sequence[float]) -> float | None:
    """The SE of the mean of per-round ratios (None below two rounds)."""
    return statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else None


def timed_arms_rows(res: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per trained arm but the reference: its trained and benchmarked seconds, each side's ratio to its
    reference (the median over rounds of the per-round ratios) with the SE over rounds, the ratio of ratios with its
    SE (delta method, the two sides independent) and whether the ratio of ratios is within :data:`GOAL`."""
    t = res["trained"]
    ref_t = t["rp_standard"]
    out = []
    for arm, secs in t.items():
        if arm == "rp_standard":
            continue
        table, bench = ("CD-Cost", res["cd"]) if arm in CD_BENCH else ("RP-Cost", res["rp"])
        name = CD_BENCH.get(arm) or RP_BENCH[arm]
        ref_name = "ce" if arm in CD_BENCH else "Standard"
        b, ref = bench[name], bench[ref_name]
        per_round = [a / s for a, s in zip(secs, ref_t)]
        tr, tr_se = statistics.median(per_round), _se(per_round)  # the median, as the benchmark's ``ratio``
        br, br_se = b["ratio"], _se([a / s for a, s in zip(b["seconds"], ref["seconds"])])
        q = tr / br
        q_se = (q * math.hypot(tr_se / tr, br_se / br)) if tr_se is not None and br_se is not None else None
        out.append({"arm": arm, "table": table, "bench arm": name,
                    "trained s / step": round(statistics.median(secs), 4),
                    "trained rp_standard s / step": round(statistics.median(ref_t), 4),
                    "trained ratio": round(tr, 3), "trained ratio SE": _round(tr_se),
                    "bench s / step": round(b["seconds_per_step"], 4),
                    "bench reference": ref_name, "bench reference s / step": round(ref["seconds_per_step"], 4),
                    "bench ratio": round(br, 3), "bench ratio SE": _round(br_se),
                    "trained / bench": round(q, 3), "trained / bench SE": _round(q_se),
                    f"within {GOAL}x": "yes" if max(q, 1 / q) <= GOAL else "no"})
    return out


def _round(x: float | None) -> float | str:
    return "" if x is None else round(x, 3)
