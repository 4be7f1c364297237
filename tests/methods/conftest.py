"""Shared fixtures of the method tests."""

import numpy as np
import pytest

from repro.data.corpus import iter_code
from repro.data.synthetic import CorpusRows


@pytest.fixture(scope="module")
def corpus_rows(small_tokenizer):
    docs = list(iter_code(max_bytes=60_000))
    ids = [small_tokenizer(d.text).input_ids for d in docs]
    toks = np.concatenate([np.asarray(i, dtype=np.int64) for i in ids])
    return CorpusRows(toks, np.concatenate([[0], np.cumsum([len(i) for i in ids])]))
