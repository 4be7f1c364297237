import gc
import os

# under pytest-xdist (the README's ``-n 2``) each of the two workers, and every process it starts, takes one thread
# (set before torch is imported, so that the processes inherit it): two workers then ask for no more threads than a
# 2-core machine has (the suite on two workers of one thread: 10 min 40 s; one process of two threads: 17 min 11 s)
WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if WORKER:
    os.environ.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")

import pytest  # noqa: E402
import torch  # noqa: E402

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
torch.set_num_threads(1 if WORKER else max(1, min(2, os.cpu_count() or 1)))

LONGEST_FIRST = (
    "tests/test_pipeline.py", "tests/test_real_model.py", "tests/test_distributed.py", "tests/parallel/test_rows.py",
    "tests/cli/test_dry_run.py", "tests/cli/test_evaluate_harness.py", "tests/bench/test_kill.py",
    "tests/cli/test_train_processes.py", "tests/cli/test_train_sequence_parallel.py", "tests/test_bad_inputs.py",
    "tests/cli/test_train.py", "tests/tasks/test_layout.py", "tests/methods/test_registry.py",
)
"""The test files that take longest (each over 20 s of a 2-core machine), longest first. xdist's ``--dist loadfile``
hands out files in collection order, a file at a time per free worker, so these go first and the two workers end
together instead of one starting the longest file last."""


def pytest_collection_modifyitems(session, config, items):
    rank = {f: i for i, f in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda it: rank.get(it.nodeid.split("::")[0], len(rank)))  # stable: the rest keep their order


_FROZEN_AT: list[str] = []
"""The test file whose first test last froze the heap."""


def pytest_runtest_logstart(nodeid, location):
    """At the first test of each file (the previous file's fixtures torn down, this one's not yet made): collect
    the garbage, then move every object still alive (imported modules, session fixtures: about 600,000 objects after
    collection) out of the cyclic collector's reach. Code under test that calls ``gc.collect()`` often (the GPU
    benchmarks' ``free_memory``; :func:`repro.timing.interleaved_rounds` freezes and hands back the heap itself) would
    otherwise scan all of it each time (0.1-0.5 s a call); what the tests make is collected as before."""
    if _FROZEN_AT[-1:] != [location[0]]:
        _FROZEN_AT[:] = [location[0]]
        gc.collect()
        gc.freeze()


@pytest.fixture(scope="session")
def small_tokenizer():
    """A byte-level BPE trained on a slice of Python's bundled documentation plus needle text."""
    from pydoc_data.topics import topics

    from repro.data.corpus import iter_synthetic
    from repro.data.tokenizer import train_tokenizer

    texts = [t for _, t in sorted(topics.items())][:120] + [d.text for d in iter_synthetic(100)]
    return train_tokenizer(texts, 1024)


@pytest.fixture
def tiny_llama():
    """A 2-layer random Llama small enough for exact comparisons."""
    from transformers import LlamaConfig, LlamaForCausalLM

    def make(impl: str = "sdpa", vocab: int = 64, seed: int = 0):
        torch.manual_seed(seed)
        cfg = LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                          num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=4096,
                          attn_implementation=impl, use_cache=False)
        return LlamaForCausalLM(cfg).eval()

    return make

# -- a tiny random Llama saved with its tokenizer, and a folder of long text documents (the CLI and recipe tests)
def save_tiny_model(path, tok, layers: int = 1, heads: int = 2):
    """A random Llama, hidden 32 (``layers`` layers, ``heads`` heads, 2 kv heads; the vocabulary of ``tok``), saved
    with ``tok`` into ``path``; returns ``path``."""
    from repro.models import build_tiny
    from repro.profiles import ModelConfig

    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=layers, num_heads=heads, num_kv_heads=2)
    build_tiny(cfg, len(tok), 2048, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, small_tokenizer):
    """A 1-layer random Llama (vocabulary of the session tokenizer) saved with that tokenizer."""
    return save_tiny_model(tmp_path_factory.mktemp("cli") / "tiny", small_tokenizer)


@pytest.fixture(scope="session")
def text_folder(tmp_path_factory):
    """Twelve documents of Python's documentation, some longer than 512 tokens and some short."""
    from pydoc_data.topics import topics

    path = tmp_path_factory.mktemp("cli") / "texts"
    path.mkdir()
    texts = [t for _, t in sorted(topics.items(), key=lambda kv: -len(kv[1]))]
    for i, t in enumerate(texts[:8] + texts[-4:]):
        (path / f"doc{i}.txt").write_text(t)
    return path
