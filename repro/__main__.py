"""Command line: ``python -m repro reproduce [--profile tiny] [--paper NAME] [--only NAME] [--force]``."""

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
    args = ap.parse_args(argv)

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
