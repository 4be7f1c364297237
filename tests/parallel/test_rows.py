"""Every method trained with its rows split over gloo processes: the step's loss and every parameter gradient equal
one process's, in float64 (``tests/parallel/method_worker.py``), at N = 2 and 4 ranks per row and at DP 2 x SP 2;
also PoSE at a target whose rows (65 tokens) cut into no number of shards, run padded at their end."""

import numpy as np
import pytest
import torch

from repro.parallel.sequence import padded_length
from tests.parallel.method_worker import reference, run_method_check, train_args

METHODS = ("flt", "pose", "rpes", "longrecipe", "selfdistill", "longce", "cdt", "prolong")
"""Every command-line method (``repro.arms.METHOD_NAMES``)."""
TARGET, ROWS = 128, 4
ODD = {"pose@130": ("pose", 130)}
"""Cases at another target: the smoke profile's PoSE rows are then round(0.5 x 130) = 65 tokens."""
CASES = {**{m: (m, TARGET) for m in METHODS}, **ODD}
"""Case name -> (method, target)."""
SETUPS = {"sp2": (2, 2, "contiguous"), "sp4": (4, 4, "zigzag"), "dp2xsp2": (4, 2, "contiguous")}
"""name -> (processes, ranks per row, layout)."""


@pytest.fixture(scope="module")
def sp_model_dir(tmp_path_factory, small_tokenizer):
    """A 2-layer random Llama with 4 heads (2 kv heads), so 4 ranks can split its heads."""
    from tests.conftest import save_tiny_model

    return save_tiny_model(tmp_path_factory.mktemp("sp") / "tiny4", small_tokenizer, layers=2, heads=4)


@pytest.fixture(scope="module")
def cases(sp_model_dir, text_folder, tmp_path_factory):
    anchors = tmp_path_factory.mktemp("sp") / "anchors.json"
    anchors.write_text('{"anchors": [13, 14, 15]}')
    return {c: train_args(m, sp_model_dir, text_folder, target, ROWS,
                          extra=["--anchors", str(anchors)] if m == "longrecipe" else [])
            for c, (m, target) in CASES.items()}


@pytest.fixture(scope="module")
def split_results(cases):
    """A setup's per-rank results for every case (one launch of the processes per setup, when first asked)."""
    done: dict = {}

    def of(name: str):
        if name not in done:
            world, sp, layout = SETUPS[name]
            done[name] = run_method_check(cases, world, sp, layout, timeout=600)
        return done[name]

    return of


@pytest.fixture(scope="module")
def references(cases):
    """One process: the whole batch, and the data-parallel shares as micro-batches; self-distillation's skip
    view in two passes (what it runs split), and with the prefix-shared pass (the default)."""
    done: dict = {}

    def of(case: str, dp: int, two: bool = True):
        if (case, dp, two) not in done:
            done[case, dp, two] = reference(cases[case], dp, two_pass=two)
        return done[case, dp, two]

    return of


