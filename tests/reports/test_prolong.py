"""ProLong's reports on hand-built records (tiny profile: base window 256, target 1024): the downstream average over
the tasks the base can do, and each target's verdict from its declared headline (:mod:`repro.claims.prolong`):
``yes`` / ``partly`` / ``no`` / ``tie within noise`` on numbers chosen for each, the expected gaps and standard
errors computed here by hand."""

import math
import statistics

import pytest

from repro.profiles import get_profile
from repro.reports import prolong as plr
from repro.reports import prolong_data as pld
from repro.recipes.plans import pl_plan
from tests.reports.records import record, rows

P = get_profile("tiny")
LONG = pl_plan(P, "prolong")["long"]["tasks"]
DOABLE = ("niah_single_1", "niah_multikey_1", "json_kv")  # the base gets these right at its window


N = 40
"""Prompts per task and cell: with the ones first in every arm, two arms' paired differences are 1 on the
prompts one gets right and the other not, 0 elsewhere."""


def _arm(acc: float, n: int = N, short: float = 1.0):
    """Every long task at the target with ``acc`` of ``n`` prompts right; NIAH at the base window ``short``."""
    k = round(acc * n)
    long = [r for t in LONG for r in rows(t, 1024, [1.0] * k + [0.0] * (n - k))]
    niah = pl_plan(P, "prolong")["short"]["tasks"]
    m = round(short * n)
    return {"long": record(long), "short": record([r for t in niah for r in rows(t, 256, [1.0] * m + [0.0] * (n - m))])}


def _suite(accs: dict[str, float], short: dict[str, float] | None = None):
    base = [r for t in LONG for r in rows(t, 256, [1.0, 1.0] if t in DOABLE else [0.0, 0.0])]
    return {"base": {"window": record(base)}, **{n: _arm(a, short=(short or {}).get(n, 1.0)) for n, a in accs.items()}}


def paired_se(acc_a: float, acc_b: float, tasks: int = len(DOABLE), n: int = N) -> float:
    """The analytic SE (percent) of a macro-average gap over ``tasks`` equal tasks: per task the paired differences
    are 1 on a share ``q = |a - b|`` of the prompts, variance ``q (1 - q)``; the macro's is the sum over tasks of
    ``(1 / tasks)^2 q (1 - q) / n``. The bootstrap the reports use estimates it."""
    q = abs(acc_a - acc_b)
    return 100 * math.sqrt(tasks * q * (1 - q) / n) / tasks


JITTER = {"a": [0.06, -0.04, 0.02, -0.05, 0.03, 0.0, -0.01, -0.01],
          "b": [-0.02, 0.05, -0.03, 0.01, 0.0, 0.04, -0.06, 0.01]}
"""Per-document loss offsets (nats) of two kinds of arm: their differences make the paired SE over documents."""


def _ppl(losses: dict[str, float], kind: dict[str, str] | None = None):
    """Held-out loss records: per document the arm's loss plus its kind's offsets (kind ``a`` unless given)."""
    kind = kind or {}
    out = {}
    for n, v in losses.items():
        per_doc = [v + e for e in JITTER[kind.get(n, "a")]]
        out[n] = {"ppl": math.exp(sum(per_doc) / len(per_doc)), "per_doc_loss": per_doc}
    return out


def loss_se(kind_a: str, kind_b: str) -> float:
    d = [x - y for x, y in zip(JITTER[kind_a], JITTER[kind_b])]
    return statistics.stdev(d) / math.sqrt(len(d))


def test_downstream_counts_only_the_tasks_the_base_can_do():
    suite = _suite({"prolong": 0.5})
    assert plr.long_tasks(suite, P) == DOABLE
    assert "niah_single_1, niah_multikey_1, json_kv" in plr.downstream_note(suite, P)
    h = plr.headlines(suite, {}, P)["prolong"]
    assert h["long"] == [0.5] and h["recall"] == [0.5] and h["short"] == [1.0]




SHARES = {"pl_long0": 0.3, "pl_long20": 0.4, "pl_long40": 0.5, "prolong": 0.8, "pl_long80": 0.6, "pl_long100": 0.2}


