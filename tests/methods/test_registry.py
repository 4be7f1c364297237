"""The method registry and the arm-name parser (the import graph's cycles and layers: tests/test_architecture.py)."""

import ast
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from repro.accumulation import WEIGHTINGS
from repro.data.mixing import Mixture
from repro.data.streams import TokenStream
from repro.methods.cdt import CDTSpec, ContextDenoising
from repro.methods import (EXTENSION_METHODS, METHODS, ArmName, Extension, ExtensionSpec, get_method, parse_arm,
                           register_method)
from repro.methods.prolong import ProLongMix
from repro.methods.protocol import OPTIONAL_HOOKS
from repro.methods.selfdistill import SelfDistillation, SelfDistillSpec
from repro.profiles import PROFILES

REPO = Path(__file__).resolve().parents[2]


def test_unknown_method_lists_registry():
    with pytest.raises(ValueError, match="allowed: .*base_curriculum"):
        get_method("yarn-magic")


def test_registering_a_second_factory_under_a_taken_name_is_refused():
    with pytest.raises(ValueError, match="method 'extension' is registered twice"):
        register_method("extension")(lambda **kw: None)
    assert METHODS["extension"] is Extension


def test_registry_is_filled_from_repro_methods_alone_in_a_fresh_interpreter():
    code = ("import sys, repro.methods as m; "
            "print(','.join(sorted(m.METHODS))); "
            "print(int(any(k == 'repro.stages' or k.startswith('repro.stages.') for k in sys.modules)))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, check=True)
    names, stages_loaded = out.stdout.split()
    assert names == "base_curriculum,extension,replay"
    assert stages_loaded == "0"  # methods know nothing of the pipeline


def test_methods_import_neither_the_trainer_nor_the_analyses():
    """The methods sit below ``repro.train`` and ``repro.analysis``: no import of either, at module level or inside a
    function, but for the settings dataclass ``repro.train.config.TrainConfig`` the arm builders return (it imports
    nothing of the trainer)."""
    bad = []
    for path in sorted((REPO / "repro" / "methods").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module] + ([f"{node.module}.{a.name}" for a in node.names] if node.module == "repro"
                                         else [])
            bad += [f"{path.relative_to(REPO)}:{node.lineno} {n}" for n in names
                    if n.split(".")[:2] in (["repro", "train"], ["repro", "analysis"]) and n != "repro.train.config"]
    assert not bad, bad


@pytest.mark.parametrize("profile", sorted(PROFILES))
def test_every_arm_of_every_profile_resolves_and_yields_a_batch(profile, small_tokenizer, corpus_rows):
    from repro.data.streams import TokenStream
    from repro.methods.arms import cd_arm, pl_arm, rp_arm, split_seed
    from repro.arms import extension_arms, replicate_profile
    from repro.methods.extension import extension_method
    from repro.methods.prolong import arm_length, prolong_method
    from repro.methods.selfdistill import selfdistill_method

    p = PROFILES[profile]
    arms = extension_arms(p)
    if p.real.enabled:  # smol: the pretrained model as it is, nothing trained
        assert arms == ()
        return
    assert arms[0] == "flt" and len(arms) == len(set(arms))
    if p.extend.target_window > 4096:  # the paper profile's 80K rows are too long for a unit test: 1024
        p = replace(p, extend=replace(p.extend, target_window=1024))
    p = replace(p, extend=replace(p.extend, batch_size=min(2, p.extend.batch_size)))  # two rows show the shapes
    for name in arms:
        arm, k = split_seed(name)  # training-seed replicates build their arm's rows at a moved seed
        assert parse_arm(name) == ArmName(arm, "extend", parse_arm(arm).ratio, k)
        if rp_arm(name) is not None:  # self-distillation: full-length rows plus a perturbed view per row
            m = selfdistill_method(*replicate_profile(p, name), small_tokenizer, corpus_rows)
            b = m.batch(0)
            T = p.extend.target_window
            assert b["input_ids"].shape == b["perturbed_position_ids"].shape == (p.extend.batch_size, T)
            assert b["position_ids"].max() < T
            assert b["perturbed_position_ids"].max() <= rp_arm(name).spec.max_index(T)
            continue
        if cd_arm(name) is not None:  # CDT: rp_standard's rows (FLT's at the replicate's seed), its own objective
            from repro.methods.cdt import cdt_method

            m = cdt_method(*replicate_profile(p, name), small_tokenizer, corpus_rows)
            ref = selfdistill_method(*replicate_profile(p, name.replace("cdt", "rp_standard")), small_tokenizer,
                                     corpus_rows)
            assert np.array_equal(m.batch(0)["input_ids"], ref.batch(0)["input_ids"])
            continue
        if pl_arm(name) is not None:  # ProLong: rows from its streams (here the corpus rows as every stream)
            docs = np.split(corpus_rows.tokens, corpus_rows.offsets[1:-1])
            streams = [TokenStream(s, docs, seed=i) for i, (s, _) in enumerate(p.prolong.sources)]
            m = prolong_method(*replicate_profile(p, name), small_tokenizer, streams)
            b = m.batch(0)
            L, rows = arm_length(p, name)
            assert b["input_ids"].shape == (rows, L) and L * rows == p.extend.target_window * p.extend.batch_size
            continue
        anchors = np.arange(10, 60)  # any anchor ids: the rows must build, whatever the analysis finds
        m = extension_method(*replicate_profile(p, name), small_tokenizer, corpus_rows, anchors)
        b = m.batch(0)
        assert b["input_ids"].shape == (p.extend.batch_size, m.sample_len)
        assert b["position_ids"].max() < p.extend.target_window
    for arm in p.longrecipe.replay_methods:
        for stage in ("replay", "merge"):
            assert parse_arm(f"{arm}+{stage}") == ArmName(arm, stage, parse_arm(arm).ratio)


def test_every_registered_method_declares_the_protocol(small_tokenizer, corpus_rows):
    from repro.profiles import get_profile

    p = get_profile("smoke")
    built = {
        "base_curriculum": get_method("base_curriculum", cfg=p.base, tokenizer=small_tokenizer, corpus=corpus_rows,
                                      vocab_size=len(small_tokenizer)),
        "replay": get_method("replay", cfg=p.base, tokenizer=small_tokenizer, corpus=corpus_rows,
                             vocab_size=len(small_tokenizer)),
        "extension": get_method("extension", name="flt", spec=EXTENSION_METHODS["flt"], target=256, batch_size=2,
                                retrieval_fraction=0.5, tokenizer=small_tokenizer, corpus=corpus_rows, seed=0),
    }
    assert set(built) == set(METHODS)  # the methods looked up by name; the objectives are built from their classes
    built["selfdistill"] = SelfDistillation(name="rp_skip", spec=SelfDistillSpec(), inner=built["extension"], seed=0,
                                            pad_id=small_tokenizer.pad_token_id)
    built["cdt"] = ContextDenoising(name="cdt", spec=CDTSpec(), inner=built["extension"],
                                    pad_id=small_tokenizer.pad_token_id)
    docs = np.split(corpus_rows.tokens, corpus_rows.offsets[1:-1])
    built["prolong_mix"] = ProLongMix(name="prolong", mixture=Mixture([TokenStream("code", docs)], {"code": 1.0}),
                                      length=256, batch_size=2, pad_id=small_tokenizer.pad_token_id)
    for name, m in built.items():
        for member in ("name", "batch", "observe", "finished", "state_dict", "load_state_dict"):
            assert hasattr(m, member), (name, member)
        for hook in OPTIONAL_HOOKS:
            if hook == "micro_batch_weighting":
                assert getattr(m, hook, "tokens") in WEIGHTINGS, name
            else:
                assert not hasattr(m, hook) or callable(getattr(m, hook)), (name, hook)


def test_replay_starts_at_the_curriculum_last_stage(small_tokenizer, corpus_rows):
    from repro.profiles import get_profile

    b = get_profile("tiny").base
    r = get_method("replay", cfg=b, tokenizer=small_tokenizer, corpus=corpus_rows, vocab_size=len(small_tokenizer))
    full = get_method("base_curriculum", cfg=b, tokenizer=small_tokenizer, corpus=corpus_rows,
                      vocab_size=len(small_tokenizer))
    # what the replay stage used to write into the curriculum's state by hand
    expected = {**full.state_dict(), "phase": "retrieval", "level": len(b.retrieval_lengths) - 1, "final_left": -1}
    assert r.state_dict() == expected and list(r.state_dict()) == list(expected)
    assert r.name == "replay" and full.name == "base_curriculum"
    assert r.length() == b.window
    full.load_state_dict(expected)
    for step in (0, 5):
        x, y = r.batch(step), full.batch(step)
        assert all(np.array_equal(x[k], y[k]) for k in x)


@pytest.mark.parametrize("name, err", [
    ("flt+replays", "unknown arm 'flt\\+replays'"), ("base+merge", "unknown arm 'base\\+merge'"),
    ("longrecipe_r0", "unknown arm 'longrecipe_r0'"), ("longrecipe_r101+merge", "unknown arm"),
    ("FLT", "unknown arm 'FLT'; allowed: base, flt, pose"), ("base@seed1", "unknown arm 'base@seed1'"),
    ("flt@seed0", "bad training-seed suffix '@seed0'; allowed: @seed<k> with k >= 1"),
    ("flt@s1", "bad training-seed suffix '@s1'"), ("flt@seed1@seed2", "bad training-seed suffix"),
    ("@seed1", "bad training-seed suffix"), ("flt@seed1+merge", "bad training-seed suffix"),
])
def test_arm_parser_refuses_with_the_allowed_forms(name, err):
    with pytest.raises(ValueError, match=err):
        parse_arm(name)


def test_arm_parser_round_trips():
    for name in ("base", "flt", "longrecipe_r20", "pose+replay", "longrecipe_r40+merge", "flt@seed2",
                 "longrecipe_r20+merge@seed11"):
        assert parse_arm(name).name == name
    assert parse_arm("longrecipe_r20+merge") == ArmName("longrecipe_r20", "merge", 20)
    assert parse_arm("pose+replay@seed3") == ArmName("pose", "replay", None, 3)


def test_split_seed_reads_only_the_suffix():
    from repro.methods.arms import split_seed

    assert split_seed("flt") == ("flt", 0) and split_seed("flt@seed2") == ("flt", 2)
    assert split_seed("rp_skip@seed1") == ("rp_skip", 1)  # the reports' own checkpoint names pass through


@pytest.mark.parametrize("profile", ["smoke", "tiny", "paper"])
def test_extension_family_is_exactly_the_arms_with_an_extension_spec(profile):
    """The LR-Cost notebook cell times the extension family alone: an RP or CDT arm there has no spec."""
    from repro.methods import ExtensionSpec, extension_spec
    from repro.methods.arms import extension_family, split_seed
    from repro.arms import extension_arms

    names = {n for paper in ("longrecipe", "selfdistill", "cdt", "all") for n in extension_arms(profile, paper)}
    assert {"flt", "cdt", "rp_standard"} <= names
    for name in names | {"pose+replay", "longrecipe_r20+merge@seed1", "rp_skip@seed2", "cdt@seed1"}:
        arm = split_seed(name.split("+")[0])[0]
        if extension_family(name):
            assert isinstance(extension_spec(arm), ExtensionSpec), name
        else:
            with pytest.raises(ValueError, match="unknown extension method"):
                extension_spec(arm)


def test_a_typo_in_transform_params_names_the_allowed_ones(small_tokenizer, corpus_rows):
    spec = ExtensionSpec("pose", 100, params={"chunk": 2})
    with pytest.raises(ValueError, match=r"transform 'pose' got unknown parameter\(s\) \['chunk'\]; allowed: "):
        Extension("pose_typo", spec, 512, 2, 0.5, small_tokenizer, corpus_rows, 0)
