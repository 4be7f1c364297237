"""``reproduce --profile paper --dry-run``: configs and accelerator configs check out, the missing data sources
are reported, one step of each method runs (and one through the paper's DeepSpeed config), and the exit status
says something is missing."""

import pytest
import torch

from repro.__main__ import main


@pytest.mark.slow
def test_paper_dry_run_reports_missing_sources_and_steps_every_method(capsys):
    assert main(["reproduce", "--profile", "paper", "--dry-run"]) == 1  # the paper's data is not here
    out = capsys.readouterr().out
    lines = [ln.split() for ln in out.splitlines() if ln.startswith("  ")]
    status = {(ln[0], ln[1]): ln[2] if ln[0] != "source" else ln[3] for ln in lines}
    assert status[("config", "profile")] == "ok"
    assert ("source", "corpus") in status and status[("source", "corpus")] == "missing"
    assert "folder:data/long_corpus" in out
    steps = {ln[1]: ln[3] for ln in lines if ln[0] == "step" and ln[1] != "setup"}
    assert set(steps) == {"flt", "pose", "rpes", "longrecipe", "selfdistill", "longce", "cdt", "prolong"}
    assert all(s == "ok" for s in steps.values()), out
    assert any(ln[:2] == ["accel", "deepspeed"] and ln[3] == "ok" for ln in lines)
    # one step through the paper's own DeepSpeed config (ZeRO-3, bf16, CPU optimizer offload) in a child process
    engine = [ln for ln in lines if ln[:2] == ["engine", "deepspeed"]]
    assert len(engine) == 1 and engine[0][2] == "configs/deepspeed_zero3.json" and engine[0][3] == "ok", out
    no_gpu = "no GPU: torch's AdamW in place of DeepSpeed's CPU Adam" in " ".join(engine[0])
    assert no_gpu != torch.cuda.is_available()  # the stand-in only where the CPU Adam op would be built for nothing
    assert float(engine[0][engine[0].index("loss") + 1].rstrip(",")) > 0


def test_dry_run_unknown_method_and_profile(capsys):
    assert main(["reproduce", "--profile", "paper", "--dry-run", "--methods", "flt,warp"]) == 2
    assert "unknown method 'warp'" in capsys.readouterr().err
    assert main(["reproduce", "--profile", "huge", "--dry-run"]) == 2
    assert "unknown profile 'huge'" in capsys.readouterr().err
