"""``python -m repro analyze {ig,attention-distance,tokens}``: the analyses of the pipeline on any local model.

- ``ig``: CDT's scores (:func:`repro.analysis.cdt_record.cd_record`): IG, FR, attention and
  embedding-gradient shares per token type on labelled multi-hop prompts at ``--length``, manual denoising and the
  denoising sweep. Writes ``ig.json`` (the record; ``scores[i]["ig_token"]`` has one value per token of sample
  ``i``) .
- ``attention-distance``: RP-Fig2's per-layer query-key distance histograms
  (:func:`repro.analysis.distance_records.model_distances`) on ``--samples`` texts of ``--data`` cut to ``--length``.
  Writes ``attention_distance.json``.
- ``tokens``: LongRecipe's impactful-token analysis (:func:`repro.analysis.tokens.analyse`) of ``--model`` (the
  extended model) against ``--base`` on texts of ``--data``. Writes ``tokens.json`` (shapes, per-position mean
  logit change, anchors with their pieces) and ``anchors.json`` (``{"anchors": [...]}``, what ``train --method
  longrecipe --anchors`` reads).

Every analysis loads its model(s) with their own config; ``--rope-scaling linear:F|dynamic:F|yarn:F`` scales RoPE
training-free (one ``note:``), and a ``--length`` past the positions of a model as loaded is one ``warning:`` line
(:mod:`repro.cli.rope_scaling`); ``tokens`` scales ``--model`` and ``--base`` alike. Each JSON records
``rope_scaling`` and the ``rope_parameters`` loaded (null: the model's own).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from repro.analysis.cdt_record import analysis_min_length, cd_record
from repro.analysis.distance_records import AttentionDistanceConfig, model_distances
from repro.analysis.tokens import analyse
from repro.cli import data
from repro.cli.common import (CLIError, add_device_args, at_most, check_out_outside_data, check_tokenizer_fits,
                              device_args, load_cli_model, load_tokenizer_from, model_dir, output_dir, positive_float,
                              positive_int)
from repro.cli.data import DATA_KINDS
from repro.cli.rope_scaling import add_rope_scaling_arg, parse_rope_scaling, rope_plan
from repro.cli.train_checks import MAX_TARGET
from repro.io import atomic_write_json
from repro.profiles import PROFILES, get_profile, scaled_profile

ANALYSES: tuple[str, ...] = ("ig", "attention-distance", "tokens")
"""The ``analyze`` subcommands."""
MAX_SAMPLES = 10_000
"""Most ``--samples`` (prompts or texts, each run through the model) unless ``REPRO_MAX_SAMPLES`` says otherwise."""
MAX_BINS = 100_000
"""Most ``--bins`` of ``attention-distance`` unless ``REPRO_MAX_BINS`` says otherwise."""
MAX_DATA_BYTES = 1 << 30
"""Most ``--data-bytes`` (bytes read per built-in source) unless ``REPRO_MAX_DATA_BYTES`` says otherwise."""


def check_sizes(args: argparse.Namespace) -> None:
    """Every size-like option of the analysis within its bound, and ``--out`` outside ``--data``, before any work:
    a :class:`CLIError` naming the first that is not."""
    at_most(args.samples, "--samples", "REPRO_MAX_SAMPLES", MAX_SAMPLES)
    at_most(args.length, "--length", "REPRO_MAX_TARGET", MAX_TARGET)
    if getattr(args, "bins", None) is not None:
        at_most(args.bins, "--bins", "REPRO_MAX_BINS", MAX_BINS)
    if getattr(args, "queries", None) is not None and args.queries > args.length:
        raise CLIError(f"--queries {args.queries} is more than the --length {args.length} tokens of a text; allowed: "
                       f"--queries <= {args.length}")
    if getattr(args, "data_bytes", None) is not None:
        at_most(args.data_bytes, "--data-bytes", "REPRO_MAX_DATA_BYTES", MAX_DATA_BYTES)
    check_out_outside_data(args.out, getattr(args, "data", None))
    parse_rope_scaling(getattr(args, "rope_scaling", "none"))


def add_parser(sub) -> argparse.ArgumentParser:
    """The ``analyze`` subcommand and its three analyses' arguments."""
    a = sub.add_parser("analyze", help="IG scores, attention distances or impactful tokens of a local model")
    kinds = a.add_subparsers(dest="analysis", required=True, metavar="{" + ",".join(ANALYSES) + "}")
    for name in ANALYSES:
        k = kinds.add_parser(name)
        k.add_argument("--model", required=True, help="local model folder")
        k.add_argument("--out", default=f"runs/analyze-{name}", help="output folder")
        k.add_argument("--samples", type=positive_int, default=4, help="prompts or texts analysed (default 4)")
        k.add_argument("--length", type=positive_int, default=256, help="tokens per prompt or text (default 256)")
        k.add_argument("--no-progress", action="store_true", help="no progress bar")
        add_device_args(k, "weights' dtype: auto (bfloat16 on CUDA, float32 on the CPU), float32 or bfloat16")
        add_rope_scaling_arg(k)
        if name == "ig":
            k.add_argument("--profile", default="tiny", help=f"CDT settings from: {', '.join(PROFILES)}")
            k.add_argument("--top-k", type=positive_int, default=None, help="top-k of FR and the detectors")
            continue
        k.add_argument("--data", required=True, help=f"text source: {', '.join(DATA_KINDS)}")
        k.add_argument("--tokenizer", default=None, help="tokenizer folder or file (default: the model's)")
        k.add_argument("--data-bytes", type=positive_int, default=2_000_000, help="bytes per built-in source")
        if name == "attention-distance":
            k.add_argument("--queries", type=positive_int, default=None, help="last queries kept (default T/16)")
            k.add_argument("--bins", type=positive_int, default=32, help="distance bins (default 32)")
        else:
            k.add_argument("--base", required=True, help="the base model folder the model was extended from")
            k.add_argument("--fraction", type=positive_float, default=0.2, help="top share per position (0.2)")
            k.add_argument("--min-count", type=positive_int, default=5, help="an anchor occurs this often (5)")
            k.add_argument("--pos", action="store_true", help="tag parts of speech (needs the spaCy model)")
    return a


