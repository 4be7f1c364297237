"""The parity section of ``docs/evaluation_suite.md``, written from :mod:`repro.harness.parity`'s measurements.

``python -m repro.harness.parity_doc`` prints the section (``--write docs/evaluation_suite.md`` replaces it in the
page and leaves the page's other sections alone); ``--tokenizer`` measures with any tokenizer folder or hub name
instead of the suite's tiny tokenizer. ``tests/harness/test_ruler_parity.py`` checks that the committed section
equals what this writes.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from pydoc_data.topics import topics

from repro.data.corpus import iter_synthetic
from repro.harness.offline import go_offline
from repro.harness.parity import (DIFFERENCES, HARNESS_NAMES, LENGTH, SEED, TASKS, VT_INCREMENTAL, compare,
                                  vt_fits)
from repro.io import atomic_write_text

HEADING = "## RULER through lm-evaluation-harness: parity with our tasks"
DOC = Path("docs") / "evaluation_suite.md"
"""The page the section lives in (other sections of it are left alone)."""


def tiny_tokenizer():
    """The suite's tiny tokenizer: a 1,024-entry byte-level BPE trained on Python's documentation and the
    synthetic corpus (the tests' session tokenizer)."""
    from repro.data.tokenizer import train_tokenizer  # imports transformers: must load after main()'s go_offline()

    return train_tokenizer([t for _, t in sorted(topics.items())][:120] + [d.text for d in iter_synthetic(100)],
                           1024)


def section(tokenizer, length: int = LENGTH, seed: int = SEED, name: str = "the tiny tokenizer") -> str:
    """The markdown section of :data:`DOC`: what is compared, the token counts, every difference."""
    rows = [compare(t, tokenizer, length, seed) for t in TASKS]
    fits, need = vt_fits(tokenizer, length)
    lines = [
        HEADING, "",
        "Written by `python -m repro.harness.parity_doc` (measured by `repro/harness/parity.py`; checked by "
        "`tests/harness/test_ruler_parity.py`). For every task it builds lm-eval's prompt with lm-eval's own "
        "generator and its task's settings (Python's and NumPy's global generators seeded first, one sample), "
        "joins the sample's `input` and `gen_prefix` with the task's `target_delimiter` as lm-eval does without "
        "a chat template, builds ours, and cuts both into a solved example, the task description, the context, "
        "the needles or chain statements, the question and the answer prefix. The description, the needle and "
        "chain formats, the question and the answer prefix agree word for word (random keys, values and names "
        "aside) except where a difference below says otherwise; every difference is observed.", "",
        f"Tokens at {length} tokens with {name} (seed {seed}, special tokens as the tokenizer adds them): lm-eval's "
        f"`input`, what it adds after it (delimiter and `gen_prefix`), the whole fed prompt, its generation budget, "
        f"its sample's `length` (what it counted plus that budget), its solved example; ours.", "",
        "| task | lm-eval task | lm-eval input | + answer prefix | lm-eval fed | max_gen_toks | lm-eval length "
        "| lm-eval example | ours |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for p in rows:
        lines.append(f"| {p.task} | {HARNESS_NAMES[p.task]} | {p.harness.input_tokens} | {p.gen_prefix_tokens} | "
                     f"{p.harness.total_tokens} | {p.max_gen_toks} | {p.harness.reported_length} | "
                     f"{p.harness.example_tokens} | {p.ours.total_tokens} |")
    lines += ["", f"lm-eval's `ruler_vt` needs at least {need} tokens with {name} ({'met' if fits else 'not met'} "
              f"at {length}): its sampler retries in a `while True` that never shrinks below "
              f"{VT_INCREMENTAL} noise lines, so below that length it never returns; `vt_fits` measures it first.",
              "", "### Differences", ""]
    for tasks, ds in DIFFERENCES.items():
        label = "all tasks" if tasks == TASKS else ", ".join(tasks)
        for d in ds:
            lines.append(f"- **{label}** ({d.part.replace('_', ' ')}): {d.text}")
    return "\n".join(lines) + "\n"


def page_section(page: str) -> str | None:
    """The section in a page's text (from :data:`HEADING` to the next ``## `` heading), or None."""
    if HEADING not in page:
        return None
    rest = page[page.index(HEADING):]
    end = rest.find("\n## ", len(HEADING))
    return rest if end < 0 else rest[:end + 1]


def with_section(page: str, text: str) -> str:
    """``page`` with its section replaced by ``text`` (appended when it has none)."""
    old = page_section(page)
    if old is None:
        return (page.rstrip("\n") + "\n\n" if page.strip() else "") + text
    return page.replace(old, text, 1)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m repro.harness.parity_doc", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tokenizer", default=None, metavar="PATH",
                    help="a tokenizer folder or hub name (default: the suite's tiny tokenizer)")
    ap.add_argument("--length", type=int, default=LENGTH, help=f"prompt length in tokens (default {LENGTH})")
    ap.add_argument("--seed", type=int, default=SEED)
    ap.add_argument("--cache", default=None, metavar="DIR", help="where the offline sentence splitter is written")
    ap.add_argument("--write", default=None, metavar="PATH",
                    help=f"replace the section in that page (e.g. {DOC}); default: print it")
    args = ap.parse_args(argv)
    go_offline(cache=args.cache)
    if args.tokenizer:
        from transformers import AutoTokenizer  # after go_offline(): it reads HF_HUB_OFFLINE when imported

        tok, name = AutoTokenizer.from_pretrained(args.tokenizer), f"`{args.tokenizer}`"
    else:
        tok, name = tiny_tokenizer(), "the tiny tokenizer"
    text = section(tok, args.length, args.seed, name)
    if args.write:
        path = Path(args.write)
        atomic_write_text(path, with_section(path.read_text() if path.exists() else "", text))
        print(f"wrote {args.write}")
    else:
        print(text, end="")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
