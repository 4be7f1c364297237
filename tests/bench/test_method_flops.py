"""The FLOP bounds of RP-Cost and CD-Cost: the proportions of Llama-3-8B, the issue's closed forms, and the matmul
FLOPs of real steps counted by torch's FlopCounterMode (attention aside: the counter takes sdpa as non-causal)."""

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode
from transformers import LlamaConfig, LlamaForCausalLM

from repro.bench.method_flops import Dims, cdt_flops, ce_flops, longce_window_flops, rows_flops, selfdistill_flops

LLAMA3_8B = Dims(hidden=4096, layers=32, heads=32, kv_heads=8, head_dim=128, intermediate=14336, vocab=128256)


def test_llama3_8b_proportions_and_the_closed_forms():
    h, L = 4096, 32
    body = 2 * L * (2 * h * h + 2 * h * 1024 + 3 * h * 14336)
    assert LLAMA3_8B.body == body
    assert LLAMA3_8B.head / LLAMA3_8B.body == pytest.approx(128256 / (13 * h * L), rel=1e-3)  # ~0.075
    for T, ratio in ((8192, 0.154), (65536, 1.231)):
        prop = LLAMA3_8B.proportions(T)
        assert prop["attention/body"] == pytest.approx(ratio, abs=1e-3)
        B, A, H = 1.0, prop["attention/body"], prop["head/body"]
        assert cdt_flops(LLAMA3_8B, T, "frozen") / ce_flops(LLAMA3_8B, T) == pytest.approx(
            (5 * B + 6 * A + 5 * H) / (3 * B + 3 * A + 3 * H), rel=1e-12)
        assert cdt_flops(LLAMA3_8B, T, "full_backward") / ce_flops(LLAMA3_8B, T) == pytest.approx(2.0)
        # the authors' step: a discarded clean forward + full backward, then two more of each (9 forwards' FLOPs)
        assert cdt_flops(LLAMA3_8B, T, "authors") / ce_flops(LLAMA3_8B, T) == pytest.approx(3.0)
    # skip, prefix-shared, s uniform: (4.5 B + 5 A) / (3 B + 3 A) plus the KL's head (4 x half the row's logits)
    for T in (8192, 65536):
        prop = LLAMA3_8B.proportions(T)
        A, H = prop["attention/body"], prop["head/body"]
        mean = np.mean([selfdistill_flops(LLAMA3_8B, T, s, {}) for s in range(T)]) / ce_flops(LLAMA3_8B, T)
        assert mean == pytest.approx((4.5 + 5 * A + 3 * H + 2 * H) / (3 + 3 * A + 3 * H), rel=2e-3)
    assert LLAMA3_8B.attention(0, 100) == LLAMA3_8B.attention(0, 40) + LLAMA3_8B.attention(40, 100)


def test_views_and_arms():
    d, T = Dims(64, 2, 4, 2, 16, 128, 512), 256
    ce = ce_flops(d, T)
    naive = selfdistill_flops(d, T, 100, {"shared_prefix": False})
    assert selfdistill_flops(d, T, 0, {}) == naive + 100 * 4 * d.head  # s = 0: the whole row twice, KL everywhere
    assert selfdistill_flops(d, T, 100, {}) < naive
    assert selfdistill_flops(d, T, 100, {"consistency": "none"}) == ce  # Standard
    assert selfdistill_flops(d, T, 7, {"consistency": "none", "standard_clm": False}) == ce  # PoSE: one view
    assert selfdistill_flops(d, T, 0, {"view": "cyclic"}) == 2 * ce + T * d.head
    assert selfdistill_flops(d, T, 0, {"consistency": "none", "longce": True}, (64, 16)) == \
        ce + longce_window_flops(d, T, 64, 16)
    with pytest.raises(ValueError, match="longce"):
        selfdistill_flops(d, T, 0, {"longce": True})
    with pytest.raises(ValueError, match="detection='x'"):
        cdt_flops(d, T, "x")
    assert rows_flops(lambda n, s: float(n + s), [3, 4], [1, 2]) == 10.0


def _model(tied=False):
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=96, hidden_size=32, intermediate_size=80, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=256, tie_word_embeddings=tied, use_cache=False)
    return LlamaForCausalLM(cfg).float(), Dims.of(cfg)


class MatmulFlops(TorchDispatchMode):
    """Counts ``2 m k n`` for every ``mm``/``addmm`` dispatched: the weight matmuls (sdpa's kernels are other ops,
    and the KL's per-position dot products are ``bmm``: elementwise work, left out as the count leaves it)."""

    def __init__(self):
        super().__init__()
        self.flops = 0.0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        aten = torch.ops.aten
        if func in (aten.mm.default, aten.addmm.default):
            a, b = (args[1], args[2]) if func is aten.addmm.default else (args[0], args[1])
            self.flops += 2.0 * a.shape[0] * a.shape[1] * b.shape[1]
        return func(*args, **(kwargs or {}))


def _matmul_flops(fn) -> float:
    """FLOPs of the weight matmuls ``fn`` runs, forward and backward."""
    with MatmulFlops() as counter:
        fn()
    return counter.flops


def test_matmul_flops_of_real_steps_match_the_count():
    """The body and head FLOPs of the CE step, CDT's step and the prefix-shared skip step, as torch counts them."""
    from repro.bench.cdt_cost import cdt_step, detection
    from repro.methods.cdt import CDTSpec
    from repro.methods.selfdistill import SelfDistillSpec, selfdistill_batch, selfdistill_loss
    from repro.train import clm_step

    model, d = _model()
    B, T = 2, 48
    ids = torch.randint(0, 96, (B, T), generator=torch.Generator().manual_seed(0))
    batch = {"input_ids": ids, "position_ids": torch.arange(T).expand(B, T), "weights": torch.ones(B, T)}

    # the CE step: 3 (T B + T H) per row; the chunked loss scores T - 1 targets (the last position has none)
    got = _matmul_flops(lambda: clm_step(model, batch, False)[0].backward())
    want = B * 3 * (T * d.body + (T - 1) * d.head)
    assert got == pytest.approx(want, rel=1e-12)
    # CDT (weights frozen in the detection): 5 T B + 5 T H
    spec = CDTSpec(beta=10.0)
    got = _matmul_flops(lambda: cdt_step(model, batch, spec, 1e-3, detect=detection("frozen"))[0].backward())
    assert got == pytest.approx(B * 5 * (T * d.body + (T - 1) * d.head), rel=1e-12)
    # skip, prefix-shared: the CE step, 3 (T - s) B for the suffix, 4 (T - s) H for the KL
    sd = SelfDistillSpec()
    b = selfdistill_batch(ids, sd, np.random.default_rng(1))
    splits = b["split"].tolist()
    got = _matmul_flops(lambda: selfdistill_loss(model, b, sd)[0].backward())
    want = sum(3 * (T * d.body + (T - 1) * d.head) + 3 * (T - s) * d.body + 4 * (T - s) * d.head for s in splits)
    assert got == pytest.approx(want, rel=1e-12)
