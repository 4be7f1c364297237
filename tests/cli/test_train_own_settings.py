"""``python -m repro train`` on a model the project did not build keeps the model's own settings: the profile chosen
for it (``pretrained``: the papers' fine-tuning settings, the model's own window), ``--rope-theta paper`` (the
method's paper RoPE computed from this model), and a ``final/`` whose config and tokenizer files are the model's own
with only the method's declared changes. On tiny random Llamas (``tests/conftest.py``)."""

import json
import shutil

import pytest

from repro.__main__ import build_parser, main, parse
from repro.cli.train import model_rope, run_profile
from repro.cli.own_settings import chosen_profile
from repro.io import read_json
from repro.profiles import get_profile
from tests.conftest import save_tiny_model


def _args(model, data, out, method="flt", *extra, steps=1):
    return ["train", "--model", str(model), "--method", method, "--target", "128", "--data", f"folder:{data}",
            "--steps", str(steps), "--batch-size", "2", "--out", str(out), "--no-progress", *extra]


def _notes(err: str) -> list[str]:
    return [ln for ln in err.splitlines() if ln.startswith("note:")]


@pytest.fixture(scope="module")
def foreign(tmp_path_factory, small_tokenizer):
    """A 2-layer random Llama: no profile of the project builds that shape (smoke: 1 layer of 32, tiny: 3 of 128).
    Its config.json says ``use_cache: true`` as a pretrained checkpoint's does, and its RoPE base is 100,000."""
    path = save_tiny_model(tmp_path_factory.mktemp("foreign") / "m", small_tokenizer, layers=2)
    cfg = read_json(path / "config.json")
    cfg["use_cache"] = True
    cfg["rope_parameters"]["rope_theta"] = 100_000.0
    (path / "config.json").write_text(json.dumps(cfg, indent=2))
    return path


def test_a_model_the_project_did_not_build_gets_the_pretrained_profile(foreign, tiny_model_dir, text_folder,
                                                                        tmp_path):
    args = parse(build_parser(), _args(foreign, text_folder, tmp_path / "o"))
    name, why = chosen_profile(args)
    assert name == "pretrained" and why.startswith("--profile pretrained (not given): --model is not one of the")
    p = run_profile(args)
    assert (p.name, p.extend.lr, p.extend.retrieval_fraction, p.extend.context_weight) == ("pretrained", 1e-5, 0.0,
                                                                                         1.0)
    assert p.prolong.task_share == 0.0 and p.cdt.beta == 5.0
    assert p.extend.warmup_steps == 0  # 10% of --steps 1, rounded down: the first step at the peak lr
    long = run_profile(parse(build_parser(), [*_args(foreign, text_folder, tmp_path / "o"), "--steps", "50"]))
    assert long.extend.warmup_steps == 5
    asked = run_profile(parse(build_parser(), [*_args(foreign, text_folder, tmp_path / "o"), "--steps", "50",
                                               "extend.warmup_steps=2"]))
    assert asked.extend.warmup_steps == 2
    assert p.base.window == 128  # the model's own window (2048), at most the target
    wide = run_profile(parse(build_parser(), [*_args(foreign, text_folder, tmp_path / "o"), "--target", "4096"]))
    assert wide.base.window == 2048  # max_position_embeddings of its config.json
    # the conftest model has the smoke profile's model shape: the project's own, tiny as before
    own = parse(build_parser(), _args(tiny_model_dir, text_folder, tmp_path / "o"))
    assert chosen_profile(own)[0] == "tiny" and "shape of the smoke profile's own model" in chosen_profile(own)[1]
    tiny = run_profile(own)
    named = run_profile(parse(build_parser(), [*_args(tiny_model_dir, text_folder, tmp_path / "o"), "--profile",
                                               "tiny"]))
    assert tiny == named and tiny.extend.lr == get_profile("tiny").extend.lr == 1e-3
    assert chosen_profile(parse(build_parser(), [*_args(foreign, text_folder, tmp_path / "o"), "--profile",
                                                 "smoke"])) == ("smoke", None)


def test_the_default_profile_is_said_in_one_note_and_recorded(foreign, text_folder, tmp_path, capsys):
    out = tmp_path / "run"
    assert main(_args(foreign, text_folder, out, "flt")) == 0
    notes = _notes(capsys.readouterr().err)
    assert len(notes) == 1 and notes[0].startswith("note: --profile pretrained (not given)")
    assert "lr 1e-5, --data only" in notes[0]
    run = read_json(out / "run.json")
    assert run["profile"] == "pretrained" and run["train_config"]["lr"] == 1e-5
    assert model_rope(out / "final")["rope_theta"] == 100_000.0


def test_final_config_and_tokenizer_are_the_models_own(foreign, text_folder, tmp_path, capsys):
    """No ``use_cache: false`` (set for training by the loading) nor ``local_files_only`` / ``is_local`` (arguments
    of the tokenizer's loading) in what ``final/`` saves: its config.json differs from the model's only by the
    method's declared change, the RoPE base asked for."""
    out = tmp_path / "cdt"
    assert main(_args(foreign, text_folder, out, "cdt", "--rope-theta", "64000")) == 0
    own, saved = read_json(foreign / "config.json"), read_json(out / "final" / "config.json")
    changed = {k for k in own.keys() | saved.keys() if own.get(k) != saved.get(k)}
    assert changed == {"rope_parameters"} and saved["use_cache"] is True
    assert saved["rope_parameters"] == {"rope_type": "default", "rope_theta": 64_000.0}
    tok = read_json(out / "final" / "tokenizer_config.json")
    assert "local_files_only" not in tok and "is_local" not in tok
    assert tok == read_json(foreign / "tokenizer_config.json")


