"""CD-Cost's benchmark and table: every arm timed in the same rounds, the full-backward detection gives the
frozen one's embedding gradient, the goal verdict follows the ratio."""

import numpy as np
import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from repro.bench.cdt_cost import (CD_COST_ARMS, PARTS, detection, full_backward_gradients, measure_cd_step_costs,
                                  prepared_rows)
from repro.methods.cdt import CDTSpec, cdt_loss, embedding_gradients
from repro.profiles import get_profile
from repro.reports.cdt_training import cd_cost, goal_met


def _model(tied: bool = False):
    torch.manual_seed(0)
    return LlamaForCausalLM(LlamaConfig(vocab_size=64, hidden_size=16, intermediate_size=32, num_hidden_layers=1,
                                        num_attention_heads=2, num_key_value_heads=2, max_position_embeddings=256,
                                        tie_word_embeddings=tied, use_cache=False))


def _batch(B: int = 2, T: int = 24, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    doc = (torch.arange(T) >= T // 2).long().expand(B, T).clone()
    pos = torch.cat([torch.arange(T // 2), torch.arange(T - T // 2)]).expand(B, T).clone()
    return {"input_ids": torch.randint(0, 64, (B, T), generator=g), "position_ids": pos, "doc_ids": doc,
            "weights": torch.rand(B, T, generator=g, dtype=torch.float64)}


def test_every_arm_timed_in_the_same_rounds_with_its_parts_and_the_model_untouched():
    model = _model()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    out = measure_cd_step_costs(model, 1e-3, 1e4, batch_size=2, length=32, steps=2, warmup=1, threads=1,
                                progress=False)
    assert list(out) == list(CD_COST_ARMS)
    for name, r in out.items():
        assert len(r["seconds"]) == 2 and all(t > 0 for t in r["seconds"]) and r["seconds_per_step"] > 0, name
        assert r["tokens_per_step"] == 64 and r["batch"] == [2, 32] and r["ratio"] > 0
        want = ["forward", "backward", "optimizer"] if name == "ce" else list(PARTS)
        assert sorted(r["parts"]) == sorted(want) and all(v > 0 for v in r["parts"].values()), name
    assert out["ce"]["ratio"] == 1.0
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())  # arms train their own copies


def test_given_rows_are_used_in_turn_and_bad_arguments_name_the_allowed_values(tmp_path):
    rows = [{k: v.numpy() for k, v in _batch(seed=s).items()} for s in range(2)]
    out = measure_cd_step_costs(_model(), 1e-3, 5.0, rows, steps=1, warmup=0, arms=["ce", "cdt"], pad_id=0,
                                progress=False)
    assert list(out) == ["ce", "cdt"] and out["cdt"]["tokens_per_step"] == 48
    with pytest.raises(ValueError, match="must include 'ce'"):
        measure_cd_step_costs(_model(), 1e-3, 5.0, steps=1, arms=["cdt"], progress=False)
    with pytest.raises(ValueError, match="allowed: ce, cdt, cdt_full_backward"):
        measure_cd_step_costs(_model(), 1e-3, 5.0, steps=1, arms=["ce", "sft"], progress=False)
    with pytest.raises(ValueError, match="lr=0.0; allowed"):
        measure_cd_step_costs(_model(), 0.0, 5.0, steps=1, progress=False)
    with pytest.raises(ValueError, match="steps=0"):
        measure_cd_step_costs(_model(), 1e-3, 5.0, steps=0, progress=False)
    with pytest.raises(ValueError, match="mode='half'; allowed: frozen, full_backward"):
        detection("half")


def test_prepared_rows_read_the_first_batches(tmp_path):
    from repro.methods.prepared import prepare_batches

    class Rows:
        name = "rows"

        def batch(self, step):
            return {k: v.numpy() for k, v in _batch(seed=step).items()}

        def state_dict(self):
            return {}

    prepare_batches(Rows(), 3, tmp_path / "data")
    got = prepared_rows(tmp_path / "data", 2)
    assert len(got) == 2 and np.array_equal(got[1]["input_ids"], _batch(seed=1)["input_ids"].numpy())
    with pytest.raises(ValueError, match="n=4; allowed: 1..3"):
        prepared_rows(tmp_path / "data", 4)


@pytest.mark.parametrize("tied", [False, True])
def test_full_backward_detection_gives_the_frozen_embedding_gradient(tied):
    model, batch = _model(tied).double(), _batch()
    embeds = model.get_input_embeddings()(batch["input_ids"])
    want, want_loss = embedding_gradients(model, batch, embeds=embeds)
    grad, loss = full_backward_gradients(model, batch, embeds=embeds)
    assert torch.allclose(grad, want, rtol=0, atol=1e-12) and float((grad - want).abs().max()) <= 1e-12
    assert abs(float(loss - want_loss)) <= 1e-12
    assert all(p.grad is None and p.requires_grad for p in model.parameters())  # nothing kept, nothing left frozen


def test_the_timed_detection_is_cdt_loss_as_implemented():
    model, batch, spec = _model(True).double(), _batch(), CDTSpec(beta=1e4)
    base, m0 = cdt_loss(model, batch, spec, 1e-3)
    base.backward()
    want = {n: p.grad.clone() for n, p in model.named_parameters()}
    model.zero_grad(set_to_none=True)
    loss, m1 = cdt_loss(model, batch, spec, 1e-3, detector=detection("frozen"))
    loss.backward()
    assert torch.equal(loss, base) and m0 == m1
    assert all(torch.equal(p.grad, want[n]) for n, p in model.named_parameters())
    model.zero_grad(set_to_none=True)
    full, m2 = cdt_loss(model, batch, spec, 1e-3, detector=full_backward_gradients)
    assert abs(float(full.detach() - base.detach())) <= 1e-12 and m2["noise_fraction"] == m0["noise_fraction"]


def _bench(ratio_cdt: float, ratio_full: float | None = 2.0) -> dict:
    def row(ratio):
        return {"seconds": [ratio, ratio], "seconds_per_step": ratio, "ratio": ratio, "batch": [8, 1024],
                "parts": {"forward": 0.3 * ratio, "backward": 0.6 * ratio, "optimizer": 0.01}, "bf16": True,
                "lr": 1e-3, "beta": 1e4, "threads": 1}

    out = {"ce": row(1.0), "cdt": row(ratio_cdt)}
    if ratio_full is not None:
        out["cdt_full_backward"] = row(ratio_full)
    return out


@pytest.mark.parametrize("ratio, full, met, agrees", [(1.6, 2.0, "yes", "yes"), (1.7, 2.0, "yes", "yes"),
                                                      (1.8, 2.0, "no", "partly"), (2.1, 2.0, "no", "no"),
                                                      (1.9, None, "no", "no")])
def test_the_table_marks_the_goal(ratio, full, met, agrees):
    p = get_profile("tiny")
    rep = cd_cost(_bench(ratio, full), p, runs={"rp_standard": 2.0, "cdt": 3.0})
    rows = {r["arm"]: r for r in rep.tables[0]["rows"]}
    assert rep.target == "CD-Cost" and rep.agrees == agrees and goal_met(ratio) == met
    assert rows["cdt"]["goal met"] == met and rows["cdt"]["goal"] == "<= 1.7x CE" and rows["ce"]["goal met"] == ""
    assert rows["cdt"]["ratio to CE"] == ratio and rows["cdt"]["training run ratio"] == 1.5
    assert rows["ce"]["detection forward s"] == "" and "8x1024" in rep.tables[0]["caption"]
    assert "0.5 h" in rows["cdt"]["paper"] and f"cdt {ratio:.2f}x" in rep.ours
    assert goal_met(None) == "n/a" and cd_cost({}, p).agrees == "n/a"
