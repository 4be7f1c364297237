"""ProLong's rows: document masks or not over the same tokens and targets, per-stream counts, purity in the step."""

import numpy as np

from repro.data.mixing import Mixture
from repro.data.streams import TaskStream, TokenStream
from repro.data.synthetic import RetrievalRows
from repro.methods.prolong import ProLongMix


def _method(tok, masks=True, seed=0, props=None):
    rng = np.random.default_rng(0)
    long_docs = [np.r_[tok.bos_token_id, rng.integers(10, 500, size=400)] for _ in range(5)]
    short_docs = [np.r_[tok.bos_token_id, rng.integers(10, 500, size=int(rng.integers(5, 60)))] for _ in range(40)]
    streams = [TokenStream("long", long_docs, seed=seed), TokenStream("short", short_docs, seed=seed),
               TaskStream("tasks", RetrievalRows(tok, ("niah_single_1",)), seed=seed)]
    mix = Mixture(streams, props or {"long": 0.3, "short": 0.4, "tasks": 0.3}, seed=seed)
    return ProLongMix(name="pl", mixture=mix, length=256, batch_size=6, pad_id=tok.pad_token_id, doc_masks=masks)


def test_masked_and_unmasked_rows_hold_the_same_tokens_and_targets(small_tokenizer):
    a, b = _method(small_tokenizer, True), _method(small_tokenizer, False)
    for step in range(5):
        x, y = a.batch(step), b.batch(step)
        assert np.array_equal(x["input_ids"], y["input_ids"]) and np.array_equal(x["weights"], y["weights"])
        pad = x["input_ids"] == small_tokenizer.pad_token_id
        # without masks every row is one document over its tokens (positions 0..n-1); with masks positions
        # restart at each document the short stream packs
        assert all(len(set(r[~p])) == 1 for r, p in zip(y["doc_ids"], pad))
        assert max(len(set(r[~p])) for r, p in zip(x["doc_ids"], pad)) > 1
        assert np.array_equal(y["position_ids"][~pad], np.broadcast_to(np.arange(256), pad.shape)[~pad])
    assert a.state_dict() == b.state_dict()


def test_state_counts_rows_and_tokens_per_stream(small_tokenizer):
    m = _method(small_tokenizer)
    for s in range(10):
        m.batch(s)
    st = m.state_dict()
    assert st["rows"] == 60 == sum(v for k, v in st.items() if k.startswith("rows_"))
    assert st["tokens"] == sum(v for k, v in st.items() if k.startswith("tokens_"))
    assert st["tokens_long"] == 256 * st["rows_long"]  # long and short rows are full; task rows may pad


def test_a_step_is_the_same_whatever_came_before(small_tokenizer):
    a, b = _method(small_tokenizer), _method(small_tokenizer)
    ref = {s: a.batch(s)["input_ids"] for s in range(8)}
    for s in (7, 2, 5):
        assert np.array_equal(b.batch(s)["input_ids"], ref[s])
