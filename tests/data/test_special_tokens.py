"""The document separator rule (:func:`repro.data.special_tokens.document_separator`) on the testbed tokenizer, a
chat tokenizer with ``<|endoftext|>`` (SmolLM2-Instruct's special tokens), one with only an EOS, and the documents a
``folder:`` source packs with each."""

import numpy as np
import pytest
from tokenizers import Tokenizer, models, pre_tokenizers
from transformers import PreTrainedTokenizerFast

from repro.data.long_sources import source_documents
from repro.data.special_tokens import document_separator

CHATML = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\n' + message['content'] + "
          "'<|im_end|>' + '\n'}}{% endfor %}")
"""SmolLM2-Instruct's turn format (its template, without the default system prompt)."""


def _word_tokenizer(specials: list[str], template: str | None = None, **roles) -> PreTrainedTokenizerFast:
    """A whitespace word-level tokenizer whose ids 0.. are ``specials``, then a few words."""
    words = ["the", "key", "is", "in", "drawer", "[UNK]"]
    vocab = {t: i for i, t in enumerate([*specials, *words])}
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    out = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="[UNK]", **roles)
    out.add_special_tokens({"additional_special_tokens": [s for s in specials if s not in roles.values()]})
    if template is not None:
        out.chat_template = template
    return out


@pytest.fixture(scope="module")
def chat_tokenizer():
    """SmolLM2-Instruct's layout: ``<|endoftext|>`` 0, BOS ``<|im_start|>`` 1, EOS = pad = ``<|im_end|>`` 2."""
    return _word_tokenizer(["<|endoftext|>", "<|im_start|>", "<|im_end|>"], CHATML, bos_token="<|im_start|>",
                           eos_token="<|im_end|>", pad_token="<|im_end|>")


def test_the_testbed_tokenizer_keeps_its_bos(small_tokenizer):
    assert document_separator(small_tokenizer) == small_tokenizer.bos_token_id
    assert small_tokenizer.convert_ids_to_tokens(document_separator(small_tokenizer)) == "<|bos|>"


def test_a_chat_tokenizer_separates_documents_with_endoftext(chat_tokenizer):
    assert (chat_tokenizer.bos_token_id, chat_tokenizer.eos_token_id, chat_tokenizer.pad_token_id) == (1, 2, 2)
    assert document_separator(chat_tokenizer) == 0


def test_an_eos_only_tokenizer_separates_with_its_eos():
    tok = _word_tokenizer(["<pad>", "</s>"], eos_token="</s>", pad_token="<pad>")
    assert tok.bos_token is None
    assert document_separator(tok) == 1


def test_a_bos_written_in_the_chat_template_is_a_turn_marker():
    """A BOS the template writes literally opens turns (whatever its name); a ``{{ bos_token }}`` one does not."""
    turn = "{% for m in messages %}<turn>{{ m['content'] }}</s>{% endfor %}"
    tok = _word_tokenizer(["<turn>", "</s>"], turn, bos_token="<turn>", eos_token="</s>")
    assert document_separator(tok) == 1  # the EOS: no <|endoftext|>
    tok = _word_tokenizer(["<turn>", "</s>"], "{{ bos_token }}" + turn.replace("<turn>", "[u]"), bos_token="<turn>",
                          eos_token="</s>")
    assert document_separator(tok) == 0


def test_no_separator_is_one_error():
    tok = _word_tokenizer(["<|im_start|>"], bos_token="<|im_start|>")
    with pytest.raises(ValueError, match=r"no document separator: its BOS .<\|im_start\|>."):
        document_separator(tok)


@pytest.mark.parametrize("which", ["tiny", "chat"])
def test_folder_documents_start_with_the_separator_only(which, small_tokenizer, chat_tokenizer, tmp_path):
    tok = small_tokenizer if which == "tiny" else chat_tokenizer
    for i, text in enumerate(["the key is in the drawer", "the drawer is in the key the key"]):
        (tmp_path / f"doc{i}.txt").write_text(text)
    docs = source_documents(f"folder:{tmp_path}", None, tok, threshold=64)
    sep = document_separator(tok)
    assert [int(d[0]) for d in docs] == [sep, sep]
    assert [d[1:].tolist() for d in docs] == [tok(t, add_special_tokens=False).input_ids for t in
                                             ("the key is in the drawer", "the drawer is in the key the key")]
    assert not any(np.isin(d, [t for t in (tok.bos_token_id,) if t != sep]).any() for d in docs)