def test_a_model_without_use_cache_in_its_config_saves_none(foreign, text_folder, tmp_path):
    model = tmp_path / "m"
    shutil.copytree(foreign, model)
    cfg = read_json(model / "config.json")
    del cfg["use_cache"]
    (model / "config.json").write_text(json.dumps(cfg))
    assert main(_args(model, text_folder, tmp_path / "o", "flt")) == 0
    assert "use_cache" not in read_json(tmp_path / "o" / "final" / "config.json")


@pytest.mark.parametrize("method,base_window,expected", [
    # ProLong: 2 x theta * t^(d/(d-2)) with this model's theta 100,000 and head size 16, t = 128/64
    ("prolong", "64", 2 * 100_000.0 * 2 ** (16 / 14)),
    # self-distillation's ABF: the pretrained profile's 16x (selfdistill.rope_theta / model.rope_theta)
    ("selfdistill", None, 16 * 100_000.0),
    ("cdt", None, 16 * 100_000.0),
])
def test_rope_theta_paper_is_computed_from_the_loaded_model(foreign, text_folder, tmp_path, capsys, method,
                                                             base_window, expected):
    out = tmp_path / method
    extra = ["--rope-theta", "paper", *(["--base-window", base_window] if base_window else [])]
    assert main(_args(foreign, text_folder, out, method, *extra)) == 0
    assert model_rope(out / "final")["rope_theta"] == pytest.approx(expected, rel=1e-9)
    notes = _notes(capsys.readouterr().err)
    assert len(notes) == 2 and notes[1].startswith(
        f"note: RoPE changed from the model's default rope_theta=100000 to default rope_theta={expected:g} "
        "(--rope-theta paper: ")
    assert ("head size d=16, t=target/base window=128/64" in notes[1]) == (method == "prolong")


def test_rope_theta_paper_follows_the_chosen_profiles_multiple(tiny_model_dir, text_folder, tmp_path, capsys):
    """On the smoke profile self-distillation's ABF is 4x (selfdistill.rope_theta 40,000 over model.rope_theta
    10,000), applied to this model's own base; a method whose paper keeps the base changes nothing, with no note."""
    out = tmp_path / "sd"
    assert main(_args(tiny_model_dir, text_folder, out, "selfdistill", "--profile", "smoke", "--rope-theta",
                      "paper")) == 0
    assert model_rope(out / "final")["rope_theta"] == 40_000.0
    assert _notes(capsys.readouterr().err) == [
        "note: RoPE changed from the model's default rope_theta=10000 to default rope_theta=40000 (--rope-theta "
        "paper: ABF, 4x the model's base (the profile's selfdistill.rope_theta / model.rope_theta))"]
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "flt", "flt", "--profile", "smoke", "--rope-theta",
                      "paper")) == 0
    assert model_rope(tmp_path / "flt" / "final")["rope_theta"] == 10_000.0
    assert _notes(capsys.readouterr().err) == []


def test_rope_theta_help_and_bad_values(text_folder, tiny_model_dir, tmp_path, capsys):
    assert main(["train", "--help"]) == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "'paper': the method's paper value computed from this model" in text
    assert "16x in pretrained and paper" in text and "prolong 2x the dynamic-NTK base" in text
    assert "pretrained for any other: lr 1e-5, --data only" in text
    for bad in ("papers", "-3", "nan"):
        assert main(_args(tiny_model_dir, text_folder, tmp_path / "bad", "flt", "--rope-theta", bad)) == 2
        err = capsys.readouterr().err
        assert "--rope-theta" in err and "allowed: 'paper' or" in err
    assert main(_args(tiny_model_dir, text_folder, tmp_path / "bad", "flt", "--profile", "huge")) == 2
    assert "unknown profile 'huge'; allowed: smoke, tiny, paper, pretrained" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_positions_beyond_the_models_window_are_said():
    from repro.arms import build_arm
    from repro.cli.own_settings import positions_note
    from repro.profiles import scaled_profile

    p = scaled_profile(get_profile("smoke"), 1024)
    skip = build_arm(p, "rp_skip")  # the skip view's indices reach past the target
    top = skip.model["max_positions"]
    assert top > 1024
    assert positions_note(skip, {"max_position_embeddings": 1024}) == (
        f"max_position_embeddings raised from the model's 1024 to {top}: arm rp_skip trains position ids up to "
        f"{top - 1}")
    assert positions_note(skip, {"max_position_embeddings": top}) is None
    assert positions_note(build_arm(p, "flt"), {"max_position_embeddings": 512}) is None  # fit_config's warning


def test_the_dropout_controls_dropout_is_off_again_in_final(foreign, text_folder, tmp_path):
    """``rp_dropout`` trains with attention dropout and declares it off for evaluation (its ``final_config``), as
    the pipeline saves it: ``final/config.json`` is then the model's own again."""
    out = tmp_path / "drop"
    assert main(_args(foreign, text_folder, out, "rp_dropout")) == 0
    own, saved = read_json(foreign / "config.json"), read_json(out / "final" / "config.json")
    assert saved["attention_dropout"] == 0.0
    assert {k for k in own.keys() | saved.keys() if own.get(k) != saved.get(k)} == set()
