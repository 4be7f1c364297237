"""Context Denoising Training's evaluation table (CD-Tab2): RULER and multi-hop accuracy by length, the
multi-hop task standing in for BABILong."""

from __future__ import annotations

from repro.profiles import Profile
from repro.reports.common import Report, missing_note, scores_of, direction_agrees, scale_note, show
from repro.reports.testbed import doable_caption, base_can_do, doable_ruler
from repro.tasks.summary import MULTIHOP, RULER_TASKS

CD_NAMES = {"base": "Llama-3-8B-Base", "flt": "+ CE", "longce": "+ LongCE", "cdt": "+ CDT"}
CD_TAB2 = {"base": (None, None, 13.00), "flt": (36.01, 13.82, 29.56), "longce": (84.02, 71.50, 33.48),
           "cdt": (84.76, 73.40, 33.76)}
"""CDT Table 2 (Llama-3-8B-Base rows): RULER 32K, 64K, BABILong average 4K-64K."""


def cd_tab2(suite, p: Profile) -> Report:
    """RULER and multi-hop (BABILong-style) accuracy by length per checkpoint."""
    target = p.extend.target_window
    doable = doable_ruler(suite, p)
    can = base_can_do(suite, p)
    hops = [t for t in MULTIHOP if t in p.eval.suite_tasks]
    rows = [{"model": "base can do it at its window", "length": p.base.window,
             **{f"{t.split('_')[1]}-hop": can[t]["label"] for t in hops}}]
    mh_avg = {}
    for name in suite:
        s = scores_of(suite, name, "suite")
        upto = [L for L in p.eval.lengths if L <= target]
        per_len = [s.average(hops, L) for L in upto]
        known = [v for v in per_len if v is not None]
        mh_avg[name] = sum(known) / len(known) if known else None
        for L in p.eval.lengths:
            pap = CD_TAB2.get(name)
            rows.append({"model": name, "length": L,
                         "RULER-13": show(s.average(RULER_TASKS, L), missing_note(s, RULER_TASKS, L)),
                         "RULER-doable": show(s.average(doable, L), "n/a (no task the base can do)"),
                         **{f"{t.split('_')[1]}-hop": s.cell(t, L) for t in hops},
                         "multi-hop mean": show(s.average(hops, L), missing_note(s, hops, L)),
                         "paper RULER 32K/64K, BABILong avg": (
                             f"{CD_NAMES[name]}: {pap[0] or '-'} / {pap[1] or '-'}, {pap[2]}" if pap else "-"),
                         "scale": scale_note(p)})
    verdict, how = direction_agrees(mh_avg, {k: v[2] for k, v in CD_TAB2.items()})
    cols = list(dict.fromkeys(k for r in rows for k in r))
    ours = "; ".join(f"{n} multi-hop mean over lengths <= {target}: {show(v)}" for n, v in mh_avg.items())
    cap = (f"CD-Tab2 analog: RULER and multi-hop accuracy (percent) by length; multi-hop stands in for BABILong. "
           f"{doable_caption(suite, p, hops)} Scale: {scale_note(p)}.")
    return Report("CD-Tab2", [{"name": "CD-Tab2", "rows": rows, "columns": cols, "caption": cap}],
                  ours=ours, agrees=verdict, note=f"multi-hop mean (BABILong avg in the paper): {how}")
