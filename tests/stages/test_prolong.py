"""ProLong's stages on the smoke profile: the streams' PL-Tab3 counts, the arms' mixtures, RoPE bases and lengths."""

import json

import numpy as np
import pytest

from repro.models import load_model
from repro.profiles import get_profile
from repro.stages.extension import train_extension
from repro.methods.prolong import arm_proportions, arm_rope_theta, ntk_theta
from repro.stages.prolong import build_streams


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    return tmp_path_factory.mktemp("pl")


def test_ntk_value_and_arm_rope_bases():
    p = get_profile("tiny")  # theta 1e4, 256 -> 1024 (t = 4), head dim 32
    assert ntk_theta(p) == pytest.approx(1e4 * 4 ** (32 / 30))
    assert arm_rope_theta(p, "pl_rope_orig") == 1e4
    assert arm_rope_theta(p, "pl_rope_ntk") == pytest.approx(ntk_theta(p))
    assert arm_rope_theta(p, "prolong") == pytest.approx(2 * ntk_theta(p))  # the recipe: 2x NTK
    assert arm_rope_theta(p, "pl_rope_ntk4@seed1") == pytest.approx(4 * ntk_theta(p))


def test_arm_proportions_keep_the_task_share_and_the_long_ratio():
    p = get_profile("tiny")
    assert arm_proportions(p, "prolong") == pytest.approx({"code": 0.15, "books": 0.15, "short": 0.2, "tasks": 0.5})
    assert arm_proportions(p, "pl_long100") == pytest.approx({"code": 0.25, "books": 0.25, "short": 0.0,
                                                              "tasks": 0.5})
    assert arm_proportions(p, "pl_long20") == pytest.approx({"code": 0.05, "books": 0.05, "short": 0.4, "tasks": 0.5})
    with pytest.raises(ValueError, match="not a ProLong arm"):
        arm_proportions(p, "flt")


def test_streams_split_by_threshold_and_count_long_tokens(run_dir):
    p = get_profile("smoke")
    m = json.loads((build_streams(p, run_dir) / "manifest.json").read_text())
    assert m["threshold"] == p.extend.target_window
    code, short = m["sources"]["code"], m["sources"]["short"]
    assert code["kind"] == "long" and code["kept_tokens"] == code["long_tokens"] > 0
    assert short["kind"] == "short" and short["long_tokens"] == 0 and short["kept_tokens"] == short["tokens"]


def test_arms_train_with_their_rope_length_and_masks(run_dir):
    p = get_profile("smoke")
    rec = train_extension(p, "prolong", run_dir, progress=False)
    assert load_model(rec).config.rope_parameters["rope_theta"] == pytest.approx(arm_rope_theta(p, "prolong"))
    rows = [json.loads(x) for x in (rec.parent / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == p.extend.steps
    assert rows[-1]["method_rows"] == p.extend.steps * p.extend.batch_size
    train_extension(p, "pl_nomask", run_dir, progress=False)
    train_extension(p, "pl_train2x", run_dir, progress=False)
    data = {d.name.split("-")[1]: d for d in (run_dir / "smoke").glob("data-*")}
    a, b = (np.load(data[n] / "input_ids.npy") for n in ("prolong", "pl_nomask"))
    assert np.array_equal(a, b)  # the same rows, only the mask differs
    da, db = (np.load(data[n] / "doc_ids.npy") for n in ("prolong", "pl_nomask"))
    assert (np.diff(db, axis=-1) != 0).sum() <= (np.diff(da, axis=-1) != 0).sum()
    # with only short documents drawn, the masked rows restart at every document, the unmasked ones never
    from repro.data.tokenizer import load_tokenizer
    from repro.stages.corpus import build_corpus
    from repro.methods.prolong import prolong_method

    short = p.override(prolong={"mix": (("code", 0.0), ("books", 0.0), ("short", 1.0)), "task_share": 0.0})
    tok = load_tokenizer(build_corpus(p, run_dir).path / "tokenizer")
    x, y = (prolong_method(short, n, tok, build_streams(p, run_dir)).batch(0) for n in ("prolong", "pl_nomask"))
    assert (x["position_ids"][:, 1:] == 0).sum() >= 1
    assert (y["position_ids"][:, 1:] == 0).sum() == 0
    long = np.load(data["pl_train2x"] / "input_ids.npy")
    T = p.extend.target_window
    assert long.shape[1:] == (p.extend.batch_size // 2, 2 * T) and a.shape[1:] == (p.extend.batch_size, T)