def _texts(args, tok) -> list[str]:
    docs = data.documents(args.data, tok, args.length, args.data_bytes)
    return data.texts(docs, tok, args.length, args.samples, args.data)


def ig(args: argparse.Namespace, out: Path) -> dict:
    """CDT's scores of ``--model`` with ``--profile``'s CDT settings at ``--length``."""
    path = model_dir(args.model)
    if not (path / "tokenizer.json").exists():
        raise CLIError(f"--model {str(path)!r} has no tokenizer.json; allowed: a model folder that holds its "
                       "tokenizer (save it there with tokenizer.save_pretrained)")
    try:
        p = get_profile(args.profile)
        cdt = {"analysis_samples": args.samples, **({"top_k": args.top_k} if args.top_k else {})}
        device, dtype = device_args(args)
        p = scaled_profile(p, max(p.extend.target_window, args.length), base_window=args.length, cdt=cdt,
                           run={"device": device, "dtype": dtype})
    except ValueError as e:
        raise CLIError(str(e)) from e
    tok = load_tokenizer_from(path, "--model")
    check_tokenizer_fits(tok, path, tok_flag="--model's tokenizer")
    need = analysis_min_length(p, tok)
    if args.length < need:
        raise CLIError(f"--length {args.length} is too short for {args.samples} {p.cdt.task} prompts; "
                       f"allowed: --length >= {need}")
    plan = rope_plan(path, args.rope_scaling, args.length, f"--length {args.length}")
    created = not out.exists()
    output_dir(out)
    try:  # the model loads inside: its refusals (weights, RoPE, shipped code) as one line, no folder left
        rec = cd_record(path, p, progress=not args.no_progress, rope=plan.rope)
    except ValueError as e:
        if created and not any(out.iterdir()):
            out.rmdir()
        raise CLIError(" ".join(str(e).split())) from e
    return {"analysis": "ig", "length": args.length, "samples": len(rec["scores"]), **plan.record(),
            "sample_tokens": [len(s["ig_token"]) for s in rec["scores"]], **rec}


