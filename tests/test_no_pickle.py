"""Nothing the project reads from disk is unpickled: no unsafe load call in the package or the notebooks, no pickle
file in a training run's folder, and a checkpoint of optimizer/RNG states as safetensors + JSON resumes bit-exactly.
A checkpoint of an earlier version (a pickled ``trainer.pt``) is refused unread."""

from __future__ import annotations

import ast
import json
import random
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch

from repro.checkpoint_state import (PICKLED_STATE, STATE_FILES, flatten_optimizer_state, load_trainer_state,
                                    rng_state, save_trainer_state, set_rng_state, unflatten_optimizer_state)
from repro.train import Interrupted, Trainer, TrainConfig
from tests.test_train import ToyMethod, _weights

pickle_bytes = b"\x80\x05\x95\x06\x00\x00\x00\x00\x00\x00\x00K\x01."
"""A protocol-5 pickle of ``1`` (written as bytes: the test itself imports no pickling module)."""
ROOT = Path(__file__).resolve().parents[1]
PICKLING_MODULES = {"pickle", "cPickle", "_pickle", "dill", "joblib", "cloudpickle", "shelve", "marshal"}


def _keyword(call: ast.Call, name: str):
    """The constant value of keyword ``name`` of ``call`` (``...`` when absent or not a constant)."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value.value if isinstance(kw.value, ast.Constant) else ...
    return ...


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def unsafe_loads(source: str) -> list[tuple[int, str]]:
    """``(line, what)`` of every call or import in ``source`` that could unpickle: ``torch.load`` without
    ``weights_only=True``, ``np.load`` without ``allow_pickle=False``, ``pickle.load(s)`` / ``Unpickler``, and any
    import of a pickling module (pickle, dill, joblib, ...)."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found += [(node.lineno, f"import {a.name}") for a in node.names
                      if a.name.split(".")[0] in PICKLING_MODULES]
        elif isinstance(node, ast.ImportFrom):
            mod = (node.module or "").split(".")[0]
            if mod in PICKLING_MODULES or (mod in ("torch", "numpy") and any(a.name == "load" for a in node.names)):
                found.append((node.lineno, f"from {node.module} import {', '.join(a.name for a in node.names)}"))
        elif isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name == "torch.load" and _keyword(node, "weights_only") is not True:
                found.append((node.lineno, "torch.load( without weights_only=True"))
            elif name in ("np.load", "numpy.load") and _keyword(node, "allow_pickle") is not False:
                found.append((node.lineno, f"{name}( without allow_pickle=False"))
            elif name.split(".")[0] in PICKLING_MODULES and name.split(".")[-1] in ("load", "loads", "Unpickler"):
                found.append((node.lineno, f"{name}("))
    return found


def _sources() -> list[tuple[str, int, str]]:
    """``(name, first line, code)`` of every module under repro/ and every notebook code cell."""
    out = [(str(p.relative_to(ROOT)), 1, p.read_text()) for p in sorted((ROOT / "repro").rglob("*.py"))]
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text())["cells"]):
            if cell["cell_type"] == "code":
                code = "".join(cell["source"])
                # shell/magic lines are not python; keep the numbering
                code = "\n".join("" if ln.lstrip().startswith(("%", "!")) else ln for ln in code.splitlines())
                out.append((f"{nb.relative_to(ROOT)} cell {i}", 1, code))
    return out


def test_the_checker_finds_every_unsafe_form():
    bad = ("import pickle\nimport dill\nfrom joblib import load\nx = torch.load(p)\n"
           "y = torch.load(p, weights_only=False)\nz = np.load(p)\n"
           "w = numpy.load(p, allow_pickle=True)\nv = pickle.loads(b)\n")
    assert [ln for ln, _ in unsafe_loads(bad)] == [1, 2, 3, 4, 5, 6, 7, 8]
    ok = "a = torch.load(p, weights_only=True)\nb = np.load(p, allow_pickle=False)\nc = json.load(f)\n"
    assert unsafe_loads(ok) == []


def test_no_code_in_the_package_or_notebooks_can_unpickle():
    sources = _sources()
    assert any(name == "repro/train/trainer.py" for name, _, _ in sources)
    assert any("cell" in name for name, _, _ in sources)
    bad = [f"{name}:{first + line - 1}: {what}" for name, first, code in sources for line, what in unsafe_loads(code)]
    assert not bad, "code that could unpickle a file:\n" + "\n".join(bad)


def _is_pickle(path: Path) -> bool:
    """A raw pickle (protocol 2-5 magic at offset 0) or a zip holding one (``torch.save``'s ``data.pkl``)."""
    with open(path, "rb") as f:
        head = f.read(2)
    if len(head) == 2 and head[0] == 0x80 and head[1] in (2, 3, 4, 5):
        return True
    if zipfile.is_zipfile(path):
        with zipfile.ZipFile(path) as z:
            return any(n.endswith(".pkl") for n in z.namelist())
    return False