def test_fig3_headline_is_60_percent_above_every_other_share():
    # 60% at 0.8 against 0.6 at best: q = 0.2 -> SE 3.65 pts, gaps >= 20 pts (5.5 SE; Holm over 5 still far below)
    assert paired_se(0.8, 0.6) == pytest.approx(3.651, abs=1e-3)
    fig3 = plr.pl_fig3(_suite(SHARES), {}, P)
    assert fig3.agrees == "yes" and fig3.note.startswith("headline: 5/5 claims hold beyond noise")
    assert "best observed at 60% (80.0)" in fig3.note
    row = [r for r in fig3.tables[0]["rows"] if r["arm"] == "pl_long80"][0]
    assert row["downstream"] == 60.0 and row["long share (%)"] == 80
    # partly: 80% long 0.775 is 2.5 pts below 60% (SE 1.43: 1.75 SE, a tie); the other four still hold
    assert paired_se(0.8, 0.775) == pytest.approx(1.425, abs=1e-3)
    partly = plr.pl_fig3(_suite({**SHARES, "pl_long80": 0.775}), {}, P)
    assert partly.agrees == "partly" and "4/5 claims hold beyond noise, 1 tied" in partly.note
    # no: 0% long 0.95 is 45 pts above 60% at 0.5 (the others level with it: gap 0, SE 0, a tie)
    worse = plr.pl_fig3(_suite({n: 0.5 for n in SHARES} | {"pl_long0": 0.95}), {}, P)
    assert worse.agrees == "no" and "0/5 claims hold beyond noise, 1 significant the other way, 4 tied" in worse.note
    assert "best observed at 0% (95.0)" in worse.note
    # tie: every share 0.5, or 60% 2.5 pts above each (1.75 SE)
    assert plr.pl_fig3(_suite({n: 0.5 for n in SHARES}), {}, P).agrees == "tie within noise"
    near = plr.pl_fig3(_suite({n: 0.475 for n in SHARES} | {"prolong": 0.5}), {}, P)
    assert near.agrees == "tie within noise" and "0/5 claims hold beyond noise, 5 tied" in near.note


def test_fig1_headline_is_100_vs_60_percent_long_on_loss_and_downstream():
    suite = _suite(SHARES)  # downstream 100% long 0.2 vs 60% 0.8: -60 pts, SE 100 sqrt(0.6 * 0.4 / 120) = 4.5
    kinds = {"prolong": "b"}  # loss gaps 100% - 60% have the paired SE of kinds a - b: 0.0215 nats
    assert loss_se("a", "b") == pytest.approx(0.02155, abs=1e-5)
    ppl = _ppl({"pl_long0": 3.0, "pl_long20": 2.9, "pl_long40": 2.8, "prolong": 2.7, "pl_long80": 2.6,
                "pl_long100": 2.5}, kinds)
    fig1 = plr.pl_fig1(suite, ppl, P)
    assert fig1.agrees == "yes" and fig1.note.startswith("headline: 2/2 claims hold beyond noise")
    assert "loss:pl_long100 < loss:prolong" in fig1.note and "gap -0.2 +- 0.022" in fig1.note
    assert "loss:pl_long100 - loss:pl_long0: -0.500 ± 0.000 nats (lower)" in fig1.note  # context: same offsets
    # partly: the loss still falls at 100% (-0.2 nats, 9 SE), downstream at 100% 2.5 pts below 60% (1.75 SE: tie)
    flat = _suite({**SHARES, "pl_long100": 0.775})
    part = plr.pl_fig1(flat, ppl, P)
    assert part.agrees == "partly" and "1/2 claims hold beyond noise, 1 tied" in part.note
    # tie: loss 100% 0.02 nats below 60% (0.93 SE), downstream as above
    tied = plr.pl_fig1(flat, _ppl({"prolong": 2.7, "pl_long100": 2.68}, kinds), P)
    assert tied.agrees == "tie within noise" and "0/2 claims hold beyond noise, 2 tied" in tied.note
    # no: 100% long has the higher loss (+0.2 nats) and the higher downstream (0.8 vs 0.3)
    no = plr.pl_fig1(_suite({"prolong": 0.3, "pl_long100": 0.8}), _ppl({"prolong": 2.7, "pl_long100": 2.9}, kinds), P)
    assert no.agrees == "no" and "0/2 claims hold beyond noise, 2 significant the other way" in no.note
    # no held-out loss records: that claim is untested, the downstream one alone decides
    assert plr.pl_fig1(suite, {}, P).agrees == "partly"


