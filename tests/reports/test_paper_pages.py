"""The paper pages' results sections are generated from the committed records, and nothing else on them is a number
typed by hand."""

import json
import shutil

import pytest

from repro.papers import paper_of
from repro.reports import paper_pages
from repro.reports.paper_pages import (BEGIN, END, MISSING, generated_pages, pages, render, results_block, stale,
                                       typed_numbers)


def test_committed_pages_equal_the_generator_output_over_the_committed_records():
    out = stale()
    assert not out, (f"out of date: {', '.join(map(str, out))}; regenerate with "
                     "python -m repro.reports.paper_pages --write")


def test_no_number_is_typed_by_hand_outside_the_generated_blocks():
    found = {p.paper: typed_numbers(p.path.read_text(encoding="utf-8")) for p in pages()}
    assert not any(found.values()), found


@pytest.mark.parametrize("planted", [
    "LongRecipe reaches 15.2 on NIAH(M) at the target.",
    "a CDT step is 2.02x a CE step",
    "every share lies within 2.5 points of the others",
    "the three CDT seeds took 12 min",
])
def test_a_hand_typed_result_number_is_caught(tmp_path, planted):
    page = next(p for p in pages() if p.paper == "cdt")
    copy = tmp_path / "cdt.md"
    shutil.copy(page.path, copy)
    text = copy.read_text(encoding="utf-8")
    text = text.replace("## Where we differ from the paper, and why\n",
                        f"## Where we differ from the paper, and why\n\n{planted}\n", 1)
    copy.write_text(text, encoding="utf-8")
    found = typed_numbers(copy.read_text(encoding="utf-8"))
    assert [line for _, line in found] == [planted]


def test_allowed_places_are_narrow():
    ok = ("Table 2 and Fig. 3 of §6.3, Eq. 1, App. B, `CD-Fig8`, CD-Tab2 and RP-Tab1/2 at 64K on Llama-3-8B; "
          "[x](../../figures/CD-Fig3.png), `ckpt-200`, bf16.")
    assert typed_numbers(ok) == []
    for bad in ("ours 0.93", "3 seeds", "2x the target", "item five: 41 s", "RP-Tab1/2 (44.4 vs 43.6)"):
        assert typed_numbers(bad), bad
    inside = f"{BEGIN}\n| LR-Tab1 | 18.0 |\n{END}\n"
    assert typed_numbers(inside) == []


def test_a_stale_page_is_found_and_rewritten(tmp_path):
    repo = tmp_path / "repo"
    shutil.copytree(paper_pages.REPO / "figures", repo / "figures", ignore=shutil.ignore_patterns("*.png", "*.pdf"))
    (repo / "docs" / "papers").mkdir(parents=True)
    for p in generated_pages():
        (repo / p.path.relative_to(paper_pages.REPO)).write_text(
            p.path.read_text(encoding="utf-8"), encoding="utf-8")
    assert stale(repo) == {}
    records = json.loads((repo / "figures" / "index.json").read_text(encoding="utf-8"))
    changed = next(t for t, r in records.items() if paper_of(t) and r.get("agrees") == "partly")
    records[changed]["agrees"] = "yes"  # one paper's verdict changes: only its page goes stale
    (repo / "figures" / "index.json").write_text(json.dumps(records, indent=1), encoding="utf-8")
    out = stale(repo)
    assert len(out) == 1
    [(path, text)] = out.items()
    paper = paper_of(changed)
    assert path.name == f"{paper}.md" and text == render(path.read_text(encoding="utf-8"),
                                                         results_block(paper, repo / "figures"))


def test_rows_without_provenance_say_so_and_missing_targets_are_named(tmp_path):
    (tmp_path / "index.json").write_text('{"CD-Fig5": {"profile": "tiny", "ours": "r = 0.5", "agrees": "yes", '
                                         '"files": ["CD-Fig5.csv"]}}', encoding="utf-8")
    block = results_block("cdt", tmp_path)
    row = next(line for line in block.splitlines() if line.startswith("| [CD-Fig5]"))
    assert "| r = 0.5 | yes | " + MISSING + " | " + MISSING + " | " + MISSING + " |" in row
    assert "| CD-Fig3 |" in block and "not in this run" in block and "**CD-Tab2**: not in this run." in block


def test_render_needs_one_pair_of_markers():
    with pytest.raises(ValueError, match="results:begin"):
        render("no markers here", "x")
    assert render(f"a\n{BEGIN}\nold\n{END}\nb", f"{BEGIN}\nnew\n{END}") == f"a\n{BEGIN}\nnew\n{END}\nb"
