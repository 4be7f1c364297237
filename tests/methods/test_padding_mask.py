"""Padding is read from the rows' attention mask, never from token equality with the pad id: on a tokenizer whose
pad token is its EOS (SmolLM2's ``<|im_end|>``), an answer's terminator is a real token for CDT's valid mask and
the self-distillation KL mask, and only the packing's padding is left out."""

import copy

import numpy as np
import pytest
import torch

from repro.data.packing import Segment, pack_rows
from repro.methods.cdt import CDTSpec, denoised, valid_tokens
from repro.methods.selfdistill import SelfDistillation, SelfDistillSpec, selfdistill_batch


@pytest.fixture(scope="module")
def eos_pad_tokenizer(small_tokenizer):
    """The session tokenizer with its pad token set to its EOS (as SmolLM2's and many chat tokenizers)."""
    tok = copy.deepcopy(small_tokenizer)
    tok.pad_token = tok.eos_token
    assert tok.pad_token_id == tok.eos_token_id != small_tokenizer.pad_token_id
    return tok


def _answer_rows(tok, T: int = 40):
    """Two question/answer segments, each ending with the EOS terminator, packed into rows of ``T`` tokens padded
    with the pad id (= EOS): ``(batch, terminator positions, padding positions)``."""
    segs = []
    for q, a in (("Where is the key? In the", " drawer"), ("Who wrote it? It was", " Ada")):
        prompt = tok(q).input_ids
        answer = tok(a, add_special_tokens=False).input_ids + [tok.eos_token_id]
        w = np.r_[np.full(len(prompt), 0.05), np.ones(len(answer))].astype(np.float32)
        segs.append(Segment(np.asarray(prompt + answer, dtype=np.int64), w))
    batch = pack_rows(segs, T, tok.pad_token_id)
    ends = np.cumsum([len(s.tokens) for s in segs]) - 1
    assert batch["input_ids"].shape == (1, T) and ends[-1] < T - 1  # one row, with padding after the last answer
    assert (batch["input_ids"][0, ends] == tok.eos_token_id).all()
    return batch, ends, np.arange(ends[-1] + 1, T)


def test_pack_rows_marks_padding_in_the_attention_mask_only(eos_pad_tokenizer):
    batch, ends, pad = _answer_rows(eos_pad_tokenizer)
    mask = batch["attention_mask"][0]
    assert mask[ends].tolist() == [1, 1] and mask[pad].sum() == 0 and mask.sum() == ends[-1] + 1
    # the token ids alone cannot tell them apart: terminator and padding are the same id
    assert set(batch["input_ids"][0, pad].tolist()) == {int(batch["input_ids"][0, ends[0]])}


def test_cdt_valid_mask_keeps_the_answer_terminator(eos_pad_tokenizer):
    tok = eos_pad_tokenizer
    batch, ends, pad = _answer_rows(tok)
    b = {k: torch.as_tensor(v) for k, v in batch.items()}
    valid = valid_tokens(b, tok.pad_token_id)
    assert valid[0, ends].all() and not valid[0, pad].any() and int(valid.sum()) == ends[-1] + 1
    # the old token-equality rule would have dropped both terminators (what the mask fixes)
    assert not (b["input_ids"] != tok.pad_token_id)[0, ends].any()

    # Eq. 2-3 on a hand-made gradient: the terminators have the smallest norms, so they are noise and move; the
    # padding (same id, smaller norm still) is not a token of the row and stays put
    T, H = b["input_ids"].shape[1], 4
    norms = torch.full((1, T), 2.0, dtype=torch.float64)
    norms[0, ends], norms[0, pad] = 0.5, 0.1
    d = torch.randn(1, T, H, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    grad = d / d.norm(dim=-1, keepdim=True) * norms[..., None]
    embeds = torch.randn(1, T, H, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    out, metrics = denoised(embeds, grad, b, CDTSpec(beta=1.0, threshold="row"), lr=1.0, pad_id=tok.pad_token_id)
    moved = (out != embeds).any(-1)[0]
    assert moved[ends].all() and not moved[pad].any()
    assert metrics["noise_fraction"] == pytest.approx(2 / (ends[-1] + 1))


class _Rows:
    def __init__(self, batch):
        self.b = batch

    def batch(self, step):
        return dict(self.b)


def test_selfdistill_kl_mask_keeps_the_answer_terminator(eos_pad_tokenizer):
    tok = eos_pad_tokenizer
    batch, ends, pad = _answer_rows(tok)
    m = SelfDistillation("sd", SelfDistillSpec(view="cyclic"), _Rows(batch), seed=0, pad_id=tok.pad_token_id)
    b = m.batch(0)
    assert b["split"].tolist() == [0]  # the cyclic view distils every position: the mask is the real tokens
    assert b["kl_mask"][0, ends].all() and not b["kl_mask"][0, pad].any()
    assert b["kl_mask"].sum() == ends[-1] + 1


def test_selfdistill_batch_takes_the_attention_mask(eos_pad_tokenizer):
    tok = eos_pad_tokenizer
    batch, ends, pad = _answer_rows(tok)
    ids = torch.as_tensor(batch["input_ids"])
    rng = np.random.default_rng(0)
    b = selfdistill_batch(ids, SelfDistillSpec(view="cyclic"), rng, attention_mask=batch["attention_mask"])
    assert b["kl_mask"][0, ends].all() and not b["kl_mask"][0, pad].any()
    assert b["weights"][0, ends].tolist() == [1.0, 1.0] and b["weights"][0, pad].sum() == 0
    by_id = selfdistill_batch(ids, SelfDistillSpec(view="cyclic"), np.random.default_rng(0), pad_id=tok.pad_token_id)
    assert not by_id["kl_mask"][0, ends].any()  # without the mask the pad id drops them: the documented fallback
    with pytest.raises(ValueError, match="attention_mask of shape"):
        selfdistill_batch(ids, SelfDistillSpec(), rng, attention_mask=batch["attention_mask"][:, :-1])
