"""Tests for repro.stages.attention: the config per profile, the record of a model folder (cached), and names that
are not trained yet."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from repro.analysis.attention_distance import distance_edges, distance_histogram, query_attention
from repro.io import read_json
from repro.profiles import get_profile
from repro.stages.attention import AttentionDistanceConfig, checkpoint_distances, model_distances


@pytest.mark.parametrize("name, queries, samples", [("smoke", 24, 3), ("tiny", 64, 8), ("paper", 256, 8)])
def test_config_for_profile(name, queries, samples):
    cfg = AttentionDistanceConfig.for_profile(get_profile(name))
    assert (cfg.queries, cfg.samples, cfg.threshold, cfg.bins, cfg.far) == (queries, samples, 1e-3, 32, 0.5)


def test_config_overrides_and_bad_values():
    p = get_profile("tiny")
    cfg = AttentionDistanceConfig.for_profile(p, queries=16, samples=0, threshold=None, bins=8)
    assert (cfg.queries, cfg.samples, cfg.threshold, cfg.bins) == (16, 8, 1e-3, 8)  # 0 / None keep the default
    assert [cfg.verdict_layer(n) for n in (32, 3, 1)] == [24, 2, 0]
    with pytest.raises(ValueError, match=r"queries=2048; allowed: 1 <= queries <= 1024 \(the target window\)"):
        AttentionDistanceConfig.for_profile(p, queries=2048)
    with pytest.raises(ValueError, match=r"threshold=1.5; allowed: 0 < threshold < 1"):
        AttentionDistanceConfig.for_profile(p, threshold=1.5)
    with pytest.raises(ValueError, match=r"far=1.0; allowed: 0 < far < 1"):
        AttentionDistanceConfig(far=1.0).check(100)


@pytest.fixture
def model_folder(tmp_path, tiny_llama, small_tokenizer):
    model = tiny_llama(vocab=len(small_tokenizer), seed=5)
    model.save_pretrained(tmp_path / "mine")
    small_tokenizer.save_pretrained(tmp_path / "mine")
    return tmp_path / "mine", model


def _texts(tokenizer, n: int, length: int) -> list[str]:
    from pydoc_data.topics import topics

    return [t for _, t in sorted(topics.items()) if len(tokenizer(t).input_ids) >= length][:n]


def test_model_distances_of_a_folder_is_cached_and_matches_the_rows(model_folder, small_tokenizer, tmp_path):
    folder, model = model_folder
    length, cfg = 48, AttentionDistanceConfig(queries=8, samples=2, bins=6)
    texts = _texts(small_tokenizer, 3, length)
    cache = tmp_path / "cache" / "attn.json"
    rec = model_distances(folder, texts, length, cfg, cache_file=cache, progress=False, label="mine")
    on_disk = read_json(cache)  # the record plus its checksum and the environment it was computed in
    assert {k: v for k, v in on_disk.items() if k not in ("_sha256", "environment")} == rec
    assert set(on_disk) - set(rec) == {"_sha256", "environment"}
    assert (rec["model"], rec["length"], rec["queries"], rec["samples"], rec["verdict_layer"]) == ("mine", 48, 8, 2, 1)
    assert [x["layer"] for x in rec["layers"]] == [0, 1]
    # the same numbers straight from the analysis functions, summed over the two texts
    edges = distance_edges(length, 6)
    for lay in rec["layers"]:
        hists = []
        for text in texts[:2]:
            ids = torch.as_tensor(small_tokenizer(text).input_ids[:length])[None]
            rows = query_attention(model.eval(), ids, 8)[lay["layer"]]
            hists.append(distance_histogram(rows, edges))
        total = hists[0] + hists[1]
        assert lay["counts"] == total.counts.tolist() and lay["entries"] == total.entries
        assert sum(lay["counts"]) == lay["entries"] and lay["rows"] == 2 * 4 * 8
        assert lay["far_share"] == pytest.approx(total.summary()["far_share"])
        assert lay["per_sample"]["far_share"] == pytest.approx([h.summary()["far_share"] for h in hists])
        assert 0 < lay["entries_per_row"] <= length
    for f in folder.iterdir():  # cached: the model is not needed any more ...
        f.unlink()
    assert model_distances(folder, texts, length, cfg, cache_file=cache, progress=False) == rec
    with pytest.raises(FileNotFoundError):  # ... unless recomputed
        model_distances(folder, texts, length, cfg, cache_file=cache, force=True, progress=False)


def test_model_distances_bad_inputs(model_folder, small_tokenizer):
    folder, _ = model_folder
    cfg = AttentionDistanceConfig(queries=8, samples=2, bins=6)
    with pytest.raises(ValueError, match="1 texts; allowed: at least samples=2"):
        model_distances(folder, ["x"], 48, cfg)
    with pytest.raises(ValueError, match=r"text 0 has \d+ tokens; allowed: at least length=48"):
        model_distances(folder, ["short", "texts"], 48, cfg, progress=False)


def test_names_not_trained_are_listed_not_computed(tmp_path):
    res = checkpoint_distances("smoke", ("flt", "rp_skip"), tmp_path, progress=False)
    assert res["records"] == {}
    assert set(res["missing"]) == {"flt", "rp_skip"}
    assert all(why.startswith("not trained") for why in res["missing"].values())
    assert not any(tmp_path.iterdir())  # nothing built for nothing
    res = checkpoint_distances("smoke", (), tmp_path, paths={"mine": tmp_path / "absent"}, progress=False)
    assert res["missing"] == {"mine": f"no model folder at {tmp_path / 'absent'}"}
    with pytest.raises(ValueError, match="model label 'my model'; allowed: a new name matching"):
        checkpoint_distances("smoke", (), tmp_path, paths={"my model": tmp_path})
    with pytest.raises(ValueError, match=r"samples=5; allowed: <= longrecipe.analysis_texts=3"):
        checkpoint_distances("smoke", (), tmp_path, AttentionDistanceConfig(queries=8, samples=5))


def test_record_is_json_plain(model_folder, small_tokenizer):
    folder, _ = model_folder
    rec = model_distances(folder, _texts(small_tokenizer, 1, 32), 32, AttentionDistanceConfig(queries=4, samples=1,
                                                                                             bins=4), progress=False)
    counts = np.asarray(rec["layers"][0]["counts"])
    assert counts.dtype.kind == "i" and counts.shape == (4,) and rec["edges"] == [0.0, 8.0, 16.0, 24.0, 32.0]
