"""Hand-built evaluation records shared by the report tests (``tiny`` profile: base window 256, target 1024)."""

from repro.tasks.summary import MULTIHOP, POSITION_SPECS, RULER_TASKS


def rows(task, length, scores, eval_seed=0, depth=0.5):
    return [{"task": task, "length": length, "depth": depth, "seed": i, "eval_seed": eval_seed, "n_tokens": length,
             "prediction": "", "references": ["x"], "score": float(s)} for i, s in enumerate(scores)]


def record(results, skipped=()):
    return {"results": results, "skipped": [{"task": t, "length": L, "depth": 0.5, "eval_seed": 0, "minimum": m}
                                            for t, L, m in skipped], "seconds": 0.0}


# flt at the target: MK-1 1.0, MK-2 0.0, MK-3 0.5 (multikey 0.5), MV 1.0, MQ 0.0 -> NIAH(M) 0.5;
# every other RULER task 0.25 -> RULER-13 = (1 + 0 + 0.5 + 1 + 0 + 8 * 0.25) / 13 = 4.5 / 13
FLT_TARGET = {"niah_multikey_1": 1.0, "niah_multikey_2": 0.0, "niah_multikey_3": 0.5, "niah_multivalue": 1.0,
              "niah_multiquery": 0.0}


def make_suite(cwe_skipped_at_base_window=True):
    base_rows, flt_rows = [], []
    for t in RULER_TASKS:
        # base at its window: NIAH tasks 1.0 (doable), vt/fwe/qa 0.0 (not), cwe skipped
        if t == "cwe" and cwe_skipped_at_base_window:
            pass
        else:
            base_rows += rows(t, 256, [1.0, 1.0] if t.startswith("niah_") else [0.0, 0.0])
        base_rows += rows(t, 1024, [0.0, 0.0])
        flt_rows += rows(t, 1024, [FLT_TARGET.get(t, 0.25)] * 2)
        flt_rows += rows(t, 256, [1.0, 1.0] if t.startswith("niah_") else [0.5, 0.5])
    for h, (b, f) in zip(MULTIHOP, [(1.0, 1.0), (0.0, 0.5), (0.0, 0.25)]):
        base_rows += rows(h, 256, [b]) + rows(h, 1024, [0.0])
        flt_rows += rows(h, 256, [f]) + rows(h, 1024, [f])
    for sp, v in zip(POSITION_SPECS, (1.0, 0.5, 0.0, 0.5)):
        flt_rows += rows(sp, 1024, [v])
        base_rows += rows(sp, 1024, [0.0])
    skipped = [("cwe", 256, 300)] if cwe_skipped_at_base_window else []
    return {"base": {"suite": record(base_rows, skipped)}, "flt": {"suite": record(flt_rows)}}
