"""Packed documents' boundaries: spans tile each row, position restarts and doc ids agree, and ``cu_seqlens`` is
what transformers' flash-attn path computes from the same positions."""

import numpy as np
import pytest
import torch
from transformers.modeling_flash_attention_utils import prepare_fa_kwargs_from_position_ids

from repro.attention.spans import cu_seqlens, doc_spans, starts_mask, varlen_kwargs
from repro.data.packing import lm_segment, pack_rows


def _packed(seed: int, seq_len: int = 64, n_docs: int = 30) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    segs = [lm_segment(rng.integers(3, 50, int(rng.integers(1, 20)))) for _ in range(n_docs)]
    return pack_rows(segs, seq_len, pad_id=0)


@pytest.mark.parametrize("seed", range(5))
def test_spans_tile_each_row_and_match_the_packed_documents(seed):
    rows = _packed(seed)
    spans = doc_spans(rows["position_ids"])
    assert spans == doc_spans(doc_ids=rows["doc_ids"])  # restarts at 0 are the doc-id changes
    for r, row in enumerate(spans):
        assert row[0][0] == 0 and row[-1][1] == 64 and all(a[1] == b[0] for a, b in zip(row, row[1:]))
        for d, (s, e) in enumerate(row):
            assert e > s and (rows["doc_ids"][r, s:e] == d).all()
            assert (rows["position_ids"][r, s:e] == np.arange(e - s)).all()


def test_one_token_documents_a_padding_tail_and_one_row():
    pos = torch.tensor([[0, 1, 2, 0, 0, 1, 0, 0, 1, 2], [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]])
    assert doc_spans(pos) == [[(0, 3), (3, 4), (4, 6), (6, 7), (7, 10)], [(0, 10)]]
    assert doc_spans(pos[0]) == doc_spans(pos[:1])  # (T,) is one row
    # a jump to a nonzero position is no boundary; the first token always starts a document
    assert doc_spans(torch.tensor([[5, 6, 40, 41, 0, 1]])) == [[(0, 4), (4, 6)]]
    assert doc_spans(doc_ids=torch.tensor([[3, 3, 1, 1, 1, 3]])) == [[(0, 2), (2, 5), (5, 6)]]


@pytest.mark.parametrize("seed", range(3))
def test_cu_seqlens_is_int32_over_the_rows_end_to_end_as_transformers_computes_it(seed):
    rows = _packed(seed)
    pos = torch.as_tensor(rows["position_ids"])
    cu = cu_seqlens(pos)
    assert cu.dtype == torch.int32
    want = [0] + [r * 64 + e for r, row in enumerate(doc_spans(pos)) for _, e in row]
    assert cu.tolist() == want
    (fa_q, fa_k), (max_q, _) = prepare_fa_kwargs_from_position_ids(pos)
    assert torch.equal(cu, fa_q) and torch.equal(cu, fa_k)
    kw = varlen_kwargs(pos)
    assert kw["max_length_q"] == kw["max_length_k"] == int(max_q) == max(e - s for row in doc_spans(pos)
                                                                          for s, e in row)
    assert torch.equal(kw["cu_seq_lens_q"], cu) and torch.equal(cu_seqlens(doc_ids=rows["doc_ids"]), cu)


def test_bad_arguments_name_the_allowed_values():
    with pytest.raises(ValueError, match="exactly one of position_ids or doc_ids"):
        starts_mask()
    with pytest.raises(ValueError, match="exactly one of position_ids or doc_ids"):
        doc_spans(torch.zeros(1, 3, dtype=torch.long), torch.zeros(1, 3, dtype=torch.long))
    with pytest.raises(ValueError, match=r"dtype torch.float32; allowed: integer ids"):
        cu_seqlens(torch.zeros(2, 3))
    with pytest.raises(ValueError, match=r"shape \(1, 2, 3\)"):
        doc_spans(torch.zeros(1, 2, 3, dtype=torch.long))
