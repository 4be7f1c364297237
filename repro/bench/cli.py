"""``python -m repro bench``: the throughput benchmark on a profile's model, written as ``TB-Throughput``; ``bench
--model NAME``: our trainer's step against HF ``Trainer``'s on a pretrained model (:func:`model_bench_main`)."""

from __future__ import annotations

import sys
import time

from repro.bench.throughput import BenchConfig, compare_with_hf, run_bench, throughput_summary
from repro.cli.common import CLIError, load_cli_model, model_dir
from repro.figures import Recorder
from repro.io import read_json
from repro.models import build_tiny
from repro.profiles import PROFILES, get_profile


def built_profile(profile: str, what: str):
    """The profile ``profile`` when a benchmark can build its model from the config (smoke, tiny); otherwise None,
    after an error line naming the allowed values (``what``: the benchmark, for the message)."""
    if profile not in PROFILES:
        print(f"error: unknown profile {profile!r}; allowed: {', '.join(PROFILES)}", file=sys.stderr)
        return None
    p = get_profile(profile)
    if p.model.pretrained:
        print(f"error: profile {profile!r} loads {p.model.pretrained}; {what} builds a model from the profile's "
              "config (use smoke or tiny)", file=sys.stderr)
        return None
    return p


def bench_main(profile: str, figures_dir: str, quick: bool = False) -> int:
    p = built_profile(profile, "the benchmark")
    if p is None:
        return 2
    model = build_tiny(p.model, p.tokenizer.vocab_size, 2 * p.extend.target_window, 0, 1, 2)
    cfg = BenchConfig(shapes=((p.base.window, max(p.base.tokens_per_step // p.base.window, 1)),
                              (p.extend.target_window, p.extend.batch_size)))
    if quick:
        cfg = BenchConfig(shapes=cfg.shapes, steps=2, warmup=1, rounds=1, hf_trainer=False, side_by_side=False,
                          gen_prompts=4, gen_new_tokens=4, matmul_n=512)
    t0 = time.perf_counter()
    rows = run_bench(model, cfg)
    rec = Recorder(figures_dir, profile)
    rec.table(rows, "TB-Throughput", caption=f"Throughput of the {profile} model (random weights), every arm in one "
              f"run ({time.perf_counter() - t0:.0f} s); ratios are within this run.")
    rec.result("TB-Throughput", ours=throughput_summary(rows), agrees="n/a")  # a measurement: no paper claim
    print(f"wrote {figures_dir}/TB-Throughput.csv and .md")
    return 0


def model_bench_main(model: str, tokens: int, rows: int, rounds: int, quick: bool = False, threads: int = 2) -> int:
    """``bench --model``: our trainer's step against HF ``Trainer``'s on the model in folder ``model`` (float32
    weights, the CPU), ``rows`` x ``tokens`` random tokens, ``threads`` threads, one warmup round then ``rounds``
    interleaved rounds of one step per arm (``quick``: one round); prints one line per precision (a measurement of
    this machine now: nothing is written)."""
    for flag, value, low in (("--tokens", tokens, 2), ("--rows", rows, 1), ("--rounds", rounds, 1),
                             ("--threads", threads, 1)):
        if value < low:
            raise CLIError(f"{flag} {value}; allowed: an integer >= {low}")
    folder = model_dir(model)
    positions = read_json(folder / "config.json").get("max_position_embeddings")
    if isinstance(positions, int) and tokens > positions:  # before the weights load
        raise CLIError(f"--tokens {tokens}; allowed: at most the model's max_position_embeddings {positions}")
    net = load_cli_model(folder, device="cpu")
    rounds = 1 if quick else rounds
    cfg = BenchConfig(steps=rounds, rounds=rounds, warmup=1, threads=threads)
    print(f"bench {model}: our trainer's step vs HF Trainer's, {rows} rows x {tokens} tokens, {threads} threads, "
          f"1 warmup + {rounds} interleaved round(s)", flush=True)
    compare_with_hf(net, tokens, rows, cfg, progress=not quick)
    return 0