def attention_distance(args: argparse.Namespace, out: Path) -> dict:
    """RP-Fig2's distance histograms of ``--model``."""
    path = model_dir(args.model)
    tok = load_tokenizer_from(args.tokenizer or path, "--tokenizer" if args.tokenizer else "--model")
    check_tokenizer_fits(tok, path, tok_flag="--tokenizer" if args.tokenizer else "--model's tokenizer")
    device, dtype = device_args(args)
    queries = args.queries or max(8, min(256, args.length // 16))
    try:
        cfg = AttentionDistanceConfig(queries=queries, samples=args.samples, bins=args.bins).check(args.length)
    except ValueError as e:
        raise CLIError(str(e)) from e
    texts = _texts(args, tok)
    plan = rope_plan(path, args.rope_scaling, args.length, f"--length {args.length}")
    try:  # the model loads inside: its refusals (weights, RoPE, shipped code) as one line
        rec = model_distances(path, texts, args.length, cfg, tokenizer=tok, progress=not args.no_progress,
                              device=device, dtype=dtype, rope=plan.rope)
    except ValueError as e:
        raise CLIError(" ".join(str(e).split())) from e
    return {"analysis": "attention-distance", **plan.record(), **rec}


def tokens(args: argparse.Namespace, out: Path) -> dict:
    """LongRecipe's impactful tokens of ``--model`` against ``--base``; also writes ``anchors.json``."""
    path, base_path = model_dir(args.model), model_dir(args.base, "--base")
    if not 0 < args.fraction <= 1:
        raise CLIError(f"--fraction {args.fraction}; allowed: 0 < --fraction <= 1")
    tok = load_tokenizer_from(args.tokenizer or path, "--tokenizer" if args.tokenizer else "--model")
    tok_flag = "--tokenizer" if args.tokenizer else "--model's tokenizer"
    check_tokenizer_fits(tok, path, tok_flag=tok_flag)
    check_tokenizer_fits(tok, base_path, "--base", tok_flag=tok_flag)
    texts = _texts(args, tok)
    device, dtype = device_args(args)
    base_plan = rope_plan(base_path, args.rope_scaling, args.length, f"--length {args.length} (--base)",
                          flag="--base")
    plan = rope_plan(path, args.rope_scaling, args.length, f"--length {args.length}")
    base = load_cli_model(base_path, flag="--base", rope=base_plan.rope, device=device, dtype=dtype).eval()
    ext = load_cli_model(path, rope=plan.rope, device=device, dtype=dtype).eval()
    res = analyse(base, ext, tok, texts, args.length, fraction=args.fraction, tagger=None if args.pos else False,
                  progress=not args.no_progress, min_count=args.min_count)
    anchors = [int(a) for a in res.anchors]
    atomic_write_json(output_dir(out) / "anchors.json", {"anchors": anchors})
    return {"analysis": "tokens", "base": str(base_path), "model": str(path), "length": args.length,
            **plan.record(), "base_rope_parameters": base_plan.rope,
            "fraction": args.fraction, "samples_shape": list(res.samples.shape),
            "changes_shape": list(res.changes.shape), "selected_shape": list(res.selected.shape),
            "mean_change_by_position": res.changes.mean(axis=0).tolist(),
            "anchors": anchors, "anchor_pieces": [tok.decode([a]) for a in anchors], "tags": res.tags}


def main(args: argparse.Namespace) -> int:
    """Run one analysis and write its JSON (atomically) into ``--out``."""
    out = Path(args.out)
    check_sizes(args)
    run = {"ig": ig, "attention-distance": attention_distance, "tokens": tokens}[args.analysis]
    rec = run(args, out)
    name = args.analysis.replace("-", "_")
    atomic_write_json(output_dir(out) / f"{name}.json", rec)
    print(f"analyze {args.analysis}: {out / f'{name}.json'}")
    return 0
