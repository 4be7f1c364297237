"""IG's target on CDT's labelled samples is the answer's own tokens: the EOS terminator appended as in training rows
(SmolLM2's ``<|im_end|>``: 5 nats of an 8-nat loss in one sample) is an input, not a target."""

import torch

from repro.analysis.ig import token_scores
from repro.analysis.typed_samples import typed_samples


def test_answer_positions_are_the_answer_without_its_terminator(small_tokenizer):
    tok = small_tokenizer
    for s in typed_samples(tok, 256, 3):
        pos = s.answer_positions
        assert s.input_ids[-1] == tok.eos_token_id and pos[-1] == len(s.input_ids) - 2 and pos[0] == s.prompt_tokens
        assert tok.decode(s.input_ids[pos]) == " " + s.reference
        assert s.types[-1] == "answer" and s.weights[-1] == 1.0  # the training row still learns the terminator


def test_ig_loss_is_the_cross_entropy_of_the_answer_tokens_only(small_tokenizer, tiny_llama):
    model = tiny_llama(vocab=len(small_tokenizer)).double()
    (s,) = typed_samples(small_tokenizer, 256, 1)
    ids = torch.as_tensor(s.input_ids)[None]
    sc = token_scores(model, ids, s.answer_positions)
    with torch.no_grad():
        logp = torch.log_softmax(model(ids).logits[0].double(), -1)
    ce = -logp[:-1].gather(-1, ids[0, 1:, None])[:, 0]  # ce[p - 1]: the loss of predicting token p
    answer = torch.as_tensor(s.answer_positions) - 1
    assert abs(sc.loss - float(ce[answer].mean())) < 1e-9
    with_terminator = torch.cat([answer, torch.tensor([len(s.input_ids) - 2])])
    assert abs(sc.loss - float(ce[with_terminator].mean())) > 1e-3  # the terminator is not in it
