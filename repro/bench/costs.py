"""``python -m repro bench costs``: the method-cost checks of RP-Cost and CD-Cost without a full reproduce.

Writes three tables under ``--figures-dir`` (default ``figures/costs``) through :class:`repro.figures.Recorder`:

- ``TB-TimedArms``: each arm of :data:`repro.recipes.plans.TIMED_ARMS` trained by the trainer, the arms interleaved
  in rounds of a few steps, from an untrained base of the profile's shape, on its own prepared rows, against the
  interleaved benchmark on the same rows at the same threads (:mod:`repro.bench.timed_arms`); goal: ratios within
  1.15x;
- ``RP-Cost-proxies`` and ``CD-Cost-proxies``: the arms on the paper-shaped proxies, measured ratio beside the FLOP
  bound (:mod:`repro.bench.cost_proxies`; the same tables the training notebook adds to RP-Cost and CD-Cost).

``--quick``: the smoke profile, a few steps and the smoke proxies (a check that every part runs, well under a
minute); the tiny profile takes about 15 minutes on 2 CPU cores. Run it alone: the tables compare timings.
"""

from __future__ import annotations

import tempfile
import time

from repro.bench import cost_proxies  # the module: measure_proxies looked up at each call (tests stand in)
from repro.bench.cli import built_profile
from repro.bench.timed_arms import GOAL, measure_timed_arms, timed_arms_rows
from repro.figures import Recorder
from repro.reports.cdt_training import PART_COLUMNS as CD_PARTS
from repro.reports.cost_proxies import proxy_table
from repro.reports.selfdistill_training import PART_COLUMNS as RP_PARTS


def costs_main(profile: str = "tiny", figures_dir: str = "figures/costs", quick: bool = False,
               run_dir: str | None = None, progress: bool = True) -> int:
    profile = "smoke" if quick else profile
    p = built_profile(profile, "bench costs")
    if p is None:
        return 2
    t0 = time.perf_counter()
    rounds, steps, settle, bench_steps = (2, 2, 1, 1) if quick else (4, 6, 2, 8)
    with tempfile.TemporaryDirectory(prefix="repro-costs-") as tmp:
        res = measure_timed_arms(p, run_dir or tmp, rounds=rounds, steps=steps, settle=settle,
                                 bench_steps=bench_steps, progress=progress)
    t1 = time.perf_counter()
    sd, cd = p.selfdistill, p.cdt
    # --quick times the smoke proxy set once (the smoke profile's notebooks time none: its proxies are tested alone)
    (rp_proxy, rp_steps), (cd_proxy, cd_steps) = (((("smoke", 1),) * 2) if quick else
                                                  ((sd.cost_proxy, sd.proxy_steps), (cd.cost_proxy, cd.proxy_steps)))
    rp = cost_proxies.measure_proxies("rp", rp_proxy, rp_steps, bf16=sd.bf16, device=p.run.device,
                                      progress=progress)
    cdp = cost_proxies.measure_proxies("cd", cd_proxy, cd_steps, bf16=sd.bf16, lr=p.extend.lr,
                                       beta=cd.beta, threshold=cd.threshold, device=p.run.device, progress=progress)
    rec = Recorder(figures_dir, profile)
    rows = timed_arms_rows(res)
    rec.table(rows, "TB-TimedArms", caption=(
        f"The timed arms trained alone by the trainer from an untrained {profile} base on their own prepared rows, "
        f"interleaved: {res['rounds']} rounds in which each arm in turn trains {res['steps']} steps resumed from its "
        f"checkpoint (median of each chunk after {res['settle']} untimed; ratio: median over rounds of the "
        f"per-round ratios, SE over rounds; {res['threads'] or 'default'} thread(s)) against "
        f"RP-Cost's and CD-Cost's interleaved benchmark on the same rows at the same threads ({bench_steps} rounds, "
        f"each timed step right after an untimed one of its own arm); "
        f"ratios to rp_standard (trained) and to Standard / ce (benchmark). Goal: within {GOAL}x. "
        f"{t1 - t0:.0f} s."))
    met = sum(r[f"within {GOAL}x"] == "yes" for r in rows)
    rec.result("TB-TimedArms", ours=", ".join(f"{r['arm']} {r['trained ratio']}x trained vs {r['bench ratio']}x "
                                               f"bench" for r in rows),
               agrees=f"{met}/{len(rows)}", note=f"trained ratio within {GOAL}x of the benchmark's")
    for name, proxies, ref, col, parts in (("RP-Cost-proxies", rp, "Standard", "ratio to Standard", RP_PARTS),
                                           ("CD-Cost-proxies", cdp, "ce", "ratio to CE", CD_PARTS)):
        if proxies:
            t = proxy_table(name, proxies, ref, col, parts)
            rec.table(t["rows"], "TB-TimedArms", name=name, columns=t["columns"], caption=t["caption"])
    print(f"wrote {figures_dir}: TB-TimedArms, RP-Cost-proxies, CD-Cost-proxies ({time.perf_counter() - t0:.0f} s)")
    return 0
