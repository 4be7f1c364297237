"""A tiny random Llama saved with its tokenizer, and a folder of long text documents, for the CLI tests."""

import pytest


@pytest.fixture(scope="session")
def tiny_model_dir(tmp_path_factory, small_tokenizer):
    """A 1-layer random Llama (vocabulary of the session tokenizer) saved with that tokenizer."""
    from repro.models import build_tiny
    from repro.profiles import ModelConfig

    tok = small_tokenizer
    path = tmp_path_factory.mktemp("cli") / "tiny"
    cfg = ModelConfig(hidden_size=32, intermediate_size=64, num_layers=1, num_heads=2, num_kv_heads=2)
    build_tiny(cfg, len(tok), 2048, tok.bos_token_id, tok.eos_token_id, tok.pad_token_id, seed=0).save_pretrained(path)
    tok.save_pretrained(path)
    return path


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
