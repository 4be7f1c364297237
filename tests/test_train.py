"""Trainer: token-averaged loss, schedules, checkpoints, and exact resume after a kill."""

import json
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file

from repro.checkpoint_state import STATE_FILES
from repro.data.packing import lm_segment, pack_rows
from repro.train import Interrupted, Trainer, TrainConfig, answer_exact_match, lr_at, weighted_clm_loss
from repro.train.config import ADAMW_IMPLS


class ToyMethod:
    """Random packed LM rows as a pure function of the step."""

    name = "toy"

    def __init__(self, vocab=64):
        self.vocab = vocab
        self.seen = []

    def batch(self, step):
        rng = np.random.default_rng([7, step])
        segs = [lm_segment(rng.integers(3, self.vocab, size=int(rng.integers(4, 12)))) for _ in range(6)]
        return pack_rows(segs, 16, 0)

    def observe(self, step, metrics):
        self.seen.append(step)

    def finished(self, step):
        return False

    def state_dict(self):
        return {"observed": len(self.seen)}

    def load_state_dict(self, state):
        self.seen = list(range(state["observed"]))


def _weights(model):
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


@pytest.mark.parametrize("kill_after", [1, 3, 4])
def test_killed_and_resumed_run_ends_with_identical_weights(tiny_llama, tmp_path, kill_after):
    cfg = TrainConfig(max_steps=6, lr=3e-3, warmup_steps=2, checkpoint_every=2, seed=0)
    ref = tiny_llama()
    Trainer(ref, ToyMethod(), cfg, tmp_path / "ref", progress=False).train()

    m = tiny_llama()
    with pytest.raises(Interrupted):
        Trainer(m, ToyMethod(), cfg, tmp_path / "run", progress=False).train(stop_after=kill_after)
    # a new process re-creates the model; before the first checkpoint it starts from the same
    # seeded init, after it the weights must come from disk (a different init proves that)
    fresh = tiny_llama(seed=0 if kill_after < cfg.checkpoint_every else 123)
    Trainer(fresh, ToyMethod(), cfg, tmp_path / "run", progress=False).train()
    a, b = _weights(ref), _weights(fresh)
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    # the metrics log has exactly one line per step after the resume
    lines = (tmp_path / "run" / "metrics.jsonl").read_text().splitlines()
    assert len(lines) == 6
    # the final folder holds loadable safetensors weights equal to the in-memory model
    saved = load_file(tmp_path / "run" / "final" / "model.safetensors")
    assert torch.equal(saved["model.embed_tokens.weight"], b["model.embed_tokens.weight"])


class HalvingMethod(ToyMethod):
    """Asks for half the learning rate from its third observed step on (a state-dependent scale)."""

    name = "halving"

    def lr_scale(self, step):
        return 0.5 if len(self.seen) >= 3 else 1.0


def test_method_lr_scale_multiplies_the_schedule_and_survives_a_resume(tiny_llama, tmp_path):
    cfg = TrainConfig(max_steps=6, lr=2e-3, warmup_steps=2, schedule="constant", checkpoint_every=2, seed=0)
    ref = tiny_llama()
    Trainer(ref, HalvingMethod(), cfg, tmp_path / "ref", progress=False).train()
    lines = [json.loads(ln) for ln in (tmp_path / "ref" / "metrics.jsonl").read_text().splitlines()]
    assert [r["lr"] for r in lines] == pytest.approx([1e-3, 2e-3, 2e-3, 1e-3, 1e-3, 1e-3])
    # the scale changed the update: a plain run differs from step 3 on
    plain = tiny_llama()
    Trainer(plain, ToyMethod(), cfg, tmp_path / "plain", progress=False).train()
    assert not torch.equal(_weights(plain)["model.embed_tokens.weight"], _weights(ref)["model.embed_tokens.weight"])
    m = tiny_llama()
    with pytest.raises(Interrupted):
        Trainer(m, HalvingMethod(), cfg, tmp_path / "run", progress=False).train(stop_after=3)
    fresh = tiny_llama(seed=123)
    Trainer(fresh, HalvingMethod(), cfg, tmp_path / "run", progress=False).train()
    a, b = _weights(ref), _weights(fresh)
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_checkpoints_are_complete_and_pruned(tiny_llama, tmp_path):
    cfg = TrainConfig(max_steps=6, lr=1e-3, checkpoint_every=2, keep_checkpoints=1)
    Trainer(tiny_llama(), ToyMethod(), cfg, tmp_path, progress=False).train()
    ckpts = sorted(p.name for p in tmp_path.glob("ckpt-*"))
    assert ckpts == ["ckpt-6"]
    assert {p.name for p in (tmp_path / "ckpt-6").iterdir()} == {"model.safetensors", "state.json", *STATE_FILES}
    assert not list(tmp_path.glob(".*"))


