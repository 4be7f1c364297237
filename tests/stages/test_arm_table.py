"""One table of arms: the command line (``python -m repro train``) and the cached stages build every arm of the
smoke profile through it and get the same spec (method class and settings, model settings, TrainConfig, cache
fields); the cache keys read the spec's cache fields."""

import numpy as np
import pytest
import torch

from repro import arms
from repro.cli import train as cli_train
from repro.data.streams import TokenStream
from repro.data.synthetic import CorpusRows
from repro.methods.armspec import ArmData, Upstream
from repro.profiles import get_profile
from repro.stages import arms as stage_arms
from repro.stages.keys import arm_fields, extension_key

SMOKE_ARMS = arms.extension_arms("smoke", "all")


def _data(p, spec, tok) -> ArmData:
    rng = np.random.default_rng(0)
    docs = [rng.integers(3, len(tok), 400).astype(np.int64) for _ in range(6)]
    if spec.data == "streams":
        return ArmData(streams=[TokenStream(n, docs if n in p.prolong.long_streams else [d[:40] for d in docs], seed=0)
                                for n, _ in p.prolong.sources])
    rows = CorpusRows(np.concatenate(docs), np.concatenate([[0], np.cumsum([len(d) for d in docs])]).astype(np.int64))
    return ArmData(corpus_rows=rows, anchors=np.arange(3, 40) if spec.needs_anchors else None)


def _settings(obj) -> dict:
    """A method's settings, recursively (inner methods, specs); data and tokenizers by class alone."""
    out = {"class": type(obj).__name__}
    for k, v in sorted(vars(obj).items()):
        if isinstance(v, (int, float, str, bool, type(None), tuple)) or hasattr(v, "__dataclass_fields__"):
            out[k] = v
        elif isinstance(v, np.ndarray | torch.Tensor):
            out[k] = np.asarray(v).tolist()
        elif hasattr(v, "batch") and hasattr(v, "state_dict"):
            out[k] = _settings(v)
        else:
            out[k] = type(v).__name__
    return out


def test_the_smoke_profile_has_arms_of_every_paper():
    assert {"flt", "rp_skip", "cdt", "prolong"} <= set(SMOKE_ARMS) and any("@seed" in a for a in SMOKE_ARMS)


@pytest.mark.parametrize("name", SMOKE_ARMS)
def test_command_line_and_stages_build_the_same_spec(name, small_tokenizer):
    p = get_profile("smoke")
    data = _data(p, arms.build_arm(p, name), small_tokenizer)
    cli = cli_train.arm_spec(p, name, small_tokenizer, data)
    stage = stage_arms.arm_spec(p, name, small_tokenizer, data)
    assert type(cli.method) is type(stage.method) and _settings(cli.method) == _settings(stage.method)
    assert cli.model == stage.model and cli.train == stage.train and cli.cache_fields == stage.cache_fields
    assert (cli.steps, cli.curve_every, cli.final_config, cli.data, cli.needs_anchors) == \
        (stage.steps, stage.curve_every, stage.final_config, stage.data, stage.needs_anchors)
    b0, b1 = cli.method.batch(0), stage.method.batch(0)  # the same rows from the same data
    assert all(np.array_equal(b0[k], b1[k]) for k in b0) and b0.keys() == b1.keys()


def test_the_command_line_trains_any_arm_of_the_table_and_names_the_allowed_ones():
    assert cli_train.arm_of("selfdistill") == "rp_skip" and cli_train.arm_of("rp_cyclic") == "rp_cyclic"
    assert cli_train.arm_of("longrecipe_r20") == "longrecipe_r20" and cli_train.arm_of("ce") == "rp_standard"
    with pytest.raises(cli_train.CLIError, match=r"unknown method 'nope'; allowed: flt, pose, .*rp_standard"):
        cli_train.arm_of("nope")


def test_keys_read_the_cache_fields_with_their_upstream_stages():
    p = get_profile("smoke")
    assert arms.build_arm(p, "longrecipe").cache_fields["anchors"] == Upstream("analysis")
    filled = arm_fields(p, "longrecipe")
    assert isinstance(filled["anchors"], str) and len(filled["anchors"]) == 12  # the analysis stage's key
    assert isinstance(arm_fields(p, "prolong")["pl"]["data"], str)
    # a field of the spec changes the key; a profile field no arm reads changes none
    assert extension_key(p, "cdt") != extension_key(p.override(cdt={"beta": p.cdt.beta + 1}), "cdt")
    assert extension_key(p, "flt") == extension_key(p.override(cdt={"beta": p.cdt.beta + 1}), "flt")
