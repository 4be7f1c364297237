import json

import pytest

from repro.data.corpus import iter_code, iter_folder, iter_prose, iter_source, manifest, stdlib_dir


def test_code_documents_are_whole_packages():
    docs = {d.name: d for d in iter_code()}
    assert "json" in docs and "email" in docs
    files = sorted(p.relative_to(stdlib_dir()).as_posix() for p in (stdlib_dir() / "json").glob("*.py"))
    headers = [ln[len("# file: "):] for ln in docs["json"].text.splitlines() if ln.startswith("# file: ")]
    assert headers == files  # every file of the package, sorted, in one document
    assert not any(n in ("test", "idlelib") for n in docs)


def test_prose_comes_from_python_docs():
    docs = list(iter_prose(max_bytes=50_000))
    assert docs and all(d.source == "prose" for d in docs)
    assert any("topic:" in d.name for d in docs)


def test_folder_source_txt_and_jsonl(tmp_path):
    (tmp_path / "a.txt").write_text("alpha text")
    (tmp_path / "b.jsonl").write_text(json.dumps({"text": "beta"}) + "\n" + json.dumps({"text": "gamma"}) + "\n")
    docs = list(iter_source(f"folder:{tmp_path}"))
    assert [d.text for d in docs] == ["alpha text", "beta", "gamma"]


def test_missing_and_unknown_sources(tmp_path):
    with pytest.raises(FileNotFoundError, match="does not exist"):
        list(iter_folder(tmp_path / "missing"))
    with pytest.raises(ValueError, match="allowed: code, prose"):
        iter_source("web")
    with pytest.raises(FileNotFoundError):
        list(iter_source(f"hf_disk:{tmp_path / 'missing'}"))


def test_manifest_totals_and_hashes():
    from repro.data.corpus import Document

    docs = [Document("abc", "code", "x"), Document("de", "prose", "y"), Document("f", "prose", "z")]
    m = manifest(docs, [3, 2, 1])
    assert m["total"] == {"documents": 3, "bytes": 6, "tokens": 6}
    assert m["sources"]["prose"]["documents"] == 2 and m["sources"]["prose"]["longest_tokens"] == 2
    assert m["sources"]["code"]["sha256"] != manifest([Document("abd", "code", "x")])["sources"]["code"]["sha256"]


def test_heldout_code_is_left_out_of_the_corpus():
    from repro.data.corpus import iter_heldout_code

    held = iter_heldout_code(3, seed=1)
    if not held:
        pytest.skip("this Python ships without its test suite")
    assert held == iter_heldout_code(3, seed=1) and all(d.name.startswith("test_") for d in held)
    code = "\n".join(d.text for d in iter_code())
    assert "# file: test/" not in code
    for d in held:
        assert f"# file: test/{d.name}" not in code and d.text[:2000] not in code