def test_loss_is_averaged_over_valid_tokens_not_sequences():
    logits = torch.zeros(2, 4, 5)
    logits[0, :, 1] = 10.0  # row 0 predicts token 1 confidently
    ids = torch.tensor([[0, 1, 1, 1], [0, 2, 2, 2]])
    w = torch.tensor([[0, 1, 1, 1], [0, 1, 0, 0]], dtype=torch.float32)
    loss, ce = weighted_clm_loss(logits, ids, w)
    expected = (ce[0].sum() + ce[1, 0]) / 4  # 4 valid tokens, not the mean of 2 row means
    assert torch.isclose(loss, expected)
    assert math.isclose(float(ce[1, 0]), math.log(5), rel_tol=1e-5)


def test_answer_exact_match_counts_whole_answers():
    ids = torch.tensor([[0, 1, 2, 3, 4]])
    logits = torch.full((1, 5, 6), -5.0)
    for t, nxt in enumerate([1, 2, 3, 0]):  # predicts 1,2,3 right, then 0 instead of 4
        logits[0, t, nxt] = 5.0
    groups = torch.tensor([[-1, 0, 0, 1, 1]])
    assert answer_exact_match(logits, ids, groups) == (1, 2)


def test_the_package_re_exports_the_moved_names():
    import repro.train
    from repro import schedules
    from repro.methods import metrics, protocol

    for home, names in [(protocol, ("Method", "MethodHooks", "OPTIONAL_HOOKS", "StepState")),
                        (schedules, ("cosine_decay",)),
                        (metrics, ("finish_metrics", "answer_exact_match", "answer_exact_match_hidden"))]:
        for name in names:
            assert getattr(repro.train, name) is getattr(home, name), name
    assert all(hasattr(repro.train, name) for name in repro.train.__all__)


def test_lr_schedule_warmup_cosine_constant():
    c = TrainConfig(max_steps=110, lr=1.0, warmup_steps=10, min_lr_ratio=0.1)
    assert lr_at(c, 0) == pytest.approx(0.1) and lr_at(c, 9) == pytest.approx(1.0)
    assert lr_at(c, 10) == pytest.approx(1.0) and lr_at(c, 110) == pytest.approx(0.1)
    assert lr_at(c, 60) == pytest.approx(0.55)
    k = TrainConfig(max_steps=10, lr=1.0, schedule="constant")
    assert lr_at(k, 9) == 1.0
    with pytest.raises(ValueError, match="schedule='linear'"):
        TrainConfig(max_steps=1, lr=1.0, schedule="linear")


def test_bf16_autocast_step_runs_and_changes_weights(tiny_llama, tmp_path):
    m = tiny_llama()
    before = _weights(m)
    cfg = TrainConfig(max_steps=2, lr=1e-3, bf16=True, checkpoint_every=0)
    Trainer(m, ToyMethod(), cfg, tmp_path, progress=False).train()
    after = _weights(m)
    assert after["model.embed_tokens.weight"].dtype == torch.float32  # master weights stay fp32
    assert not torch.equal(before["model.layers.0.self_attn.q_proj.weight"],
                           after["model.layers.0.self_attn.q_proj.weight"])


@pytest.mark.parametrize("threads", [1, 2])
def test_threads_are_pinned_recorded_and_restored(tiny_llama, tmp_path, threads):
    before = torch.get_num_threads()
    seen = []

    class Probe(ToyMethod):
        def observe(self, step, metrics):
            seen.append(torch.get_num_threads())

    cfg = TrainConfig(max_steps=2, lr=1e-3, checkpoint_every=0, threads=threads)
    final = Trainer(tiny_llama(), Probe(), cfg, tmp_path, progress=False).train()
    summary = json.loads((final / "train_summary.json").read_text())
    assert seen == [threads, threads] and summary["threads"] == threads
    assert summary["torch"] == torch.__version__ and summary["cpu_capability"]
    assert torch.get_num_threads() == before