def test_loss_noise_pairs_documents_and_adds_the_seed_spread():
    # prolong over two seeds: mean losses 2.7 and 2.9 (kind a both) -> seed std 0.1414, seed term 0.1414^2 / 2;
    # pl_long100 (one seed) adds the pooled spread 0.1414^2 / 1; the paired term over documents (kinds a - b)
    ppl = _ppl({"prolong": 2.7, "prolong@seed1": 2.9, "pl_long100": 2.5}, {"pl_long100": "b"})
    noise = plr.LossNoise(ppl, {"prolong": ("prolong", "prolong@seed1"), "pl_long100": ("pl_long100",)})
    s = statistics.stdev([2.7, 2.9])
    gap, eval_se, seed_se = noise.gap("pl_long100", "prolong")
    assert gap == pytest.approx(2.5 - 2.8) and eval_se == pytest.approx(loss_se("a", "b"))
    assert seed_se == pytest.approx(math.sqrt(s ** 2 / 2 + s ** 2))
    assert noise.se("pl_long100", "prolong") == pytest.approx(math.hypot(eval_se, seed_se))
    assert noise.value("prolong") == pytest.approx(2.8) and noise.gap("prolong", "pl_long0") is None
    bad = {**ppl, "prolong@seed1": {"per_doc_loss": [2.9] * 3}}
    with pytest.raises(ValueError, match=r"replicates of prolong scored \[3, 8\] held-out documents"):
        plr.LossNoise(bad, {"prolong": ("prolong", "prolong@seed1")}).value("prolong")


def test_share_points_carry_each_points_standard_error():
    # one seed per arm: downstream SE over the 3 doable tasks' 40 prompts, sqrt(3 x 0.25 / 40) / 3 at 50%; the
    # perplexity's SE is ppl x the loss's SE over the 8 documents (delta method)
    suite = _suite({"pl_long0": 0.5, "prolong": 0.8}, short={"pl_long0": 0.5})
    ppl = _ppl({"pl_long0": 3.0, "prolong": 2.7})
    pts = {x["arm"]: x for x in plr.share_points(suite, ppl, P)}
    assert pts["pl_long0"]["long_se"] == pytest.approx(100 * math.sqrt(3 * 0.25 / N) / 3)
    assert pts["prolong"]["long_se"] == pytest.approx(100 * math.sqrt(3 * 0.8 * 0.2 / N) / 3)
    assert pts["prolong"]["short_se"] == 0.0 and pts["pl_long0"]["short_se"] > 0  # all right: no spread
    doc_se = statistics.stdev(JITTER["a"]) / math.sqrt(len(JITTER["a"]))
    assert pts["prolong"]["ppl_se"] == pytest.approx(pts["prolong"]["ppl"] * doc_se)
    assert plr.share_points(suite, {}, P)[0]["ppl_se"] is None


def test_point_se_adds_the_seed_spread_of_the_arm():
    # prolong over two seeds (losses 2.7, 2.9): the point's SE adds s / sqrt(2); a single-seed arm the pooled s
    ppl = _ppl({"prolong": 2.7, "prolong@seed1": 2.9, "pl_long100": 2.5})
    noise = plr.LossNoise(ppl, {"prolong": ("prolong", "prolong@seed1"), "pl_long100": ("pl_long100",)})
    s, doc_se = statistics.stdev([2.7, 2.9]), statistics.stdev(JITTER["a"]) / math.sqrt(len(JITTER["a"]))
    assert noise.point_se("prolong") == pytest.approx(math.hypot(doc_se, s / math.sqrt(2)))
    assert noise.point_se("pl_long100") == pytest.approx(math.hypot(doc_se, s))
    assert noise.point_se("pl_long0") is None


