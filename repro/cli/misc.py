"""``profiles``, ``bench`` and ``base-search``: the profiles, training and generation throughput
(``TB-Throughput``; ``bench gpu``: the one-GPU benchmark at Llama-3.2-1B and Llama-3-8B shapes, ``TB-GPU``), and
the base-model candidate search (``TB-BaseSearch``)."""

from __future__ import annotations

import argparse

from repro.bench import gpu_cli
from repro.profiles import DESCRIPTIONS, PROFILES, get_profile


def add_parsers(sub) -> None:
    """The three subcommands' arguments."""
    sub.add_parser("profiles", help="list the profiles")
    b = sub.add_parser("bench", help="training and generation throughput in one run (TB-Throughput)")
    b.add_argument("--profile", default="tiny", help="whose model is benchmarked (random weights; default tiny)")
    b.add_argument("--figures-dir", default="figures", help="where TB-Throughput.{csv,md} go (default figures/)")
    b.add_argument("--quick", action="store_true", help="fewer steps, no HF Trainer or side-by-side arm (a check)")
    b.add_argument("--model", default=None, help="instead: our trainer's step against HF Trainer's at equal "
                   "precision on this model (a folder or a name of `models list`), interleaved; prints, writes nothing")
    b.add_argument("--tokens", type=int, default=512, help="with --model: tokens per row (default 512)")
    b.add_argument("--rows", type=int, default=2, help="with --model: rows per step (default 2)")
    b.add_argument("--rounds", type=int, default=4, help="with --model: timed interleaved rounds (default 4)")
    b.add_argument("--threads", type=int, default=2, help="with --model: torch threads (default 2)")

    gpu_cli.add_parser(b)
    s_ = sub.add_parser("base-search", help="train and score base-model candidates (TB-BaseSearch)")
    s_.add_argument("names", nargs="*", help="candidate names (default: list them)")
    s_.add_argument("--run-dir", default="runs")
    s_.add_argument("--threads", type=int, default=0, help="torch threads of the base stage (0: the profile's)")
    s_.add_argument("--figures-dir", default="figures/base_search", help="where TB-BaseSearch.{csv,md} go")


def main(args: argparse.Namespace) -> int:
    """Run ``profiles``, ``bench`` or ``base-search``."""
    if args.cmd == "bench" and getattr(args, "bench_what", None) == "gpu":
        from repro.bench.gpu import gpu_main  # lazy: keeps every other command's start light

        return gpu_main(args.gpu_quick, args.gpu_figures_dir, args.gpu_budget_s, args.gpu_device)
    if args.cmd == "bench" and getattr(args, "bench_what", None) == "costs":
        from repro.bench.costs import costs_main  # lazy: keeps every other command's start light

        return costs_main(args.costs_profile, args.costs_figures_dir, args.costs_quick)
    if args.cmd == "bench" and args.model is not None:
        from repro.bench.cli import model_bench_main  # lazy: keeps every other command's start light

        return model_bench_main(args.model, args.tokens, args.rows, args.rounds, args.quick, args.threads)
    if args.cmd == "bench":
        from repro.bench.cli import bench_main  # lazy: keeps every other command's start light

        return bench_main(args.profile, args.figures_dir, args.quick)
    if args.cmd == "base-search":
        from repro.pipeline import base_search  # lazy: keeps every other command's start light

        return base_search(args.names, args.run_dir, args.threads, args.figures_dir)

    for name in PROFILES:
        print(f"{name:>6}: {DESCRIPTIONS[name]}{model_size(name)}")
    return 0


def model_size(profile: str) -> str:
    """``" (model: <layers> layers, hidden <h>, <n> parameters)"`` for a profile whose model is built here,
    counted from its config on the meta device (no weights allocated); empty for a pretrained model."""
    # lazy: torch and transformers only for `profiles`; --help and the other commands start without them
    import torch

    from repro.models import n_params, tiny_config  # lazy: loads transformers (as above)

    p = get_profile(profile)
    if p.model.pretrained:
        return f" (model: {p.model.pretrained})"
    from transformers import LlamaForCausalLM  # lazy: as torch above

    with torch.device("meta"):
        model = LlamaForCausalLM(tiny_config(p.model, p.tokenizer.vocab_size, p.extend.target_window, 0, 1, 2))
    n = p.model.num_layers
    return (f" (model: {n} layer{'' if n == 1 else 's'}, hidden {p.model.hidden_size}, vocabulary "
            f"{p.tokenizer.vocab_size}: {n_params(model) / 1e6:.2f}M parameters)")