@pytest.mark.slow
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("case", list(CASES))
def test_split_rows_step_equals_one_process_float64(split_results, references, case, setup):
    world, sp, layout = SETUPS[setup]
    ranks = split_results(setup)[case]
    ref = references(case, world // sp)
    assert len(ranks) == world
    for got in ranks:
        assert abs(float(got["loss"]) - float(ref["loss"])) < 1e-10
        np.testing.assert_allclose(got["grads"], ref["grads"], rtol=0, atol=1e-10)
        # not vacuous: the decoder ran on 1/N of each row, never on a whole row (LongCE's short windows run whole)
        seen, length = set(got["decoder_tokens"].tolist()), int(got["row_length"])
        padded = padded_length(length, sp, layout)  # rows that do not cut evenly run padded at their end
        assert (padded > length) == (case in ODD)
        assert padded // sp in seen and length not in seen and padded not in seen
    assert np.abs(ref["grads"]).max() > 1e-3


@pytest.mark.slow
def test_two_passes_and_the_prefix_shared_pass_agree_for_self_distillation(references):
    """Split rows run the skip view in two passes; one process shares the prefix. They agree to the float32
    rounding of transformers' RMSNorm (tests/methods/test_selfdistill.py), not beyond."""
    two, shared = references("selfdistill", 1, True), references("selfdistill", 1, False)
    assert abs(float(two["loss"]) - float(shared["loss"])) < 1e-10
    np.testing.assert_allclose(two["grads"], shared["grads"], rtol=0, atol=1e-6)


@pytest.mark.slow
def test_data_parallel_shares_equal_the_whole_batch_for_row_sums(references):
    """CLM-type objectives are sums over rows: the DP reference is the whole batch's. CDT's shift comes from each
    share's own mean loss, so its DP step is the documented weighted sum (repro.methods.protocol)."""
    for m in ("flt", "prolong", "longce"):
        np.testing.assert_allclose(references(m, 2)["grads"], references(m, 1)["grads"], atol=1e-10)
    assert np.abs(references("cdt", 2)["grads"] - references("cdt", 1)["grads"]).max() > 1e-6


def test_gather_rows_backward_keeps_each_ranks_tokens_and_head_grad_is_shared():
    """The pieces on one process with a group of one stand-in: local_tokens is the inverse of the gather order."""
    from repro.parallel.rows import RowGroup, local_tokens, scale_grad
    from repro.parallel.sequence import gathered_order

    x = torch.arange(2 * 16, dtype=torch.float64).reshape(2, 16, 1)
    for layout in ("contiguous", "zigzag"):
        shards = [local_tokens(x, RowGroup(None, 4, r, layout)) for r in range(4)]
        full = torch.cat(shards, 1)[:, np.argsort(gathered_order(16, 4, layout))]
        assert torch.equal(full, x)
    w = torch.ones(3, dtype=torch.float64, requires_grad=True)
    (scale_grad(w, 0.25) * 2).sum().backward()
    assert torch.equal(w.grad, torch.full((3,), 0.5, dtype=torch.float64))


def test_setup_refuses_one_process_and_indivisible_heads(tiny_llama):
    from repro.parallel.rows import setup

    class Acc:
        num_processes = 6

    with pytest.raises(ValueError, match="sequence_parallel=2 needs a multiple of 2 processes.*got 1"):
        setup(tiny_llama(), None, 2)
    with pytest.raises(ValueError, match="does not divide the model's 4 attention heads"):
        setup(tiny_llama(), Acc(), 3)


def test_train_config_checks_sequence_fields():
    from repro.train import TrainConfig

    with pytest.raises(ValueError, match="sequence_parallel=0; allowed"):
        TrainConfig(max_steps=1, lr=1e-3, sequence_parallel=0)
    with pytest.raises(ValueError, match="sequence_layout='ring'; allowed"):
        TrainConfig(max_steps=1, lr=1e-3, sequence_layout="ring")


def test_rows_that_do_not_cut_evenly_run_padded_at_their_end():
    """pad_rows extends each row's last document with its last token, continued positions and zero embeddings, so
    the masking policy of the full rows is the rows' own; rows already a multiple are left alone (same objects)."""
    from repro.parallel.rows import pad_rows
    from repro.parallel.step import row_attention

    assert [padded_length(n, 2) for n in (1, 64, 65)] == [2, 64, 66]
    assert padded_length(65, 4, "zigzag") == 72 and padded_length(64, 4, "zigzag") == 64
    ids, emb = torch.tensor([[5, 6, 7, 8, 9]]), torch.ones(1, 5, 2)
    restarts, doc = torch.tensor([[0, 1, 0, 1, 2]]), torch.tensor([[0, 0, 1, 1, 1]])
    i, p, d, e = pad_rows(ids, restarts, doc, emb, 2)
    assert i.tolist() == [[5, 6, 7, 8, 9, 9, 9]] and p.tolist() == [[0, 1, 0, 1, 2, 3, 4]]
    assert d.tolist() == [[0, 0, 1, 1, 1, 1, 1]] and e.shape == (1, 7, 2) and float(e[:, 5:].abs().sum()) == 0.0
    assert row_attention({"doc_ids": d, "position_ids": p}) == "restarts"
    jumped = torch.tensor([[0, 40, 0, 70, 90]])  # transformed positions of packed documents: explicit boundaries
    _, p, d, _ = pad_rows(ids, jumped, doc, None, 1)
    assert p.tolist() == [[0, 40, 0, 70, 90, 91]] and row_attention({"doc_ids": d, "position_ids": p}).tolist() == \
        [0, 2, 6]
    same = pad_rows(ids, restarts, doc, emb, 0)
    assert all(a is b for a, b in zip(same, (ids, restarts, doc, emb)))