def test_tab20_headline_is_masks_above_no_masks_on_long_and_short():
    def tab20(long_mask, long_none, short_mask=1.0, short_none=1.0):
        suite = _suite({"prolong": long_mask, "pl_nomask": long_none}, {"prolong": short_mask, "pl_nomask": short_none})
        return plr.pl_tab20(suite, {}, P)

    yes = tab20(0.8, 0.3, 1.0, 0.5)  # long +50 pts (SE 4.6), short NIAH +50 pts over 8 tasks
    assert yes.agrees == "yes" and yes.note.startswith("headline: 2/2 claims hold beyond noise")
    assert "short:prolong > short:pl_nomask" in yes.note
    row = [r for r in yes.tables[0]["rows"] if r["arm"] == "pl_nomask"][0]
    assert row["vs recipe (pts)"].startswith("-50.0 ± ") and row["vs recipe (pts)"].endswith("(lower)")
    assert tab20(0.8, 0.3).agrees == "partly"  # short level (gap 0): the long claim alone holds
    no = tab20(0.3, 0.8)
    assert no.agrees == "no" and "0/2 claims hold beyond noise, 1 significant the other way, 1 tied" in no.note
    assert tab20(0.5, 0.475).agrees == "tie within noise"  # +2.5 pts, SE 1.43


def test_tab18_headline_is_the_order_original_below_ntk_below_2x_ntk():
    def tab18(orig, ntk, recipe, ntk4=0.5):
        return plr.pl_tab18(_suite({"prolong": recipe, "pl_rope_orig": orig, "pl_rope_ntk": ntk,
                                    "pl_rope_ntk4": ntk4}), {}, P)

    yes = tab18(0.1, 0.5, 0.8, ntk4=0.95)  # 4x NTK far above the recipe: context, not the verdict
    assert yes.agrees == "yes" and "RoPE base 1e+04 (base model's)" in str(yes.tables[0]["rows"])
    assert "pl_rope_ntk4 - prolong: +15.0 ±" in yes.note and yes.note.index("headline") == 0
    # the case: 2x NTK ties with NTK (-0.8 pts) while NTK beats the original: partly, not yes
    part = tab18(0.222, 0.315, 0.307)
    assert part.agrees == "partly" and "1/2 claims hold beyond noise, 1 tied" in part.note
    assert tab18(0.8, 0.5, 0.3).agrees == "no"
    assert tab18(0.5, 0.5, 0.5).agrees == "tie within noise"


def test_tab7_headline_is_training_longer_above_training_at_the_target():
    def tab7(longer, at_target, **more):
        return plr.pl_tab7(_suite({"prolong": at_target, "pl_train2x": longer, **more}), {}, P)

    assert tab7(0.8, 0.5).agrees == "yes"
    no = tab7(0.3, 0.8)
    assert no.agrees == "no" and no.note.startswith("headline: 0/1 claims hold beyond noise, 1 significant the")
    assert tab7(0.5, 0.475).agrees == "tie within noise" and tab7(0.5, 0.5).agrees == "tie within noise"
    # the recipe over three seeds at 0.5, 0.8, 0.2 (mean 0.5, spread 30 pts): +30 pts for 2x is within
    # sqrt(30^2 / 3 + 30^2 + eval) = 34.6+ pts (the single-seed arm takes the pooled spread)
    widened = tab7(0.8, 0.5, **{"prolong@seed1": 0.8, "prolong@seed2": 0.2})
    assert widened.agrees == "tie within noise" and "prolong 30.0 over 3 seeds" in widened.note


