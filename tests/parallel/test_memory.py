"""The memory table of sequence parallelism: the formulas, the committed docs page, the check against ALST."""

import pytest

from repro.parallel.memory import ALST, ALST_CHECK, DOC, GIB, LLAMA3_8B, THIS_REPO, max_tokens, table, terms
from repro.pipeline import REPO


def test_llama3_8b_has_its_published_parameter_count():
    assert LLAMA3_8B.params == 8_030_261_248  # Meta-Llama-3-8B's config.json shapes, untied head


def test_terms_follow_their_formulas():
    t = terms(LLAMA3_8B, 65536, 1, THIS_REPO)
    assert t["checkpoints"] == (2 * 32 * 4096 * 65536, "2 L h T/N") and t["checkpoints"][0] == 16 * GIB
    assert t["optimizer"][0] == 0  # the repo's ZeRO-3 config offloads the optimizer
    half = terms(LLAMA3_8B, 65536, 2, THIS_REPO)
    for name in ("checkpoints", "layer", "gradients"):
        assert half[name][0] == pytest.approx(t[name][0] / 2)
    assert half["gathered hidden"] == t["gathered hidden"]  # the full rows on every rank, whatever N
    assert terms(LLAMA3_8B, 65536, 1, ALST)["gathered hidden"][0] == 0
    with pytest.raises(ValueError, match="tokens=4, n=8; allowed"):
        terms(LLAMA3_8B, 4, 8, THIS_REPO)


def test_the_formulas_reproduce_alsts_published_maxima_within_10_percent():
    for n, published in ALST_CHECK:
        assert 0.9 < max_tokens(LLAMA3_8B, n, ALST) / published < 1.1
    ours = [max_tokens(LLAMA3_8B, n, THIS_REPO) for n in (1, 2, 4, 8)]
    assert ours == sorted(ours) and ours[-1] > 4 * ours[0]


def test_the_docs_page_is_what_the_formulas_write():
    assert (REPO / DOC).read_text() == table(), "regenerate: python -m repro.parallel.memory --write " + str(DOC)
