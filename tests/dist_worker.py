"""One training process of the multi-process trainer tests: ``python -m tests.dist_worker SPEC_JSON``.

The launcher (the tests, ``torchrun``, ``accelerate launch``) sets the rank variables; the spec (JSON, no pickle)
names the output folder, the engine (DDP, or DeepSpeed with ``deepspeed_config``), the schedule and ``tied`` (the
model's output head tied to its embeddings). The process trains :class:`UnevenRows` on :func:`tiny_model` and writes
``result-<rank>.json`` when done. With the environment variable ``HANG_AT_STEP`` it stops in that step's ``observe``
(after the previous checkpoint is complete) and waits to be killed, having written ``hanging-<rank>``: the same command
then resumes.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import numpy as np
import torch

from repro.data.packing import lm_segment, pack_rows
from repro.train import Trainer, TrainConfig

ROWS, SEQ, VOCAB = 4, 32, 64


def tiny_model(seed: int = 0, tied: bool = False):
    """A 2-layer, 64-wide random Llama (``tied``: its output head is its input embeddings)."""
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                      attn_implementation="sdpa", use_cache=False, tie_word_embeddings=tied)
    return LlamaForCausalLM(cfg)


class UnevenRows:
    """4 packed rows of 32 tokens per step (one pack each): the first two full of documents, the last two one short
    document each and padding, so the two ranks' shares (rows 0-1 and 2-3) hold very different valid target
    counts (54 against 2 to 4)."""

    name = "uneven_rows"

    def __init__(self, hang_at_step: int | None = None, marker: Path | None = None):
        self.seen = 0
        self.hang_at_step, self.marker = hang_at_step, marker

    def batch(self, step):
        rng = np.random.default_rng([11, step])
        packs = []
        for lengths in ((10, 12, 8), (14, 15), (int(rng.integers(2, 5)),), (int(rng.integers(2, 5)),)):
            segs = [lm_segment(rng.integers(3, VOCAB, size=n)) for n in lengths]
            packs.append(pack_rows(segs, SEQ, 0))
        return {k: np.concatenate([p[k] for p in packs]) for k in packs[0]}

    def observe(self, step, metrics):
        self.seen += 1
        if step == self.hang_at_step:
            self.marker.write_text(str(step))
            time.sleep(600)

    def finished(self, step):
        return False

    def state_dict(self):
        return {"observed": self.seen}

    def load_state_dict(self, state):
        self.seen = int(state["observed"])


def train_config(spec: dict) -> TrainConfig:
    """The run's settings (also the single-process reference's)."""
    return TrainConfig(max_steps=spec["steps"], lr=3e-3, warmup_steps=1, checkpoint_every=spec["checkpoint_every"],
                       seed=0, threads=1, micro_batch_size=spec.get("micro_batch_size", 0))


def main(spec_path: str) -> None:
    from repro.distributed import make_accelerator

    spec = json.loads(Path(spec_path).read_text())
    torch.set_num_threads(1)
    accelerator = make_accelerator(spec.get("deepspeed_config"), global_batch=ROWS)
    rank = accelerator.process_index
    out = Path(spec["out"])
    hang = os.environ.get("HANG_AT_STEP")
    method = UnevenRows(int(hang) if hang else None, out / f"hanging-{rank}")
    trainer = Trainer(tiny_model(tied=spec.get("tied", False)), method, train_config(spec), out, progress=False,
                      accelerator=accelerator)
    final = trainer.train()
    result = {"rank": rank, "world": accelerator.num_processes, "final": str(final), "step": trainer.step,
              "engine": type(trainer.engine).__name__}
    tmp = out / f".result-{rank}.tmp"
    tmp.write_text(json.dumps(result))
    os.replace(tmp, out / f"result-{rank}.json")
    accelerator.wait_for_everyone()
    torch.distributed.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv[1])
    # gloo's threads can abort the interpreter's teardown after every result is written: leave directly
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)