def test_tab3_is_not_testable_on_the_substitutes():
    manifest = {"threshold": 1024, "sources": {
        "code": {"spec": "corpus:code", "kind": "long", "documents": 3, "tokens": 5000, "long_documents": 2,
                 "long_tokens": 4800, "longest": 3000, "kept_documents": 2, "kept_tokens": 4800},
        "books": {"spec": "corpus:books", "kind": "long", "documents": 2, "tokens": 3000, "long_documents": 1,
                  "long_tokens": 2000, "longest": 2000, "kept_documents": 1, "kept_tokens": 2000}}}
    rep = pld.pl_tab3(manifest, {"prolong": {"rows_code": 3, "rows_books": 1}}, P)
    assert rep.tables[0]["rows"][0]["long share of tokens (%)"] == 96.0
    assert rep.tables[1]["rows"][0] == {"arm": "prolong", "rows": 4, "books": "25.0%", "code": "75.0%"}
    assert rep.agrees == "n/a" and rep.note.startswith("n/a: the paper counts the Stack's repositories")
    assert "headline: 0/1 claims hold beyond noise, 1 untested" in rep.note and "code > books" in rep.note
    swapped = {**manifest, "sources": {"code": manifest["sources"]["books"], "books": manifest["sources"]["code"]}}
    assert pld.pl_tab3(swapped, {}, P).agrees == "n/a"  # the order of the counts cannot decide either way
    own = {**manifest, "sources": {k: {**v, "spec": f"folder:/data/{k}"} for k, v in manifest["sources"].items()}}
    assert pld.pl_tab3(own, {}, P).note.startswith("n/a: the counts of the given sources are a census")


def _bench(per_worker: list[float], sorted_: list[float] | None = None, rounds=(0.9, 0.91, 0.89)):
    """A PL-Tab15 record: one process (full, dense mask and varlen, 4 interleaved rounds) and k = 8 simulated
    workers over 4 steps of 10 s unsorted, ``per_worker`` (ProLong's sort) and ``sorted_`` (ours) per step."""
    secs = {"full": [1.0, 1.1, 0.9, 1.0], "doc_dense": [1.2, 1.3, 1.2, 1.25], "doc_varlen": [0.95, 1.0, 0.9, 0.95]}
    single = {a: {"seconds": s, "tokens_per_s": 1000 / statistics.median(s),
                  "ratio": statistics.median(secs["full"]) / statistics.median(s)} for a, s in secs.items()}
    unsorted = [10.0] * 4
    sorted_ = sorted_ or per_worker

    def order(x, ratios=()):
        return {"seconds": x, "total": sum(x), "ratio": sum(x) / sum(unsorted), "round_ratios": list(ratios)}

    sim = {8: {"unsorted": order(unsorted), "sorted_per_worker": order(per_worker, rounds),
               "sorted": order(sorted_), "ideal": {"ratio": 0.75}}}
    return {"single": single, "simulated": sim, "rows": [8, 1024], "docs_per_row": 3.0,
            "micro_batches_per_step": 64, "fit": {"a": 0.01, "b": 1e-8, "c": 1e-5}}


def test_reorder_gain_is_the_speed_over_unsorted_with_steps_and_rounds_noise():
    # R = 36 / 40 = 0.9; residuals o - R u = 0, 0.5, -0.5, 0: se(R) = sqrt(0.5 / 12) / 10 = 0.0204 over steps;
    # rounds 0.9, 0.91, 0.89: sd 0.01 / sqrt(3); speed 1 / 0.9 with SE se(R) / 0.81
    gain, se = pld.reorder_gain(_bench([9.0, 9.5, 8.5, 9.0])["simulated"][8], "sorted_per_worker")
    assert gain == pytest.approx(1 / 0.9) and se == pytest.approx(math.sqrt(0.5 / 12 / 100 + 0.01 ** 2 / 3) / 0.81)
    assert pld.reorder_gain({"unsorted": {"ratio": 1.0}, "sorted": {"ratio": 0.8}}, "sorted") == (1.25, None)
    with pytest.raises(ValueError, match="order='random'; allowed: an order simulated beside unsorted"):
        pld.reorder_gain(_bench([9.0] * 4)["simulated"][8], "random")
    # full / varlen per round: 1.0 / 0.95, 1.1 / 1.0, 0.9 / 0.9, 1.0 / 0.95
    x = [1.0 / 0.95, 1.1, 1.0, 1.0 / 0.95]
    m, s = pld.round_speedup(_bench([9.0] * 4)["single"], "doc_varlen")
    assert m == pytest.approx(statistics.mean(x)) and s == pytest.approx(statistics.stdev(x) / 2)


