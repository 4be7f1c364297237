"""What every command shares: the one error type, argument types that name the bad value, the model folder and
tokenizer checks, and the output folder.

transformers (and the project modules that import it: ``models``, ``data.tokenizer``, ``train``) is imported inside
the functions that use it, never at the top of a command module: huggingface_hub and transformers read the offline
switches (``HF_HUB_OFFLINE``, ...) when first imported, and ``evaluate --harness`` sets them after the commands are
parsed (:func:`repro.harness.offline.go_offline`); every command module is imported to build the parser."""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Sequence

from tokenizers import Tokenizer

from repro.devices import resolve_device, resolve_dtype
from repro.distributed import launched_rank as distributed_rank

EXIT_USAGE = 2
"""Exit status of a bad argument (argparse's own)."""


EXIT_INTERRUPTED = 130
"""Exit status of a command stopped by Ctrl-C (SIGINT), as a shell reports it (128 + 2)."""
EXIT_BROKEN_PIPE = 141
"""Exit status when the reader of stdout went away (``python -m repro profiles | head``): 128 + SIGPIPE, as a
shell reports a command killed by it."""


class CLIError(ValueError):
    """A bad argument or input, reported as one ``error: ...`` line and exit status 2."""


class RankAgreedError(CLIError):
    """A :class:`CLIError` every process of a launched run raises alike (it depends only on the arguments, the
    launcher's environment or a decision broadcast from rank 0): rank 0 prints it, the other ranks exit 2 silently,
    so the user reads one line instead of one per rank."""


class CommandInterrupted(KeyboardInterrupt):
    """Ctrl-C during a command, carrying the one line that says what was kept and how to go on (exit status 130)."""


def launched_rank() -> int:
    """:func:`repro.distributed.launched_rank`."""
    return distributed_rank()


def speaks(error: BaseException) -> bool:
    """Whether this process prints ``error``: always, except a rank other than 0 of a launched run for an error
    every rank raises alike (:class:`RankAgreedError`, Ctrl-C)."""
    return launched_rank() == 0 or not isinstance(error, (RankAgreedError, KeyboardInterrupt))


def warn(message: str) -> None:
    """A legal but surprising input: one ``warning: ...`` line on stderr saying what will happen; the command
    goes on. In a launched run only rank 0 prints it (every rank meets the same input)."""
    if launched_rank() == 0:
        print(f"warning: {' '.join(message.split())}", file=sys.stderr)


@contextmanager
def warnings_as_lines(*categories: type[Warning]):
    """Python warnings of ``categories`` raised inside (e.g. a skipped file of a data folder) printed as one
    ``warning: ...`` line each (:func:`warn`); every other warning goes on as it would have."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    for w in caught:
        if issubclass(w.category, categories):
            warn(str(w.message))
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)


def positive_int(text: str) -> int:
    """An integer >= 1 (argparse type)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer; allowed: an integer >= 1") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value}; allowed: an integer >= 1")
    return value


