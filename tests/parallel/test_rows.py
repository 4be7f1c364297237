"""Every method trained with its rows split over gloo processes: the step's loss and every parameter gradient equal
one process's, in float64 (``tests/parallel/method_worker.py``), at N = 2 and 4 ranks per row and at DP 2 x SP 2."""

import numpy as np
import pytest
import torch

from tests.parallel.method_worker import reference, run_method_check, train_args

METHODS = ("flt", "pose", "rpes", "longrecipe", "selfdistill", "longce", "cdt", "prolong")
"""Every command-line method (``repro.arms.METHOD_NAMES``)."""
TARGET, ROWS = 128, 4
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
    return {m: train_args(m, sp_model_dir, text_folder, TARGET, ROWS,
                          extra=["--anchors", str(anchors)] if m == "longrecipe" else []) for m in METHODS}


@pytest.fixture(scope="module")
def split_results(cases):
    """Each setup's per-rank results for every method (one launch of the processes per setup)."""
    return {name: run_method_check(cases, world, sp, layout, timeout=600)
            for name, (world, sp, layout) in SETUPS.items()}


@pytest.fixture(scope="module")
def references(cases):
    """One process: the whole batch, and the data-parallel shares as micro-batches; self-distillation's skip
    view in two passes (what it runs split), and with the prefix-shared pass (the default)."""
    keys = [(m, dp, True) for m in METHODS for dp in (1, 2)] + [("selfdistill", 1, False)]
    return {(m, dp, two): reference(cases[m], dp, two_pass=two) for m, dp, two in keys}


@pytest.mark.slow
@pytest.mark.parametrize("setup", list(SETUPS))
@pytest.mark.parametrize("method", METHODS)
def test_split_rows_step_equals_one_process_float64(split_results, references, method, setup):
    world, sp, _ = SETUPS[setup]
    ranks = split_results[setup][method]
    ref = references[(method, world // sp, True)]
    assert len(ranks) == world
    for got in ranks:
        assert abs(float(got["loss"]) - float(ref["loss"])) < 1e-10
        np.testing.assert_allclose(got["grads"], ref["grads"], rtol=0, atol=1e-10)
        # not vacuous: the decoder ran on 1/N of each row, never on a whole row (LongCE's short windows run whole)
        seen, length = set(got["decoder_tokens"].tolist()), int(got["row_length"])
        assert length // sp in seen and length not in seen
    assert np.abs(ref["grads"]).max() > 1e-3


@pytest.mark.slow
def test_two_passes_and_the_prefix_shared_pass_agree_for_self_distillation(references):
    """Split rows run the skip view in two passes; one process shares the prefix. They agree to the float32
    rounding of transformers' RMSNorm (tests/methods/test_selfdistill.py), not beyond."""
    two, shared = references[("selfdistill", 1, True)], references[("selfdistill", 1, False)]
    assert abs(float(two["loss"]) - float(shared["loss"])) < 1e-10
    np.testing.assert_allclose(two["grads"], shared["grads"], rtol=0, atol=1e-6)


@pytest.mark.slow
def test_data_parallel_shares_equal_the_whole_batch_for_row_sums(references):
    """CLM-type objectives are sums over rows: the DP reference is the whole batch's. CDT's shift comes from each
    share's own mean loss, so its DP step is the documented weighted sum (repro.methods.protocol)."""
    for m in ("flt", "prolong", "longce"):
        np.testing.assert_allclose(references[(m, 2, True)]["grads"], references[(m, 1, True)]["grads"], atol=1e-10)
    assert np.abs(references[("cdt", 2, True)]["grads"] - references[("cdt", 1, True)]["grads"]).max() > 1e-6


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
