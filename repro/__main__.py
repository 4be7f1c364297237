"""Command line.

``python -m repro reproduce [--profile tiny] [--paper NAME] [--only NAME] [--force]``: every figure and table;
``python -m repro bench``: training and generation throughput (``TB-Throughput``);
``python -m repro base-search NAME ...``: train and score base candidates (``TB-BaseSearch``);
``python -m repro profiles``: the profiles.
"""

from __future__ import annotations

import argparse
import sys
import time


def main(argv: list[str] | None = None) -> int:
    from repro.papers import ALL, PAPERS
    from repro.profiles import DESCRIPTIONS, PROFILES

    ap = argparse.ArgumentParser(prog="python -m repro", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("reproduce", help="regenerate figures and tables by running the notebooks")
    r.add_argument("--profile", default="tiny", help=f"one of: {', '.join(PROFILES)} (default tiny)")
    r.add_argument("--paper", default=ALL, help=f"only the stages and tables of one paper: {', '.join(PAPERS)} "
                   f"(default {ALL}; the shared testbed is built for every paper)")
    r.add_argument("--only", default=None, help="run just this notebook (by file stem)")
    r.add_argument("--force", action="store_true", help="recompute cached stages and notebooks")
    r.add_argument("--run-dir", default="runs", help="where checkpoints, results and executed notebooks go")
    r.add_argument("--figures-dir", default=None, help="default: figures/ (tiny) or figures/<profile>/")
    sub.add_parser("profiles", help="list the profiles")
    b = sub.add_parser("bench", help="training and generation throughput in one run (TB-Throughput)")
    b.add_argument("--profile", default="tiny", help="whose model is benchmarked (random weights; default tiny)")
    b.add_argument("--figures-dir", default="figures", help="where TB-Throughput.{csv,md} go (default figures/)")
    b.add_argument("--quick", action="store_true", help="fewer steps, no HF Trainer or side-by-side arm (a check)")
    s_ = sub.add_parser("base-search", help="train and score base-model candidates (TB-BaseSearch)")
    s_.add_argument("names", nargs="*", help="candidate names (default: list them)")
    s_.add_argument("--run-dir", default="runs")
    s_.add_argument("--threads", type=int, default=0, help="torch threads of the base stage (0: the profile's)")
    s_.add_argument("--figures-dir", default="figures", help="where TB-BaseSearch.{csv,md} go")
    args = ap.parse_args(argv)

    if args.cmd == "bench":
        from repro.bench.cli import bench_main

        return bench_main(args.profile, args.figures_dir, args.quick)
    if args.cmd == "base-search":
        from repro.stages.base_search import search_main

        return search_main(args.names, args.run_dir, args.threads, args.figures_dir)

    if args.cmd == "profiles":
        for name in PROFILES:
            print(f"{name:>6}: {DESCRIPTIONS[name]}")
        return 0
    from repro.pipeline import reproduce

    if args.profile not in PROFILES:
        print(f"error: unknown profile {args.profile!r}; allowed: {', '.join(PROFILES)}", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    try:
        status = reproduce(args.profile, only=args.only, force=args.force, run_dir=args.run_dir,
                           figures_dir=args.figures_dir, paper=args.paper)
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    total = time.perf_counter() - t0
    for name, s in status.items():
        print(f"  {name:<16} {s['status']:<7} {s['seconds']:8.1f} s")
    print(f"reproduce --profile {args.profile} --paper {args.paper}: {total:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