def test_tab15_headline_is_prolongs_per_worker_sort_on_8_workers():
    yes = pld.pl_tab15(_bench([9.0, 9.5, 8.5, 9.0]), P)  # +11.1% +- 2.6%: 4.2 SE
    assert yes.agrees == "yes" and yes.note.startswith("headline: 1/1 claims hold beyond noise")
    row = yes.tables[0]["rows"][-1]
    assert row["setting"] == "+ minibatch reordering (ProLong's per-worker sort), 8 workers (simulated)"
    assert row["vs unsorted"].startswith("1.111x ± 0.026 (our global sort 1.111x ± 0.025")
    assert row["tokens/s"] == round(1000 / 0.95 / 0.9)
    assert "variable-length attention vs full, one process: 1.051x ± 0.020 over 4 interleaved rounds" in yes.note
    assert "sorted@8: 1.111x ± 0.025" in yes.note and "sorted_per_worker@8: " not in yes.note  # beside, not twice
    # tie: R = 38.4 / 40 = 0.96, residuals -0.6, 1.4, -1.6, 0.8 -> se(R) 0.0678: +4.2% +- 7.4%; our global
    # sort halving the step time is shown beside it and does not decide
    tie = pld.pl_tab15(_bench([9.0, 11.0, 8.0, 10.4], sorted_=[5.0] * 4, rounds=()), P)
    assert tie.agrees == "tie within noise" and "sorted@8: 2.000x ± 0.000" in tie.note
    assert "(gap +4.167 +- 7.4" in tie.note
    # no: R = 1.05 with residuals 0, 0.1, -0.1, 0 -> slower beyond noise
    no = pld.pl_tab15(_bench([10.5, 10.6, 10.4, 10.5], rounds=()), P)
    assert no.agrees == "no" and "1 significant the other way" in no.note
    # no per-step times (a record from before they were kept): no interval, no verdict
    old = _bench([9.0] * 4)
    for r in old["simulated"][8].values():
        r.pop("seconds", None)
    assert pld.pl_tab15(old, P).agrees == "n/a"


def test_tab15_forward_only_flex_arm_beside_the_others():
    bench = _bench([9.0, 9.5, 8.5, 9.0])
    single = bench["single"]
    # flex attention cannot train on the CPU: its forward pass beside the others' forward passes
    for arm, f in (("full", 3000), ("doc_dense", 2400), ("doc_varlen", 3300), ("doc_flex", 2700)):
        single.setdefault(arm, {"tokens_per_s": None, "ratio": None})
        single[arm].update(forward_tokens_per_s=f, forward_ratio=f / 3000)
    rep = pld.pl_tab15(bench, P)
    rows = {r["setting"]: r for r in rep.tables[0]["rows"]}
    flex = rows["document masks, flex attention block mask (flex_doc)"]
    assert flex["tokens/s"].startswith("n/a: no backward") and flex["forward tokens/s"] == 2700
    assert flex["forward vs full"] == 0.9 and rows["variable-length attention (sdpa_varlen)"]["forward vs full"] == 1.1
    assert "doc_flex cannot train here" in rep.tables[0]["caption"] and "forward 0.90x full's forward" in rep.ours
    assert rep.agrees == "yes" and rep.tables[0]["rows"][4]["setting"].startswith("+ minibatch reordering")


def test_every_prolong_target_declares_a_headline_with_the_papers_words():
    from repro.claims import headline_of
    from repro.targets import TARGETS

    ids = [t for t in TARGETS if t.startswith("PL-")]
    assert ids == ["PL-Tab3", "PL-Fig1", "PL-Fig3", "PL-Tab7", "PL-Tab15", "PL-Tab18", "PL-Tab20"]
    for target in ids:
        h = headline_of(target)
        assert h is not None and "'" in h.source, target  # a quote from the paper
    assert [c.b for c in headline_of("PL-Fig3").claims] == ["pl_long0", "pl_long20", "pl_long40", "pl_long80",
                                                             "pl_long100"]