def positive_float(text: str) -> float:
    """A finite number > 0 (argparse type)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number; allowed: a number > 0") from None
    if not (value > 0 and math.isfinite(value)):
        raise argparse.ArgumentTypeError(f"{value}; allowed: a finite number > 0")
    return value


def csv_of(item: Callable[[str], object]) -> Callable[[str], list]:
    """An argparse type for a comma-separated list of ``item`` values (at least one)."""
    def parse(text: str) -> list:
        parts = [t.strip() for t in text.split(",") if t.strip()]
        if not parts:
            raise argparse.ArgumentTypeError(f"{text!r}; allowed: one or more comma-separated values")
        return [item(t) for t in parts]
    return parse


def choice(value: str, allowed: Sequence[str], what: str) -> str:
    """``value`` if it is one of ``allowed``, else a :class:`CLIError` naming both."""
    if value not in allowed:
        raise CLIError(f"unknown {what} {value!r}; allowed: {', '.join(allowed)}")
    return value


def model_dir(path: str | Path, flag: str = "--model") -> Path:
    """A local model folder written by ``save_pretrained``: it holds a ``config.json`` whose fields have their
    types (:func:`repro.models.check_config_json`); checked before any work."""
    p = Path(path)
    if not p.is_dir():
        raise CLIError(f"{flag} {str(path)!r} does not exist; allowed: a local model folder with config.json")
    if not (p / "config.json").exists():
        raise CLIError(f"{flag} {str(path)!r} has no config.json; allowed: a folder written by save_pretrained "
                       "(e.g. runs/<profile>/extend-flt-<key>/final)")
    from repro.models import check_config_json  # transformers: imported when used (module docstring)

    try:
        check_config_json(p)
    except ValueError as e:
        raise CLIError(f"{flag} {e}") from e
    return p


def load_cli_model(path: str | Path, trust_remote_code: bool = False, flag: str = "--model", **kwargs):
    """:func:`repro.models.load_model` for a command: its refusals (pickled weights, no RoPE, truncated, missing,
    mismatched or non-finite weights, code shipped in the folder without ``--trust-remote-code``) as one-line
    :class:`CLIError`. Without a ``dtype`` (``train``) the weights load as float32 whatever the checkpoint holds
    (float16, bfloat16): training keeps float32 weights and optimizer states, ``--dtype`` sets the autocast."""
    from repro.models import load_model  # transformers: imported when used (module docstring)

    kwargs.setdefault("dtype", "float32")
    try:
        return load_model(path, trust_remote_code=trust_remote_code, **kwargs)
    except (ValueError, OSError) as e:
        if "trust_remote_code" in str(e) and not trust_remote_code and "--trust-remote-code" not in str(e):
            raise CLIError(f"{flag} {str(path)!r} ships its own model code (auto_map in config.json); allowed: "
                           "--trust-remote-code to run it (a folder you trust), or a model of transformers' own "
                           "architectures") from e
        raise CLIError(" ".join(str(e).split())) from e


def load_tokenizer_from(path: str | Path, flag: str = "--tokenizer", pad_written: str | None = None,
                        trust_remote_code: bool = False):
    """The tokenizer of a folder (``AutoTokenizer``, local files only) or of one ``tokenizer.json`` file. The
    pipeline's checkpoints hold their tokenizer in the checkpoint folder (``final/``) and the corpus stage keeps it
    in ``runs/<profile>/corpus-<key>/tokenizer/``. A tokenizer without a pad token pads with its EOS token, with a
    warning (:func:`warn`); ``pad_written`` says where the command records that choice (e.g. the saved
    tokenizer and config of ``train``). Code shipped in the folder (an ``auto_map`` of its tokenizer or model
    config) is refused before transformers reads it unless ``trust_remote_code`` (``--trust-remote-code``), and
    transformers is told so explicitly: no command runs that code or waits on a terminal question about it."""
    p = Path(path)
    try:
        if p.is_file():
            tok = _from_file(p)
        elif p.is_dir() and any((p / f).exists() for f in ("tokenizer.json", "tokenizer_config.json",
                                                           "tokenizer.model")):
            from transformers import AutoTokenizer  # imported when used (module docstring)

            from repro.models import refuse_shipped_code  # imports transformers: imported when used (module docstring)

            if not trust_remote_code:
                refuse_shipped_code(p, flag)
            tok = AutoTokenizer.from_pretrained(str(p), local_files_only=True, trust_remote_code=trust_remote_code)
            keep_saved_init_kwargs(tok, p)
        else:
            raise CLIError(f"no tokenizer at {str(path)!r}; allowed: {flag} a folder with tokenizer.json "
                           "(a checkpoint's final/ or runs/<profile>/corpus-<key>/tokenizer) or the file itself")
    except (OSError, ValueError) as e:
        if isinstance(e, CLIError):
            raise
        if "--trust-remote-code" in str(e):
            raise CLIError(str(e)) from e
        raise CLIError(f"cannot load a tokenizer from {str(path)!r} ({type(e).__name__}: {e})") from e
    if tok.pad_token is None and tok.eos_token is not None:
        tok.pad_token = tok.eos_token
        warn(f"tokenizer at {str(path)!r} has no pad token: its EOS token {tok.eos_token!r} (id {tok.eos_token_id}) "
             f"pads rows{f' and is written as the pad token {pad_written}' if pad_written else ''}")
    if tok.bos_token_id is None or tok.pad_token_id is None:
        raise CLIError(f"tokenizer at {str(path)!r} has no BOS or pad/EOS token; allowed: a tokenizer with both")
    return tok


LOAD_INIT_KWARGS: tuple[str, ...] = ("local_files_only", "is_local")
"""Arguments of the loading call that transformers keeps in a tokenizer's ``init_kwargs`` and would write into a
saved ``tokenizer_config.json`` (``train``'s ``final/``): reset to the folder's own values."""


def keep_saved_init_kwargs(tok, folder: Path) -> None:
    """Reset :data:`LOAD_INIT_KWARGS` of ``tok`` (loaded from ``folder``) to those of the folder's
    ``tokenizer_config.json`` (removed where it holds none), so that saving ``tok`` writes what the folder holds."""
    try:
        saved = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        saved = {}
    saved = saved if isinstance(saved, dict) else {}
    for k in LOAD_INIT_KWARGS:
        if k in saved:
            tok.init_kwargs[k] = saved[k]
        else:
            tok.init_kwargs.pop(k, None)


def _from_file(path: Path):
    from transformers import PreTrainedTokenizerFast  # imported when used (module docstring)

    from repro.data.tokenizer import SPECIAL_TOKENS, wrap  # imports transformers: see the module docstring
    try:
        raw = Tokenizer.from_file(str(path))
    except Exception as e:  # the tokenizers library raises a bare Exception for a file it cannot parse
        raise ValueError(f"{e}; allowed: a tokenizer.json written by save_pretrained") from e
    if all(raw.token_to_id(t) is not None for t in SPECIAL_TOKENS):  # one of ours: its special tokens by name
        return wrap(raw)
    return PreTrainedTokenizerFast(tokenizer_object=raw)


def check_out(path: str | Path, flag: str = "--out") -> Path:
    """``path`` as an output folder a command can create, checked before any work: not a file, and its nearest
    existing folder writable by this process (``os.access``; else a :class:`CLIError` naming both). Nothing is
    created."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise CLIError(f"{flag} {str(path)!r} is a file; allowed: a folder (created when missing)")
    base = p.absolute()
    while not base.exists():
        base = base.parent
    if not base.is_dir():
        raise CLIError(f"{flag} {str(path)!r} cannot be created: {str(base)!r} is a file; allowed: a folder path")
    if not os.access(base, os.W_OK | os.X_OK):
        raise CLIError(f"{flag} {str(path)!r} cannot be created: {str(base)!r} is not writable; allowed: a folder "
                       "you can write to (or a new one under such a folder)")
    return p


def output_dir(path: str | Path, flag: str = "--out") -> Path:
    """The output folder (created; :func:`check_out` first); a folder that still cannot be made is a
    :class:`CLIError` naming it."""
    p = check_out(path, flag)
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise CLIError(f"{flag} {str(path)!r} cannot be created ({type(e).__name__}: {e.strerror}); allowed: a "
                       "folder you can write to") from e
    return p


def add_device_args(parser: argparse.ArgumentParser, dtype_help: str) -> None:
    """``--device`` and ``--dtype`` (checked by :func:`device_args`)."""
    parser.add_argument("--device", default="auto",
                        help="auto (the first CUDA device when there is one, else the CPU), cpu, cuda or cuda:N")
    parser.add_argument("--dtype", default="auto", help=dtype_help)


def device_args(args: argparse.Namespace) -> tuple[str, str]:
    """``(device, dtype)`` of ``--device`` / ``--dtype`` as given, once checked: a :class:`CLIError` naming a bad
    value (or a CUDA device this machine lacks)."""
    try:
        resolve_dtype(args.dtype, resolve_device(args.device, f"--device {args.device!r}"), f"--dtype {args.dtype!r}")
    except ValueError as e:
        raise CLIError(str(e)) from e
    return args.device, args.dtype


def distinct(values: Sequence, flag: str) -> list:
    """``values`` of a list option when no value repeats, else a :class:`CLIError` naming the repeats (a repeated
    length or task would run the same seeded prompts twice and count them as independent samples)."""
    seen, repeated = set(), []
    for v in values:
        if v in seen and v not in repeated:
            repeated.append(v)
        seen.add(v)
    if repeated:
        shown = ",".join(str(v) for v in values)
        raise CLIError(f"{flag} {short(shown)} repeats {', '.join(short(str(v), 40) for v in repeated)}; allowed: "
                       "distinct values (each is run once)")
    return list(values)


def short(text: str, limit: int = 80) -> str:
    """``text`` cut to ``limit`` characters (a huge value echoed into an error would bury it)."""
    return text if len(text) <= limit else f"{text[:limit - 3]}..."


def env_limit(name: str, default: int) -> int:
    """``default``, or the integer >= 1 in environment variable ``name`` (a :class:`CLIError` naming a bad one):
    the explicit way past a sanity bound."""
    text = os.environ.get(name)
    if text is None:
        return default
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise CLIError(f"{name}={short(text)!r}; allowed: an integer >= 1 (unset: {default:,})")
    return value


def at_most(value: int, flag: str, env: str, default: int) -> int:
    """``value`` of a size-like option when it is at most its bound (``default``, or the integer in environment
    variable ``env``: the explicit way past it, :func:`env_limit`), else a :class:`CLIError` naming both; checked
    before any work."""
    limit = env_limit(env, default)
    if value > limit:
        raise CLIError(f"{flag} {value:,} is larger than allowed; allowed: {flag} <= {limit:,} (set {env} to go "
                       "further)")
    return value


def model_vocab(folder: Path) -> int | None:
    """``vocab_size`` of the config.json in ``folder`` (or of its ``text_config``), None when it names none."""
    try:
        raw = json.loads((Path(folder) / "config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(raw, dict):
        return None
    size = raw.get("vocab_size", (raw.get("text_config") or {}).get("vocab_size")
                   if isinstance(raw.get("text_config"), dict) else None)
    return size if isinstance(size, int) else None


def check_tokenizer_fits(tok, folder: Path, flag: str = "--model", tok_flag: str = "--tokenizer") -> None:
    """A :class:`CLIError` when ``tok`` has more tokens than the vocabulary of the model in ``folder`` (its ids would
    index past the embedding): the check every command makes before loading weights."""
    vocab = model_vocab(folder)
    if vocab is not None and len(tok) > vocab:
        raise CLIError(f"{tok_flag} has {len(tok)} tokens but the vocabulary of {flag} {str(folder)!r} is {vocab}; "
                       "allowed: the model's own tokenizer (or one of at most its vocabulary)")


def check_out_outside_data(out: str | Path, spec: str | None, flag: str = "--out") -> None:
    """A :class:`CLIError` when ``out`` is the folder of a ``folder:`` / ``hf_disk:`` data spec or inside it: the
    command's own files (``metrics.jsonl``, checkpoints) would become its data."""
    if not spec or spec.partition(":")[0] not in ("folder", "hf_disk") or not spec.partition(":")[2]:
        return
    data, target = Path(spec.partition(":")[2]).resolve(), Path(out).resolve()
    if target == data or data in target.parents:
        raise CLIError(f"{flag} {str(out)!r} is inside --data {spec!r}: the command's own files would be read as "
                       "data; allowed: an output folder outside the data folder")
