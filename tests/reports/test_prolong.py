"""ProLong's reports on hand-built records (tiny profile: base window 256, target 1024): the downstream average over
the tasks the base can do, the long-share verdicts, the paired order verdicts and PL-Tab3's counts."""

import pytest

from repro.profiles import get_profile
from repro.reports import prolong as plr
from repro.recipes.plans import pl_plan
from tests.reports.records import record, rows

P = get_profile("tiny")
LONG = pl_plan(P, "prolong")["long"]["tasks"]
DOABLE = ("niah_single_1", "niah_multikey_1", "json_kv")  # the base gets these right at its window


def _arm(acc: float, n: int = 40, short: float = 1.0):
    """Every long task at the target with ``acc`` of ``n`` prompts right; NIAH at the base window ``short``."""
    k = round(acc * n)
    long = [r for t in LONG for r in rows(t, 1024, [1.0] * k + [0.0] * (n - k))]
    niah = pl_plan(P, "prolong")["short"]["tasks"]
    m = round(short * n)
    return {"long": record(long), "short": record([r for t in niah for r in rows(t, 256, [1.0] * m + [0.0] * (n - m))])}


def _suite(accs: dict[str, float]):
    base = [r for t in LONG for r in rows(t, 256, [1.0, 1.0] if t in DOABLE else [0.0, 0.0])]
    return {"base": {"window": record(base)}, **{n: _arm(a) for n, a in accs.items()}}


def _ppl(losses: dict[str, float]):
    return {n: {"ppl": 2.718 ** v, "per_doc_loss": [v + 0.01 * i for i in range(8)]} for n, v in losses.items()}


def test_downstream_counts_only_the_tasks_the_base_can_do():
    suite = _suite({"prolong": 0.5})
    assert plr.long_tasks(suite, P) == DOABLE
    assert "niah_single_1, niah_multikey_1, json_kv" in plr.downstream_note(suite, P)
    h = plr.headlines(suite, {}, P)["prolong"]
    assert h["long"] == [0.5] and h["recall"] == [0.5] and h["short"] == [1.0]


def test_long_share_verdicts_follow_the_gaps():
    shares = {"pl_long0": 0.3, "pl_long20": 0.4, "pl_long40": 0.5, "prolong": 0.8, "pl_long80": 0.6,
              "pl_long100": 0.2}
    suite = _suite(shares)
    ppl = _ppl({"pl_long0": 3.0, "pl_long20": 2.9, "pl_long40": 2.8, "prolong": 2.7, "pl_long80": 2.6,
                "pl_long100": 2.5})
    fig3 = plr.pl_fig3(suite, ppl, P)
    assert fig3.agrees == "yes" and "best at 60%" in fig3.note and "100% long below the best" in fig3.note
    fig1 = plr.pl_fig1(suite, ppl, P)
    assert fig1.agrees == "yes" and "-0.500" in fig1.note  # 100% long: 0.5 nats lower held-out loss
    pts = plr.share_points(suite, ppl, P)
    assert [x["long_share"] for x in pts] == [0, 20, 40, 60, 80, 100] and pts[3]["long"] == pytest.approx(80.0)
    flat = plr.pl_fig3(_suite({n: 0.5 for n in shares}), ppl, P)
    assert flat.agrees == "tie within noise"
    worse = plr.pl_fig3(_suite({**shares, "pl_long0": 0.95}), ppl, P)
    assert worse.agrees in ("no", "partly") and "best at 0%" in worse.note


def test_mask_rope_and_length_tables_read_the_order_against_noise():
    suite = _suite({"prolong": 0.8, "pl_nomask": 0.3, "pl_rope_orig": 0.1, "pl_rope_ntk": 0.5, "pl_rope_ntk4": 0.8,
                    "pl_train2x": 0.8})
    assert plr.pl_tab20(suite, {}, P).agrees == "yes"
    t18 = plr.pl_tab18(suite, {}, P)
    assert t18.agrees == "yes" and "RoPE base 1e+04 (base model's)" in str(t18.tables[0]["rows"])
    t7 = plr.pl_tab7(suite, {}, P)
    assert t7.agrees == "tie within noise"  # equal downstream: no order either way
    row = [r for r in plr.pl_tab20(suite, {}, P).tables[0]["rows"] if r["arm"] == "pl_nomask"][0]
    assert row["vs recipe (pts)"].startswith("-50.0 ± ") and row["vs recipe (pts)"].endswith("(lower)")


def test_tab3_counts_and_the_mix_trained_on():
    manifest = {"threshold": 1024, "sources": {
        "code": {"spec": "corpus:code", "kind": "long", "documents": 3, "tokens": 5000, "long_documents": 2,
                 "long_tokens": 4800, "longest": 3000, "kept_documents": 2, "kept_tokens": 4800},
        "books": {"spec": "corpus:books", "kind": "long", "documents": 2, "tokens": 3000, "long_documents": 1,
                  "long_tokens": 2000, "longest": 2000, "kept_documents": 1, "kept_tokens": 2000}}}
    rep = plr.pl_tab3(manifest, {"prolong": {"rows_code": 3, "rows_books": 1}}, P)
    assert rep.agrees == "yes" and rep.tables[0]["rows"][0]["long share of tokens (%)"] == 96.0
    assert rep.tables[1]["rows"][0] == {"arm": "prolong", "rows": 4, "books": "25.0%", "code": "75.0%"}
    swapped = {**manifest, "sources": {"code": manifest["sources"]["books"], "books": manifest["sources"]["code"]}}
    assert plr.pl_tab3(swapped, {}, P).agrees == "no"


def test_tab15_from_a_benchmark_record():
    single = {a: {"tokens_per_s": t, "ratio": t / 1000} for a, t in (("full", 1000), ("doc_dense", 800),
                                                                      ("doc_varlen", 1200))}
    sim = {2: {"sorted": {"ratio": 0.8}, "sorted_per_worker": {"ratio": 0.9}, "ideal": {"ratio": 0.75}}}
    bench = {"single": single, "simulated": sim, "rows": [8, 1024], "docs_per_row": 3.0,
             "micro_batches_per_step": 64, "fit": {"a": 0.01, "b": 1e-8, "c": 1e-5}}
    rep = plr.pl_tab15(bench, P)
    assert rep.agrees == "yes" and "varlen 1.20x full" in rep.ours and "1.25x at k=2" in rep.ours
    assert rep.tables[0]["rows"][3]["tokens/s"] == 1500

    # flex attention cannot train on the CPU: its forward pass beside the others' forward passes
    for arm, f in (("full", 3000), ("doc_dense", 2400), ("doc_varlen", 3300), ("doc_flex", 2700)):
        single.setdefault(arm, {"tokens_per_s": None, "ratio": None})
        single[arm].update(forward_tokens_per_s=f, forward_ratio=f / 3000)
    rep = plr.pl_tab15(bench, P)
    rows = {r["setting"]: r for r in rep.tables[0]["rows"]}
    flex = rows["document masks, flex attention block mask (flex_doc)"]
    assert flex["tokens/s"].startswith("n/a: no backward") and flex["forward tokens/s"] == 2700
    assert flex["forward vs full"] == 0.9 and rows["variable-length attention (sdpa_varlen)"]["forward vs full"] == 1.1
    assert "doc_flex cannot train here" in rep.tables[0]["caption"] and "forward 0.90x full's forward" in rep.ours
    assert rep.agrees == "yes" and rep.tables[0]["rows"][4]["tokens/s"] == 1500  # reordering after the flex row
