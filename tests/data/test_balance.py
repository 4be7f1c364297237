"""Sum of squared document lengths of packed micro-batches (padding is no document) and the descending order."""

import numpy as np
import torch

from repro.data.balance import document_lengths, order_by_cost, padding_mask, sum_sq_lengths, tokens
from repro.data.packing import lm_segment, pack_rows


def _rows(*lengths_per_row, T=8):
    """One packed row per tuple of document lengths (each row packed alone)."""
    parts = [pack_rows([lm_segment(np.arange(3, 3 + n)) for n in lengths], T, 0) for lengths in lengths_per_row]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def test_documents_and_sum_of_squares_leave_padding_out():
    b = _rows((8,), (4, 4), (2, 2, 2, 2), (3,), (5, 1))
    pad = padding_mask(b)
    assert pad.sum(1).tolist() == [0, 0, 0, 5, 2]
    lengths = document_lengths(b["doc_ids"], pad)
    assert [x.tolist() for x in lengths] == [[8], [4, 4], [2, 2, 2, 2], [3], [5, 1]]
    assert sum_sq_lengths(b) == 64 + 32 + 16 + 9 + 26
    assert sum_sq_lengths({k: torch.as_tensor(v) for k, v in b.items()}) == 147  # tensors too
    assert tokens(b) == 40


def test_padding_by_pad_id_and_rows_without_doc_ids():
    b = _rows((3,), (8,))
    assert padding_mask(b, pad_id=0).sum() == 5 and sum_sq_lengths(b, pad_id=0) == 9 + 64
    plain = {"input_ids": b["input_ids"], "weights": b["weights"]}  # one document per row, padding = trailing zeros
    assert sum_sq_lengths(plain) == 9 + 64
    assert [x.tolist() for x in document_lengths(None, padding_mask(plain))] == [[3], [8]]


def test_a_trailing_document_with_weighted_targets_is_not_padding():
    b = _rows((5, 3))
    assert not padding_mask(b).any() and sum_sq_lengths(b) == 34


def test_order_is_descending_and_stable():
    batches = [_rows((3,)), _rows((8,)), _rows((2, 2, 2, 2)), _rows((4, 4)), _rows((4, 4))]
    assert [sum_sq_lengths(x) for x in batches] == [9, 64, 16, 32, 32]
    assert order_by_cost(batches) == [1, 3, 4, 2, 0]
