import numpy as np
import pytest

from repro.data.corpus import Document
from repro.data.long_sources import code_blocks, long_tokens, source_documents, split_by_length
from repro.data.corpus import Corpus

CODE = ("# file: pkg/__init__.py\nimport os\n\ndef f(x):\n    return x\n\n\nclass A:\n    pass\n"
        "# file: pkg/util.py\n@decorator\ndef g():\n    '''doc'''\n    return 1\n")


def _corpus(tok):
    docs = [Document(CODE, "code", "pkg"), Document("Topic one. " * 30, "prose", "topic:one"),
            Document("Topic two. " * 20, "prose", "topic:two"),
            Document("Docs of a. " * 25, "prose", "docstrings:pkg/a.py"),
            Document("Docs of b. " * 25, "prose", "docstrings:pkg/sub/b.py"),
            Document("needle text", "synthetic", "needle-0")]
    ids = [np.asarray([tok.bos_token_id, *tok(d.text, add_special_tokens=False).input_ids]) for d in docs]
    offsets = np.concatenate([[0], np.cumsum([len(i) for i in ids])])
    return Corpus(None, docs, np.concatenate(ids), offsets, [d.source for d in docs], {}), ids


def test_code_blocks_cut_files_at_top_level_definitions():
    blocks = code_blocks(CODE)
    assert [b.split("\n")[0] for b in blocks] == ["# file: pkg/__init__.py", "def f(x):", "class A:",
                                                   "# file: pkg/util.py", "@decorator"]
    assert "".join(blocks) == CODE


def test_builtin_sources_bind_books_and_cut_short_documents(small_tokenizer):
    tok = small_tokenizer
    corpus, ids = _corpus(tok)
    code = source_documents("corpus:code", corpus, tok, 10_000)
    assert len(code) == 1 and np.array_equal(code[0], ids[0])
    books = source_documents("corpus:books", corpus, tok, 10_000)
    # two volumes, sorted by name: pkg (docstrings of a and b, one BOS) and reference (both topics)
    assert len(books) == 2
    assert np.array_equal(books[0], np.r_[ids[3], ids[4][1:]])
    assert np.array_equal(books[1], np.r_[ids[1], ids[2][1:]])
    thr = 24
    short = source_documents("corpus:short", corpus, tok, thr)
    assert all(len(d) < thr and d[0] == tok.bos_token_id for d in short)
    n_prose_tokens = sum(len(i) - 1 for i in ids[1:5])
    assert sum(len(d) - 1 for d in short) == n_prose_tokens + sum(
        len(tok(b, add_special_tokens=False).input_ids) for b in code_blocks(CODE))  # nothing lost in the cuts


def test_split_and_counts_follow_the_threshold():
    docs = [np.arange(n) for n in (3, 10, 25, 40)]
    assert [len(d) for d in split_by_length(docs, 25, long=True)] == [25, 40]
    assert [len(d) for d in split_by_length(docs, 25, long=False)] == [3, 10]
    assert long_tokens(docs, 25) == {"documents": 4, "tokens": 78, "long_documents": 2, "long_tokens": 65,
                                     "longest": 40}
    with pytest.raises(ValueError, match="allowed: >= 2 tokens"):
        split_by_length(docs, 1, long=True)


def test_folder_source_and_unknown_specs(tmp_path, small_tokenizer):
    (tmp_path / "a.txt").write_text("A long book. " * 50)
    (tmp_path / "b.jsonl").write_text('{"text": "short one"}\n{"text": "short two"}\n')
    docs = source_documents(f"folder:{tmp_path}", None, small_tokenizer, 100)
    assert len(docs) == 3 and all(d[0] == small_tokenizer.bos_token_id for d in docs)
    with pytest.raises(ValueError, match="allowed: corpus:code, corpus:books, corpus:short"):
        source_documents("corpus:novels", None, small_tokenizer, 100)
    with pytest.raises(ValueError, match="unknown source 'web'"):
        source_documents("web", None, small_tokenizer, 100)
