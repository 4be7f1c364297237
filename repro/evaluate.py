"""The evaluation harness: batched greedy generation with a KV cache over a task grid.

Tasks plug in through :mod:`repro.tasks` (anything registered there); a task
*spec* is a registered name, optionally with constructor arguments after a
colon (``"niah_position:ordinal=first"``). Results are tidy rows: one per
task x length x depth x seed, with the prediction, the references and the score.
Evaluation seeds (``EvalGrid.eval_seeds``) shift every example seed by
:data:`SEED_STRIDE`, so each evaluation seed draws fresh examples.
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import product
from typing import Sequence

from tqdm.auto import tqdm

from repro.tasks import get_task
from repro.tasks.base import LengthTooShort

SEED_STRIDE = 1_000_003
"""Example seeds of evaluation seed ``s`` are ``grid.seed + s * SEED_STRIDE + i`` (disjoint per ``s``)."""


def parse_task_spec(spec: str) -> tuple[str, dict]:
    """``"name:key=value,key=value"`` -> ``("name", {key: value})`` (ints and floats converted)."""
    name, _, args = spec.partition(":")
    kwargs: dict = {}
    for part in filter(None, args.split(",")):
        key, eq, value = part.partition("=")
        if not eq or not key:
            raise ValueError(f"task spec {spec!r}: bad argument {part!r}; allowed: name or name:key=value,...")
        for conv in (int, float):
            try:
                value = conv(value)
                break
            except ValueError:
                pass
        kwargs[key.strip()] = value
    return name, kwargs


def make_task(spec: str):
    """Instantiate a task from a spec (see :func:`parse_task_spec`)."""
    name, kwargs = parse_task_spec(spec)
    return get_task(name, **kwargs)


@dataclass(frozen=True)
class EvalGrid:
    """What to evaluate."""

    tasks: tuple[str, ...]
    """Registered task names."""
    lengths: tuple[int, ...]
    """Prompt lengths in tokens."""
    depths: tuple[float, ...]
    """Evidence depths in [0, 1]."""
    samples: int = 10
    """Examples per (task, length, depth) cell."""
    seed: int = 0
    """First evaluation seed; cell examples use seeds seed..seed+samples-1."""
    batch_size: int = 8
    """Generation batch size."""
    eval_seeds: tuple[int, ...] = (0,)
    """Evaluation seeds; seed ``s`` shifts example seeds by ``s * SEED_STRIDE`` (``(0,)``: the plain grid)."""

    def n_generations(self) -> int:
        """Number of generated examples if no cell is skipped."""
        return len(self.tasks) * len(self.lengths) * len(self.depths) * self.samples * len(self.eval_seeds)

    def prompt_tokens(self) -> int:
        """Total prompt tokens if no cell is skipped (the evaluation cost is about linear in it)."""
        return len(self.tasks) * sum(self.lengths) * len(self.depths) * self.samples * len(self.eval_seeds)


def generate(model, tokenizer, prompts: Sequence[str], max_new_tokens: int) -> list[str]:
    """Greedy continuations of ``prompts`` (left-padded batch, KV cache, stops at EOS); see
    :func:`repro.generate.greedy_generate` (token-for-token what HF ``generate`` returns, faster)."""
    from repro.generate import greedy_generate  # imports torch; the grid and make_task stay torch-free

    return greedy_generate(model, tokenizer, prompts, max_new_tokens)


def run_grid(model, tokenizer, grid: EvalGrid, progress: bool = True, label: str = "",
             skipped: list | None = None) -> list[dict]:
    """Evaluate every cell of ``grid``; returns one result dict per example.

    A cell whose length is below what its task needs raises ``LengthTooShort``,
    unless ``skipped`` is a list: then the cell is left out and
    ``{"task", "length", "depth", "eval_seed", "minimum"}`` is appended to it.
    """
    model.eval()
    cells = list(product(grid.eval_seeds, grid.tasks, grid.lengths, grid.depths))
    rows: list[dict] = []
    tasks = {spec: make_task(spec) for spec in grid.tasks}
    bar = tqdm(total=len(cells) * grid.samples, desc=f"eval {label}".strip(), disable=not progress, mininterval=2.0)
    for eval_seed, task_name, length, depth in cells:
        task = tasks[task_name]
        first = grid.seed + eval_seed * SEED_STRIDE
        try:
            examples = [task.generate(tokenizer, length, depth, first + i) for i in range(grid.samples)]
            k = grid.depths.index(depth)
            if k and examples[0].metadata.get("depth_applicable") is False:  # fresh examples, not copies per depth
                first += k * grid.samples
                examples = [task.generate(tokenizer, length, depth, first + i) for i in range(grid.samples)]
        except LengthTooShort as err:
            if skipped is None:
                raise
            skipped.append({"task": task_name, "length": length, "depth": depth, "eval_seed": eval_seed,
                            "minimum": err.minimum})
            bar.update(grid.samples)
            continue
        for i in range(0, len(examples), grid.batch_size):
            chunk = examples[i:i + grid.batch_size]
            preds = generate(model, tokenizer, [e.prompt for e in chunk], task.max_new_tokens)
            for ex, pred in zip(chunk, preds):
                rows.append({"task": task_name, "length": length, "depth": depth, "seed": ex.metadata["seed"],
                             "eval_seed": eval_seed, "n_tokens": ex.metadata.get("n_tokens"), "prediction": pred,
                             "references": list(ex.references), "score": float(task.score(pred, ex.references))})
            bar.update(len(chunk))
    bar.close()
    return rows


def accuracy_table(results: Sequence[dict], task: str | None = None) -> dict[tuple[int, float], float]:
    """Mean score per (length, depth) cell."""
    cells: dict[tuple[int, float], list[float]] = {}
    for r in results:
        if task is None or r["task"] == task:
            cells.setdefault((r["length"], r["depth"]), []).append(r["score"])
    return {k: sum(v) / len(v) for k, v in sorted(cells.items())}


def accuracy_by_length(results: Sequence[dict], task: str | None = None) -> dict[int, float]:
    """Mean score per length (over depths and seeds)."""
    by: dict[int, list[float]] = {}
    for r in results:
        if task is None or r["task"] == task:
            by.setdefault(r["length"], []).append(r["score"])
    return {k: sum(v) / len(v) for k, v in sorted(by.items())}


def chat_prompt(tok, prompt: str, answer_prefix: str | None = None) -> str:
    """``prompt`` in ``tok``'s chat template: the prompt without its ``answer_prefix`` as the user's turn, the
    generation prompt, then the answer prefix (without its leading blanks) opening the assistant's turn, where RULER
    and lm-eval put a task's answer prefix. A leading BOS that the tokenizer adds itself is left out of the text, so
    it is not there twice."""
    question, prefix = prompt, ""
    if answer_prefix and prompt.endswith(answer_prefix):
        question, prefix = prompt[:-len(answer_prefix)].rstrip(), answer_prefix.lstrip()
    text = tok.apply_chat_template([{"role": "user", "content": question}], add_generation_prompt=True,
                                   tokenize=False)
    bos = tok.bos_token
    if bos and text.startswith(bos) and tok("").input_ids[:1] == [tok.bos_token_id]:
        text = text[len(bos):]
    return text + prefix


def fit_example(task, tok, length: int, depth: float, seed: int, chat: bool):
    """One example of ``task`` and the prompt the model reads: with ``chat``, the prompt in the chat template
    (:func:`chat_prompt`), the example drawn again shorter by the template's tokens when the wrapped prompt would be
    longer than ``length`` (as RULER counts its template's tokens in the length: a cell at the model's window stays
    inside it). Raises :class:`LengthTooShort` as ``task.generate`` does."""
    ex = task.generate(tok, length, depth, seed)
    if not chat:
        return ex, ex.prompt
    prompt = chat_prompt(tok, ex.prompt, ex.metadata.get("answer_prefix"))
    for _ in range(3):  # the template's tokens are nearly constant: one redraw fits, the others absorb a merge
        over = len(tok(prompt).input_ids) - length
        if over <= 0:
            break
        ex = task.generate(tok, len(tok(ex.prompt).input_ids) - over, depth, seed)
        prompt = chat_prompt(tok, ex.prompt, ex.metadata.get("answer_prefix"))
    return ex, prompt


def prediction_rows(model, tok, tasks: list[str], lengths: list[int], depths: list[float], samples: int, seed: int,
                    batch_size: int, progress: bool, chat: bool = False,
                    rope_scaling: str = "none") -> tuple[list[dict], list[dict]]:
    """Prediction rows (the fields of ``python -m repro evaluate``'s ``predictions.jsonl``) of every task x length
    cell, ``samples`` each with depths taken in turn, and the cells skipped as too short for their task. ``chat``:
    each prompt through :func:`chat_prompt`, fitted to the length with its template (:func:`fit_example`; the row's
    ``input`` and ``length`` are then the wrapped prompt's);
    ``rope_scaling`` is recorded per row."""
    rows, skipped = [], []
    bar = tqdm(total=len(tasks) * len(lengths) * samples, desc="evaluate", disable=not progress, mininterval=2.0)
    for spec in tasks:
        task = make_task(spec)
        for length in lengths:
            try:
                fitted = [fit_example(task, tok, length, depths[i % len(depths)], seed + i, chat)
                          for i in range(samples)]
            except LengthTooShort as err:
                skipped.append({"task": spec, "length": length, "minimum": err.minimum})
                bar.update(samples)
                continue
            for i in range(0, samples, batch_size):
                chunk, prompts = [ex for ex, _ in fitted[i:i + batch_size]], [q for _, q in fitted[i:i + batch_size]]
                preds = generate(model, tok, prompts, task.max_new_tokens)
                for ex, prompt, pred in zip(chunk, prompts, preds):
                    refs = list(ex.references)
                    n = None if chat else ex.metadata.get("n_tokens")
                    rows.append({"index": len(rows), "pred": pred, "input": prompt, "outputs": refs,
                                 "others": {}, "truncation": -1, "length": int(n or len(tok(prompt).input_ids)),
                                 "task": spec, "target_length": length, "depth": ex.metadata.get("depth"),
                                 "seed": ex.metadata.get("seed"), "score": float(task.score(pred, refs)),
                                 "rope_scaling": rope_scaling, "chat_template": "on" if chat else "off"})
                bar.update(len(chunk))
    bar.close()
    return rows, skipped
