"""Training and generation throughput, every arm in one run (ratios hold on a noisy machine).

* the machine's ceiling: a large fp32 and bf16 matmul (GFLOP/s);
* one training step of the profile's model at the base window and at the target, per
  setting (:data:`TRAIN_ARMS`: the v1 trainer's fp32 + full-logit loss and for-loop AdamW, the chunked loss,
  bf16 autocast, ``torch.compile``, each with the trainer's own optimizer and clipping; HF ``Trainer`` on the same
  model, batch, length, lr and betas, its default fused AdamW), timed round-robin, HF's steps included
  (:func:`time_train_arms`), so that noise hits every arm alike; achieved FLOP/s
  (:func:`repro.cost.step_flops`) as a share of the ceiling at the precision used;
* two copies of the new setting side by side, one thread each (independent stages);
* generation: prompt and generated tokens/s of :func:`repro.generate.greedy_ids` vs HF
  ``generate`` on the same prompts.

Random token ids stand in for data: throughput does not depend on the values. ``bench --model`` runs only the
training comparison, ours against HF ``Trainer`` at equal precision, on a pretrained model (:func:`compare_with_hf`).
"""

from __future__ import annotations

import copy
import multiprocessing as mp
import statistics
import threading
import time
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import torch
from transformers import PrinterCallback, Trainer, TrainerCallback, TrainingArguments

from repro.cost import step_flops
from repro.generate import greedy_ids
from repro.models import n_params
from repro.timing import interleaved_rounds
from repro.train import TrainConfig, clm_step
from repro.train.trainer import build_optimizer, clip_gradients

TRAIN_ARMS: dict[str, dict] = {
    "v1 (fp32, full logits)": {"bf16": False, "chunked": False, "compile": False, "adamw": "for-loop"},
    "fp32, chunked loss": {"bf16": False, "chunked": True, "compile": False},
    "bf16, chunked loss": {"bf16": True, "chunked": True, "compile": False},
    "bf16, chunked, compiled": {"bf16": True, "chunked": True, "compile": True},
}
"""Our trainer's settings compared (the same step function the trainer runs: :func:`repro.train.clm_step`, and its
optimizer: the trainer's default AdamW, the v1 arm torch's for-loop AdamW as the trainer's first version)."""


@dataclass(frozen=True)
class BenchConfig:
    """What the benchmark runs."""

    shapes: tuple[tuple[int, int], ...] = ((256, 32), (1024, 8))
    """(sequence length, rows) per training shape: the base window and the target."""
    steps: int = 6
    """Timed optimizer steps per arm and shape (after ``warmup``), in ``rounds`` interleaved rounds."""
    warmup: int = 2
    """Untimed steps per arm (compilation happens here)."""
    rounds: int = 2
    """Round-robin rounds (A B C ... A B C ...)."""
    threads: int = 2
    """torch threads of the single-process arms."""
    hf_trainer: bool = True
    """Also time HF ``Trainer`` (fp32 and bf16) on the same model and batch."""
    side_by_side: bool = True
    """Also run two processes of the new setting side by side, one thread each."""
    gen_prompts: int = 32
    """Prompts per generation shape (one batch)."""
    gen_lengths: tuple[int, ...] = (256, 1024)
    """Prompt lengths of the generation benchmark."""
    gen_new_tokens: int = 16
    """Tokens generated per prompt (EOS disabled so both generators produce exactly this many)."""
    matmul_n: int = 2048
    """Size of the square matmuls of the ceiling."""


def matmul_gflops(dtype: torch.dtype, n: int = 2048, reps: int = 5) -> float:
    """GFLOP/s of an ``n x n`` matmul in ``dtype`` (best of ``reps``)."""
    a, b = torch.randn(n, n).to(dtype), torch.randn(n, n).to(dtype)
    a @ b
    best = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        a @ b
        best = min(best, time.perf_counter() - t)
    return 2 * n ** 3 / best / 1e9