def test_a_run_folder_holds_no_pickle_and_resumes_bit_exactly(tiny_llama, tmp_path):
    cfg = TrainConfig(max_steps=6, lr=3e-3, warmup_steps=2, checkpoint_every=2, keep_checkpoints=2, seed=0)
    ref = tiny_llama()
    Trainer(ref, ToyMethod(), cfg, tmp_path / "ref", progress=False).train()
    files = [p for p in (tmp_path / "ref").rglob("*") if p.is_file()]
    assert files and not [p for p in files if _is_pickle(p)]
    for ckpt in ("ckpt-4", "ckpt-6"):
        assert {p.name for p in (tmp_path / "ref" / ckpt).iterdir()} == {"model.safetensors", "state.json",
                                                                          *STATE_FILES}
    assert not list((tmp_path / "ref").rglob("*.pt")) and not list((tmp_path / "ref").rglob("*.bin"))
    # the pickle check itself sees a torch.save file
    torch.save({"a": 1}, tmp_path / "x.pt")
    (tmp_path / "y.pkl").write_bytes(pickle_bytes)
    assert _is_pickle(tmp_path / "x.pt") and _is_pickle(tmp_path / "y.pkl")

    # resume from ckpt-4 of a copy of the run: the optimizer, RNG and data position come back from the files alone
    run = tmp_path / "run"
    run.mkdir()
    for p in (tmp_path / "ref" / "ckpt-4").iterdir():
        (run / "ckpt-4").mkdir(exist_ok=True)
        (run / "ckpt-4" / p.name).write_bytes(p.read_bytes())
    torch.manual_seed(999), np.random.seed(999), random.seed(999)  # the RNGs must come from the checkpoint
    fresh = tiny_llama(seed=123)
    Trainer(fresh, ToyMethod(), cfg, run, progress=False).train()
    a, b = _weights(ref), _weights(fresh)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_optimizer_and_rng_states_round_trip_exactly(tmp_path):
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    opt = torch.optim.AdamW([{"params": [model[0].weight], "weight_decay": 0.1},
                             {"params": [model[0].bias, *model[1].parameters()], "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95))
    for _ in range(3):
        model(torch.randn(2, 4)).pow(2).sum().backward()
        opt.step()
    tensors, meta = flatten_optimizer_state(opt.state_dict())
    assert set(tensors) == {f"state.{i}.{n}" for i in range(4) for n in ("exp_avg", "exp_avg_sq", "step")}
    back = unflatten_optimizer_state(tensors, json.loads(json.dumps(meta)))
    assert back["param_groups"] == opt.state_dict()["param_groups"]
    random.gauss(0, 1), np.random.standard_normal()  # a cached gaussian in both states
    save_trainer_state(tmp_path, opt)
    expect_torch, expect_np, expect_py = torch.get_rng_state(), np.random.get_state(), random.getstate()
    expect_opt = opt.state_dict()
    torch.manual_seed(5), np.random.seed(5), random.seed(5)
    opt2 = torch.optim.AdamW([{"params": [model[0].weight]}, {"params": [model[0].bias, *model[1].parameters()]}])
    load_trainer_state(tmp_path, opt2)
    got = opt2.state_dict()
    assert got["param_groups"] == expect_opt["param_groups"]
    for i, entry in expect_opt["state"].items():
        for n, v in entry.items():
            assert torch.equal(got["state"][i][n], v), (i, n)
    assert torch.equal(torch.get_rng_state(), expect_torch)
    assert random.getstate() == expect_py
    np_state = np.random.get_state()
    assert np_state[0] == expect_np[0] and np.array_equal(np_state[1], expect_np[1]) and np_state[2:] == expect_np[2:]
    torch_state, states = rng_state()
    set_rng_state(torch_state, json.loads(json.dumps(states)))
    assert random.getstate() == expect_py


def test_a_pickled_trainer_state_is_refused_unread(tiny_llama, tmp_path, monkeypatch):
    cfg = TrainConfig(max_steps=4, lr=1e-3, checkpoint_every=2)
    with pytest.raises(Interrupted):
        Trainer(tiny_llama(), ToyMethod(), cfg, tmp_path, progress=False).train(stop_after=2)
    ckpt = tmp_path / "ckpt-2"
    for name in STATE_FILES:  # what an earlier version wrote: weights, state.json and a pickled trainer.pt
        (ckpt / name).unlink()
    (ckpt / PICKLED_STATE).write_bytes(b"\x80\x04not read")

    def no_unpickling(*a, **k):
        raise AssertionError("trainer.pt was read")

    monkeypatch.setattr(torch, "load", no_unpickling)
    with pytest.raises(ValueError, match=r"ckpt-2' keeps its optimizer and RNG states in trainer.pt, a pickle .* "
                                         r"delete the stage's checkpoint folders .* to restart the stage, or finish "
                                         r"the stage with the project's earlier version"):
        Trainer(tiny_llama(), ToyMethod(), cfg, tmp_path, progress=False).train()