def test_chunked_and_plain_loss_train_to_the_same_weights_in_float64(tiny_llama, tmp_path):
    out = []
    for chunked in (True, False):
        m = tiny_llama().double()
        cfg = TrainConfig(max_steps=3, lr=1e-3, checkpoint_every=0, chunked_loss=chunked)
        Trainer(m, ToyMethod(), cfg, tmp_path / str(chunked), progress=False).train()
        out.append(_weights(m))
    for k in out[0]:
        assert torch.allclose(out[0][k], out[1][k], rtol=0, atol=1e-12), k


def test_frozen_parameters_get_no_optimizer_state_and_stay_bitwise(tiny_llama, tmp_path):
    model = tiny_llama()
    frozen = {n: p for n, p in model.named_parameters() if "embed_tokens" in n or "layers.0." in n}
    start = {n: p.detach().clone() for n, p in frozen.items()}
    for p in frozen.values():
        p.requires_grad_(False)
    t = Trainer(model, ToyMethod(), TrainConfig(max_steps=3, lr=1e-2, checkpoint_every=0), tmp_path, progress=False)
    t.train()
    assert all(torch.equal(p, start[n]) for n, p in frozen.items())
    assert {id(p) for p in t.opt.state} == {id(p) for p in model.parameters() if p.requires_grad}
    assert len(t.opt.state) == len(list(model.parameters())) - len(frozen) > 0
    q = "model.layers.1.self_attn.q_proj.weight"
    assert not torch.equal(model.state_dict()[q], tiny_llama().state_dict()[q])  # the rest trained


def test_adamw_is_fused_by_default_and_each_implementation_gives_the_same_update(tiny_llama, tmp_path):
    assert TrainConfig(max_steps=1, lr=1e-3).adamw_impl == "fused"  # as HF Trainer's adamw_torch_fused
    start = _weights(tiny_llama())
    after, flags = {}, {}
    for impl in ADAMW_IMPLS:
        m = tiny_llama()
        cfg = TrainConfig(max_steps=1, lr=1e-2, weight_decay=0.1, checkpoint_every=0, adamw_impl=impl)
        t = Trainer(m, ToyMethod(), cfg, tmp_path / impl, progress=False)
        t.train()
        flags[impl] = {k: t.opt.defaults[k] for k in ("fused", "foreach")}
        after[impl] = _weights(m)
    assert flags == {"fused": {"fused": True, "foreach": None}, "foreach": {"fused": None, "foreach": True},
                     "for-loop": {"fused": None, "foreach": None}}  # for-loop: torch's defaults, as before
    for k in start:
        step = (after["for-loop"][k] - start[k]).abs().max()
        assert step > 1e-4, k  # every tensor moved (lr 1e-2: about 1e-2 per element)
        # one update of the fused kernel: the for-loop's up to float32 rounding of the weights
        assert (after["fused"][k] - after["for-loop"][k]).abs().max() <= 1e-6 * start[k].abs().max() + 1e-8, k
        assert torch.equal(after["foreach"][k], after["for-loop"][k]), k  # on the CPU: the same kernels in a loop
    with pytest.raises(ValueError, match=r"adamw_impl='adam'; allowed: fused, foreach, for-loop"):
        TrainConfig(max_steps=1, lr=1e-3, adamw_impl="adam")


def test_a_resumed_run_uses_its_own_adamw_implementation_not_the_checkpoints(tiny_llama, tmp_path):
    first = TrainConfig(max_steps=4, lr=3e-3, checkpoint_every=2, adamw_impl="for-loop")
    with pytest.raises(Interrupted):
        Trainer(tiny_llama(), ToyMethod(), first, tmp_path / "run", progress=False).train(stop_after=2)
    saved = json.loads((tmp_path / "run" / "ckpt-2" / "optimizer.json").read_text())["param_groups"]
    assert {g["fused"] for g in saved} == {None}
    t = Trainer(tiny_llama(), ToyMethod(), TrainConfig(max_steps=4, lr=3e-3, checkpoint_every=2), tmp_path / "run",
                progress=False)
    t.train()
    assert t.step == 4 and {(g["fused"], g["foreach"]) for g in t.opt.param_groups} == {(True, None)}