def _batch(vocab: int, T: int, B: int, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(3, vocab, (B, T), generator=g)
    return {"input_ids": ids, "position_ids": torch.arange(T).expand(B, T), "weights": torch.ones(B, T)}


class _Arm:
    """One setting's model copy, optimizer and step: the trainer's own (:func:`repro.train.clm_step`, then
    :func:`repro.train.trainer.clip_gradients` at 1.0 and :func:`repro.train.trainer.build_optimizer`'s AdamW,
    ``adamw`` of the setting or the trainer's default)."""

    def __init__(self, model, settings: dict):
        self.model = copy.deepcopy(model).train()
        if settings["compile"]:
            self.model.get_decoder().compile(dynamic=False)  # torch's in-place nn.Module.compile
        cfg = TrainConfig(max_steps=1, lr=1e-4, betas=(0.9, 0.95),
                          adamw_impl=settings.get("adamw", TrainConfig.adamw_impl))
        self.opt = build_optimizer(self.model, cfg)
        self.bf16, self.chunked = settings["bf16"], settings["chunked"]

    def step(self, batch) -> float:
        t = time.perf_counter()
        loss, _ = clm_step(self.model, batch, self.bf16, self.chunked)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        clip_gradients(self.model, 1.0)
        self.opt.step()
        return time.perf_counter() - t

    def close(self) -> None:
        pass


def hf_arm_name(bf16: bool) -> str:
    """The row name of HF ``Trainer``'s arm at a precision."""
    return f"HF Trainer ({'bf16' if bf16 else 'fp32'})"


class _HFArm:
    """HF ``Trainer`` on its own copy of the model, one optimizer step at a time, so that its steps interleave with
    our arms': its ``train()`` (HF's own loop: forward, loss, backward, clipping at 1.0, its default fused AdamW
    with the same lr and betas, zero_grad) runs in a thread that waits at each step's start until :meth:`step` lets
    it go, and :meth:`step` returns once the thread waits again (or has finished), so nothing of HF's runs while
    another arm is timed. A step's seconds are those between its ``on_step_begin`` and ``on_step_end`` callbacks
    (the batch is collated before, as our arms' batch is built before theirs)."""

    def __init__(self, model, batch: dict[str, torch.Tensor], bf16: bool, steps: int, out_dir: str):
        rows = [{"input_ids": ids, "labels": ids} for ids in batch["input_ids"]]
        self._go, self._waiting = threading.Semaphore(0), threading.Semaphore(0)
        self._left, self._stop = steps, False
        self._seconds, self._error, self._t0 = float("nan"), None, 0.0
        arm = self

        class Gate(TrainerCallback):
            def on_step_begin(self, args, state, control, **kw):
                arm._waiting.release()
                arm._go.acquire()
                if arm._stop:
                    raise _Stopped
                arm._t0 = time.perf_counter()

            def on_step_end(self, args, state, control, **kw):
                arm._seconds = time.perf_counter() - arm._t0

        args = TrainingArguments(output_dir=out_dir, per_device_train_batch_size=len(rows), max_steps=steps,
                                 learning_rate=1e-4, adam_beta1=0.9, adam_beta2=0.95, max_grad_norm=1.0,
                                 lr_scheduler_type="constant", logging_strategy="no", save_strategy="no", report_to=[],
                                 bf16=bf16, use_cpu=True, dataloader_num_workers=0, disable_tqdm=True, seed=0)
        self._trainer = Trainer(model=copy.deepcopy(model).train(), args=args, train_dataset=rows, callbacks=[Gate()])
        self._trainer.remove_callback(PrinterCallback)  # its end-of-training summary would interleave with our lines
        self._thread = threading.Thread(target=self._run, name="hf-trainer-arm", daemon=True)
        self._thread.start()
        self._wait()

    def _run(self) -> None:
        try:
            self._trainer.train()
        except _Stopped:
            pass
        except BaseException as e:  # re-raised in the caller's thread by _wait
            self._error = e
        finally:
            self._waiting.release()  # the last step (or a failure) ends the thread: no caller is left waiting

    def _wait(self) -> None:
        self._waiting.acquire()
        if self._error is not None:
            raise RuntimeError(f"HF Trainer failed: {self._error}") from self._error

    def step(self, batch=None) -> float:
        if self._left < 1:
            raise RuntimeError("the HF Trainer arm was asked for more steps than it was built for")
        self._left -= 1
        self._go.release()
        self._wait()
        if self._left == 0:
            self._thread.join()
        return self._seconds

    def close(self) -> None:
        """End the thread (a step it was not asked for is abandoned at its start)."""
        if self._thread.is_alive():
            self._stop = True
            self._go.release()
            self._thread.join()


class _Stopped(Exception):
    """Raised in the HF Trainer arm's thread to end its ``train()`` early (:meth:`_HFArm.close`)."""


def time_train_arms(model, vocab: int, T: int, B: int, cfg: BenchConfig, arms_wanted: dict[str, dict] = TRAIN_ARMS,
                    hf_precisions: tuple[bool, ...] = (), out_dir: str = "/tmp",
                    progress: bool = False) -> tuple[dict[str, list[float]], dict[str, float]]:
    """Seconds per step of each setting of ``arms_wanted`` and of HF ``Trainer`` at each precision of
    ``hf_precisions`` (False: fp32, True: bf16 autocast; arms :func:`hf_arm_name`), on the same batch,
    interleaved by :func:`repro.timing.interleaved_rounds`: a first round of ``cfg.warmup`` untimed steps per arm
    (compilation included), then ``cfg.rounds`` rounds of ``cfg.steps // cfg.rounds`` timed steps per arm, arm
    after arm. Returns each arm's seconds in round order (``per_round`` of them per round, so round ``r``'s steps
    pair up across arms) and each arm's warmup seconds."""
    batch = _batch(vocab, T, B)
    per_round = max(cfg.steps // cfg.rounds, 1)
    arms: dict[str, _Arm | _HFArm] = {}
    try:
        for name, s in arms_wanted.items():
            arms[name] = _Arm(model, s)
        for bf16 in hf_precisions:
            arms[hf_arm_name(bf16)] = _HFArm(model, batch, bf16, cfg.warmup + per_round * cfg.rounds, out_dir)
        warm: dict[str, float] = {}

        def run(name: str, r: int) -> list[float]:
            n = per_round if r > 0 or not cfg.warmup else cfg.warmup
            secs = [arms[name].step(batch) for _ in range(n)]
            if r == 0 and cfg.warmup:
                warm[name] = sum(secs)
            return secs

        got = interleaved_rounds(list(arms), cfg.rounds, 1 if cfg.warmup else 0, run, desc="bench steps",
                                 progress=progress)
    finally:
        for arm in arms.values():
            arm.close()
    return {name: [x for secs in rounds for x in secs] for name, rounds in got.items()}, warm


def time_hf_trainer(model, vocab: int, T: int, B: int, cfg: BenchConfig, bf16: bool, out_dir: str) -> list[float]:
    """Seconds per step of HF ``Trainer`` alone (AdamW, same betas, clip 1.0, no logging/saving) on the benchmark's
    batch; :func:`time_train_arms` with ``hf_precisions`` times it interleaved with our arms instead."""
    times, _ = time_train_arms(model, vocab, T, B, cfg, {}, (bf16,), out_dir)
    return times[hf_arm_name(bf16)]


MODEL_ARMS: dict[str, dict] = {"fp32": TRAIN_ARMS["fp32, chunked loss"], "bf16": TRAIN_ARMS["bf16, chunked loss"]}
"""``bench --model``'s arms: our trainer's default step (chunked loss, its default AdamW) at each precision, each
against HF ``Trainer`` at the same precision."""


def compare_with_hf(model, T: int, B: int, cfg: BenchConfig, out_dir: str = "/tmp", progress: bool = True,
                    log=print) -> list[dict]:
    """Our trainer's step (:data:`MODEL_ARMS`) against HF ``Trainer``'s at equal precision (fp32; bf16 autocast) on
    ``model``, ``B`` rows of ``T`` random tokens, ``cfg.threads`` torch threads, all four arms interleaved
    (:func:`time_train_arms`). One row per precision: the median seconds per step of each, and our speed as a
    multiple of HF's (> 1: ours faster), the median over the timed steps of HF's step / ours in the same round
    (paired, so load that changes between rounds cancels), with its range."""
    torch.set_num_threads(cfg.threads)
    times, warm = time_train_arms(model, model.config.vocab_size, T, B, cfg, MODEL_ARMS, (False, True), out_dir,
                                  progress)
    rows = []
    for prec, settings in MODEL_ARMS.items():
        ours, hf = times[prec], times[hf_arm_name(settings["bf16"])]
        paired = [h / o for h, o in zip(hf, ours)]
        rows.append({"precision": prec if prec == "fp32" else "bf16 autocast", "tokens": T, "rows": B,
                     "threads": cfg.threads, "timed steps": len(ours),
                     "ours seconds/step": float(f"{statistics.median(ours):.4g}"),
                     "HF Trainer seconds/step": float(f"{statistics.median(hf):.4g}"),
                     "speed vs HF Trainer": round(statistics.median(paired), 2),
                     "range": f"{min(paired):.2f}-{max(paired):.2f}",
                     "ours": f"chunked loss, AdamW {TrainConfig.adamw_impl}", "torch": torch.__version__})
        log(f"{rows[-1]['precision']}: ours {rows[-1]['ours seconds/step']} s/step, HF Trainer "
            f"{rows[-1]['HF Trainer seconds/step']} s/step: ours at {rows[-1]['speed vs HF Trainer']:.2f}x HF "
            f"Trainer's speed (paired over {len(paired)} steps, range {rows[-1]['range']})")
    return rows


def _side_by_side_worker(args) -> float:
    model, vocab, T, B, cfg = args
    torch.set_num_threads(1)
    times, _ = time_train_arms(model, vocab, T, B, cfg, {"new": TRAIN_ARMS["bf16, chunked loss"]})
    return statistics.median(times["new"])


def time_side_by_side(model, vocab: int, T: int, B: int, cfg: BenchConfig) -> list[float]:
    """Median seconds per step of two processes training side by side, one thread each."""
    ctx = mp.get_context("spawn")
    with ctx.Pool(2) as pool:
        return pool.map(_side_by_side_worker, [(model, vocab, T, B, cfg)] * 2)


@torch.no_grad()
def time_generation(model, vocab: int, T: int, cfg: BenchConfig) -> dict[str, dict[str, float]]:
    """Prompt and generated tokens/s of our generator vs HF ``generate`` on the same prompts.

    Each generator is timed with 1 new token (the prompt pass) and with ``gen_new_tokens`` (the
    difference is decoding), alternating, best of 3 each; both must return the same tokens.
    """
    model = copy.deepcopy(model).eval()
    ids = _batch(vocab, T, cfg.gen_prompts, seed=1)["input_ids"]
    mask = torch.ones_like(ids)
    n_new = cfg.gen_new_tokens
    gens = {
        "ours": lambda n: greedy_ids(model, ids, mask, n, None, 0),
        "hf": lambda n: model.generate(input_ids=ids, attention_mask=mask, max_new_tokens=n, min_new_tokens=n,
                                       do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)[:, T:],
    }
    if not torch.equal(gens["ours"](n_new), gens["hf"](n_new)):
        raise AssertionError("our generator and HF generate disagree on the benchmark prompts")
    best = {(g, n): float("inf") for g in gens for n in (1, n_new)}
    for _ in range(3):
        for (g, n) in best:
            t = time.perf_counter()
            gens[g](n)
            best[g, n] = min(best[g, n], time.perf_counter() - t)
    out = {}
    for g in gens:
        prompt_s, full_s = best[g, 1], best[g, n_new]
        out[g] = {"seconds": full_s, "prompt_tokens_per_s": ids.numel() / prompt_s,
                  "generated_tokens_per_s": cfg.gen_prompts * (n_new - 1) / (full_s - prompt_s)
                  if full_s > prompt_s else float("nan")}
    return out


def run_bench(model, cfg: BenchConfig = BenchConfig(), out_dir: str = "/tmp", log=print) -> list[dict]:
    """Every measurement of the module docstring, as the rows of ``TB-Throughput``."""
    torch.set_num_threads(cfg.threads)
    vocab = model.config.vocab_size
    layers, hidden, n = model.config.num_hidden_layers, model.config.hidden_size, n_params(model)
    ceiling = {"fp32": matmul_gflops(torch.float32, cfg.matmul_n), "bf16": matmul_gflops(torch.bfloat16, cfg.matmul_n)}
    rows: list[dict] = [{"section": "ceiling", "setting": f"{p} matmul {cfg.matmul_n}^2", "GFLOP/s": round(g, 1)}
                        for p, g in ceiling.items()]
    log(f"ceiling: fp32 {ceiling['fp32']:.0f} GFLOP/s, bf16 {ceiling['bf16']:.0f}")
    for T, B in cfg.shapes:
        times, warm = time_train_arms(model, vocab, T, B, cfg, TRAIN_ARMS, (False, True) if cfg.hf_trainer else (),
                                      out_dir)
        med = {k: statistics.median(v) for k, v in times.items()}
        flops = step_flops(n, layers, hidden, T * B, T)
        v1 = med["v1 (fp32, full logits)"]
        for name, sec in med.items():
            prec = "bf16" if "bf16" in name else "fp32"
            hf = med.get(f"HF Trainer ({prec})")
            rows.append({"section": f"train {T} x {B}", "setting": name, "seconds/step": round(sec, 4),
                         "tokens/s": round(T * B / sec), "vs v1": round(v1 / sec, 2),
                         "vs HF Trainer (same precision)": round(hf / sec, 2) if hf else "",
                         "GFLOP/s": round(flops / sec / 1e9, 1),
                         "share of ceiling": round(flops / sec / 1e9 / ceiling[prec], 3),
                         "warmup s": round(warm.get(name, float("nan")), 1) if name in warm else ""})
            log(f"train {T}x{B} {name}: {T * B / sec:,.0f} tok/s ({v1 / sec:.2f}x v1)")
        if cfg.side_by_side:
            pair = time_side_by_side(model, vocab, T, B, cfg)
            one = med["bf16, chunked loss"]
            agg = sum(T * B / s for s in pair)
            rows.append({"section": f"train {T} x {B}", "setting": "bf16, chunked: 2 processes x 1 thread (sum)",
                         "seconds/step": round(statistics.mean(pair), 4), "tokens/s": round(agg),
                         "vs v1": round(agg / (T * B / v1), 2), "vs HF Trainer (same precision)": "",
                         "GFLOP/s": round(flops * sum(1 / s for s in pair) / 1e9, 1),
                         "share of ceiling": round(flops * sum(1 / s for s in pair) / 1e9 / ceiling["bf16"], 3),
                         "vs one 2-thread process": round(agg / (T * B / one), 2)})
            log(f"side by side {T}x{B}: {agg:,.0f} tok/s ({agg / (T * B / one):.2f}x one 2-thread process)")
    for T in cfg.gen_lengths:
        g = time_generation(model, vocab, T, cfg)
        for name, label in (("ours", "ours (repro.generate)"), ("hf", "HF generate")):
            rows.append({"section": f"generate {cfg.gen_prompts} x {T} + {cfg.gen_new_tokens}", "setting": label,
                         "seconds": round(g[name]["seconds"], 4),
                         "prompt tokens/s": round(g[name]["prompt_tokens_per_s"]),
                         "generated tokens/s": round(g[name]["generated_tokens_per_s"]),
                         "vs HF generate": round(g["hf"]["seconds"] / g[name]["seconds"], 2)})
        log(f"generate {T}: ours {g['hf']['seconds'] / g['ours']['seconds']:.2f}x HF generate")
    env = {"threads": cfg.threads, "torch": torch.__version__, "params": n, "layers": layers, "hidden": hidden,
           "cpu_capability": torch.backends.cpu.get_cpu_capability()}
    for r in rows:
        r.update(env)
    return rows


def throughput_summary(rows: Sequence[Mapping[str, Any]]) -> str:
    """TB-Throughput's one line for the index: per training shape, the best setting's tokens/s against v1 and against
    HF ``Trainer`` at the same precision; per generation shape, ours against HF ``generate`` (ratios within the run)."""
    parts = []
    for section in dict.fromkeys(r["section"] for r in rows if r["section"].startswith(("train", "generate"))):
        rs = [r for r in rows if r["section"] == section and r.get("setting") not in ("HF Trainer (fp32)",
                                                                                      "HF Trainer (bf16)")]
        if section.startswith("train"):
            best = max((r for r in rs if isinstance(r.get("vs HF Trainer (same precision)"), (int, float))),
                       key=lambda r: r.get("tokens/s") or 0, default=None)
            if best:
                parts.append(f"{section}: {best['setting']} {best['tokens/s']} tok/s, {best['vs v1']}x v1, "
                             f"{best['vs HF Trainer (same precision)']}x HF Trainer")
        else:
            ours = next((r for r in rs if str(r.get("setting", "")).startswith("ours")), None)
            if ours and ours.get("vs HF generate") is not None:
                parts.append(f"{section}: {ours['vs HF generate']}x HF generate")
    return "; ".join(parts)
