"""Agreement statistics (by hand and against independent implementations), the Table-5 report,
and the CSV / TREC qrels / golden-data exports of a judging session."""

from __future__ import annotations

import csv
import json
import math
import re

import krippendorff
import numpy as np
import pytest
from statsmodels.stats.inter_rater import fleiss_kappa as statsmodels_fleiss_kappa

from qcat.errors import InputError
from qcat.evaluation.golden.system_metrics import NDCG_DEPTH
from qcat.evaluation.report_files import write_report_files
from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
from qcat.judging.reporting.agreement import (
    agreement,
    count_table,
    fleiss_kappa,
    krippendorff_alpha_ordinal,
    pairwise_agreement,
)
from qcat.judging.reporting.export import golden_from_store, qrels, write_csv, write_golden_csv, write_qrels
from qcat.judging.reporting.report import build_report, draw_all, header_lines, render_html, render_markdown
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade

# --- agreement -------------------------------------------------------------------------------

def test_krippendorff_alpha_ordinal_by_hand():
    # Units (0,0), (0,1), (1,1): coincidences o00 = 2, o01 = o10 = 1, o11 = 2; n0 = n1 = 3, n = 6;
    # δ²(0,1) = (n0 + n1 − (n0 + n1)/2)² = 9; D_o = 2·9 = 18, D_e = 2·3·3·9 / 5 = 32.4: α = 1 − 18/32.4 = 4/9.
    assert krippendorff_alpha_ordinal(count_table([[0, 0], [0, 1], [1, 1]])) == pytest.approx(4 / 9)
    # Units (0,2), (1,1), (2,2): o02 = o20 = 1, o11 = 2, o22 = 2; n = (1, 2, 3); δ²(0,2) = (6 − 2)² = 16,
    # δ²(0,1) = (3 − 1.5)² = 2.25, δ²(1,2) = (5 − 2.5)² = 6.25; D_o = 32,
    # D_e = 2(1·2·2.25 + 1·3·16 + 2·3·6.25)/5 = 36: α = 1 − 32/36 = 1/9 (nominal would give 1 − 5·2/22).
    assert krippendorff_alpha_ordinal(count_table([[0, 2], [1, 1], [2, 2]])) == pytest.approx(1 / 9)
    assert krippendorff_alpha_ordinal(count_table([[1, 1], [1, 1]])) != krippendorff_alpha_ordinal(count_table([[1, 1], [1, 1]]))  # NaN
    assert krippendorff_alpha_ordinal(count_table([[3, 3, 3], [0, 0], [2, 2, 2]])) == pytest.approx(1.0)


def test_fleiss_kappa_by_hand():
    # Fleiss (1971)-style example from Wikipedia: 10 subjects, 14 raters, 5 categories, κ = 0.210.
    table = np.array([[0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
                      [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7]])
    assert fleiss_kappa(table) == pytest.approx(0.20993, abs=1e-5)
    # Two units, 2 raters: (0,0) and (0,1): P = (1, 0), p = (3/4, 1/4): κ = (0.5 − 0.625) / 0.375 = −1/3.
    assert fleiss_kappa(count_table([[0, 0], [0, 1]])) == pytest.approx(-1 / 3)
    with pytest.raises(ValueError):
        fleiss_kappa(count_table([[0, 0], [0, 1, 1]]))
    assert pairwise_agreement(count_table([[0, 0, 1], [2, 2, 2]])) == pytest.approx((2 + 6) / (6 + 6))


@pytest.mark.parametrize("seed", range(6))
def test_agreement_matches_the_krippendorff_package_and_statsmodels(seed):
    rng = np.random.default_rng(seed)
    n_units = int(rng.integers(5, 80))
    truth = rng.integers(0, 4, n_units)
    ratings = np.clip(truth[None, :] + rng.integers(-1, 2, (3, n_units)) * (rng.random((3, n_units)) < 0.4), 0, 3)
    ratings = ratings.astype(np.float64)
    missing = rng.random(ratings.shape) < (0.25 if seed % 2 else 0.0)
    ratings[missing] = np.nan
    units = [[int(x) for x in ratings[:, u] if not np.isnan(x)] for u in range(n_units)]
    expected = krippendorff.alpha(reliability_data=ratings, level_of_measurement="ordinal", value_domain=[0, 1, 2, 3])
    assert krippendorff_alpha_ordinal(count_table(units)) == pytest.approx(expected, abs=1e-10)
    full = count_table([u for u in units if len(u) == 3])
    if len(full):
        assert fleiss_kappa(full) == pytest.approx(statsmodels_fleiss_kappa(full, method="fleiss"), abs=1e-10)
    summary = agreement(units, 3)
    assert summary["units"] == sum(len(u) >= 2 for u in units) and summary["fleiss_kappa_units"] == len(full)


# --- the report ------------------------------------------------------------------------------

def discount(i: int) -> float:
    return 1 / math.log2(i + 1)


def judged_session(store, grades_by_judge: list[dict[str, int]], queries: list[QuerySpec], judges_per_query=3):
    """Store a session and let each judge grade every query with ``grades[listing]`` (both sides)."""
    session_id = store_session(store, "hand", "models/nb", "models/hybrid", queries, judges_per_query=judges_per_query)
    for n, grades in enumerate(grades_by_judge):
        judge, _ = add_judge(store, f"judge {n}")
        while (shown := assignment.next_query(store, judge.id, session_id)) is not None:
            judgments.submit(store, judge.id, shown.query_id,
                             {(i.listing_id, side): grades[i.listing_id] for side, group in
                              (("left", shown.left), ("right", shown.right)) for i in group})
    return session_id


@pytest.fixture
def sqlite_store(sqlite_url):
    upgrade(sqlite_url)
    store = open_store(sqlite_url)
    yield store
    store.dispose()


def test_report_ndcg_star_win_tie_loss_and_agreement_by_hand(sqlite_store):
    queries = [
        QuerySpec("red shoe", "head", [Listing("a"), Listing("b")], [Listing("c")]),
        QuerySpec("blue shoe", "tail", [Listing("d")], [Listing("d")]),
        QuerySpec("oak table", "torso", [Listing("e")], [Listing("f"), Listing("a")]),
    ]
    grades = [{"a": 3, "b": 0, "c": 2, "d": 1, "e": 0, "f": 3},
              {"a": 3, "b": 1, "c": 2, "d": 1, "e": 0, "f": 3},
              {"a": 3, "b": 2, "c": 2, "d": 1, "e": 1, "f": 3}]
    session_id = judged_session(sqlite_store, grades, queries)
    report = build_report(sqlite_store, session_id, bootstrap=200, seed=1)
    ideal = [8 * sum(discount(i) for i in range(1, n + 1)) for n in range(1, NDCG_DEPTH + 1)]
    # red shoe: baseline a (mean 3), b (mean 1); target c (mean 2)
    red = ((8 * discount(1) + 2 * discount(2)) / ideal[1], 4 / ideal[0])
    # blue shoe: the same listing on both sides, mean 1
    blue = (2 / ideal[0], 2 / ideal[0])
    # oak table: baseline e (mean 1/3); target f (3), a (3)
    oak = (2 ** (1 / 3) / ideal[0], 1.0)
    per_query = {q["query"]: (q["baseline"], q["target"]) for q in report["per_query"]}
    assert per_query["red shoe"] == pytest.approx(red)
    assert per_query["blue shoe"] == pytest.approx(blue)
    assert per_query["oak table"] == pytest.approx(oak)
    rows = {r["segment"]: r for r in report["table5"]}
    assert list(rows) == ["head", "torso", "tail", "mix"]
    assert (rows["head"]["win"], rows["head"]["tie"], rows["head"]["loss"]) == (0, 0, 1)
    assert (rows["tail"]["win"], rows["tail"]["tie"], rows["tail"]["loss"]) == (0, 1, 0)
    assert (rows["mix"]["win"], rows["mix"]["tie"], rows["mix"]["loss"]) == (1, 1, 1)
    assert rows["mix"]["baseline"] == pytest.approx(np.mean([red[0], blue[0], oak[0]]))
    assert rows["mix"]["target"] == pytest.approx(np.mean([red[1], blue[1], oak[1]]))
    assert rows["mix"]["delta"] == pytest.approx(rows["mix"]["target"] - rows["mix"]["baseline"])
    assert rows["mix"]["low"] <= rows["mix"]["delta"] <= rows["mix"]["high"]
    assert rows["head"]["relative"] == pytest.approx((red[1] - red[0]) / red[0])
    # agreement over the 7 units (query, side, listing), 3 grades each: red a, b, c; blue d (in both groups,
    # graded once: one unit); oak e, f, a
    mix = {a["segment"]: a for a in report["agreement"]}["mix"]
    assert mix["units"] == 7 and mix["fleiss_kappa_units"] == 7
    units = [[3, 3, 3], [0, 1, 2], [2, 2, 2], [1, 1, 1], [0, 0, 1], [3, 3, 3], [3, 3, 3]]
    assert mix["krippendorff_alpha_ordinal"] == pytest.approx(krippendorff_alpha_ordinal(count_table(units)))
    assert mix["fleiss_kappa"] == pytest.approx(fleiss_kappa(count_table(units)))
    assert report["coverage"] == {"queries": 3, "complete": 3, "complete_by_judges": {"3": 3}, "partial": 0,
                                  "unjudged": 0, "judgments": 24, "judges": 3, "skips": 0, "flagged_queries": 0,
                                  "identical_lists": 1, "shared_listings": 1}
    assert "1 of 3 queries show identical lists in both groups" in "\n".join(header_lines(report))


def test_report_counts_only_queries_with_all_judges_and_writes_files(sqlite_store, tmp_path):
    queries = [QuerySpec(f"q {i}", ("head", "torso", "tail")[i % 3], [Listing(f"a{i}")], [Listing(f"b{i}")])
               for i in range(6)]
    session_id = judged_session(sqlite_store, [{**{f"a{i}": 1 for i in range(6)}, **{f"b{i}": 2 for i in range(6)}}] * 2,
                                queries)
    report = build_report(sqlite_store, "hand", bootstrap=50)
    assert report["coverage"]["complete"] == 0 and report["coverage"]["partial"] == 6
    assert all(r["queries"] == 0 for r in report["table5"])
    report = build_report(sqlite_store, session_id, bootstrap=50, min_judges=2)
    mix = report["table5"][-1]
    assert mix["queries"] == 6 and (mix["win"], mix["tie"], mix["loss"]) == (6, 0, 0) and mix["delta"] > 0
    paths = write_report_files(report, tmp_path / "out", draw_all(report), render_markdown, render_html)
    markdown = paths[1].read_text()
    assert "laid out like eBay's Table 5" in markdown and "| mix | 6 of 6 |" in markdown
    assert "Krippendorff" in paths[2].read_text() and json.loads(paths[0].read_text())["table5"][-1]["win"] == 6
    with pytest.raises(InputError, match="min-judges"):
        build_report(sqlite_store, session_id, min_judges=4)
    with pytest.raises(InputError, match="does not exist"):
        build_report(sqlite_store, "nope")


# --- exports ---------------------------------------------------------------------------------

def test_csv_qrels_and_golden_exports(sqlite_store, sqlite_url, tmp_path):
    queries = [QuerySpec("red shoe", "head", [Listing("a", "Red shoe"), Listing("b")], [Listing("a", "Red shoe")]),
               QuerySpec("oak table", "tail", [Listing("e")], [Listing("f")])]
    grades = [{"a": 3, "b": 0, "e": 1, "f": 2}, {"a": 2, "b": 1, "e": 1, "f": 3}, {"a": 2, "b": 2, "e": 0, "f": 3}]
    session_id = judged_session(sqlite_store, grades, queries)
    assert write_csv(sqlite_store, session_id, tmp_path / "j.csv") == 3 * 5
    rows = list(csv.DictReader((tmp_path / "j.csv").open()))
    assert len(rows) == 15 and set(rows[0]) >= {"query", "segment", "judge", "side", "system", "position", "grade"}
    assert {(r["system"], r["listing_id"], r["position"]) for r in rows if r["query"] == "red shoe"} == \
        {("baseline", "a", "1"), ("baseline", "b", "2"), ("target", "a", "1")}
    assert {r["grade_name"] for r in rows if r["listing_id"] == "a"} == {"Excellent", "Good"}
    # qrels: mean over judges (and sides): a = (3+2+2)·2/6 = 2.33 -> 2, b = 1, e = 0.67 -> 1, f = 2.67 -> 3
    assert write_qrels(sqlite_store, "hand", tmp_path / "q.txt") == 4
    lines = (tmp_path / "q.txt").read_text().splitlines()
    ids = {r["query"]: r["query_id"] for r in rows}
    assert sorted(lines) == sorted([f"{ids['red shoe']} 0 a 2", f"{ids['red shoe']} 0 b 1",
                                    f"{ids['oak table']} 0 e 1", f"{ids['oak table']} 0 f 3"])
    assert all(len(line.split()) == 4 and line.split()[1] == "0" for line in lines)
    golden = golden_from_store(sqlite_url, "hand")
    assert len(golden) == 3 * 4 and not golden.simulated.any()
    pairs = golden.pairs()
    by_pair = {(q, listing): (r, g) for q, listing, r, g in zip(pairs.query, pairs.listing_id, pairs.relevance, pairs.grade)}
    assert by_pair[("red shoe", "a")] == (1, pytest.approx(7 / 3))
    assert by_pair[("oak table", "e")] == (0, pytest.approx(2 / 3))
    assert write_golden_csv(sqlite_store, session_id, tmp_path / "g.csv") == 12
    from qcat.evaluation.golden.importers import load_golden

    assert len(load_golden(tmp_path / "g.csv")) == 12
    assert sorted(qrels(sqlite_store, session_id)) == sorted(qrels(sqlite_store, "hand"))


HOSTILE_JUDGE = "<img src=x onerror=alert(1)>"
HOSTILE_SESSION = "<script>alert(2)</script> | ![t](http://tracker.example/x.png)"
HOSTILE_NOTE = "first line\nsecond | <b onmouseover=alert(3)>bold</b> & [link](javascript:alert(4)) \\| end\r\nlast"


def test_markdown_report_escapes_names_and_notes_like_the_html_report(sqlite_store, tmp_path):
    from markdown_it import MarkdownIt

    queries = [QuerySpec(f"q {i}", ("head", "torso", "tail")[i], [Listing(f"a{i}")], [Listing(f"b{i}")]) for i in range(3)]
    session_id = store_session(sqlite_store, HOSTILE_SESSION, "A", "B", queries, judges_per_query=1)
    judge, _ = add_judge(sqlite_store, HOSTILE_JUDGE)
    while (shown := assignment.next_query(sqlite_store, judge.id, session_id)) is not None:
        judgments.submit(sqlite_store, judge.id, shown.query_id, {(i.listing_id, side): 2 for side, group in
                                                                  (("left", shown.left), ("right", shown.right))
                                                                  for i in group}, flag_note=HOSTILE_NOTE)
    report = build_report(sqlite_store, session_id, bootstrap=10)
    markdown = write_report_files(report, tmp_path / "out", draw_all(report), render_markdown, render_html)[1].read_text()
    notes = markdown.split("### Flag notes")[1].strip().splitlines()
    assert notes[0] == "| query id | judge | note |" and len(notes) == 2 + 3  # header, rule, one line per note
    for row in notes[2:]:
        assert row.count(" | ") == 2 and len(re.split(r"(?<!\\)\|", row)) == 3 + 2  # 3 cells: no unescaped extra pipe
        assert "&lt;img src=x onerror=alert(1)&gt;" in row and "first line second \\| &lt;b" in row
    html = MarkdownIt("commonmark").enable("table").render(markdown)  # raw HTML allowed, as most renderers do
    for raw in ("<img src=x", "<script", "<b ", "onerror=alert(1)>", 'href="javascript', 'src="http://tracker'):
        assert raw not in html, raw
    assert html.count("<img") == 1 and '<img src="plots/ndcg_by_segment.svg"' in html  # only the report's plot
    assert "&lt;img src=x onerror=alert(1)&gt;" in html and "&lt;script&gt;alert(2)&lt;/script&gt;" in html
    note_rows = html.split("Flag notes</h3>")[1].split("</table>")[0].split("<tr>")[2:]
    assert len(note_rows) == 3 and all(row.count("<td") == 3 for row in note_rows)
    assert "second | &lt;b onmouseover=alert(3)&gt;bold&lt;/b&gt; &amp; [link](javascript:alert(4)) \\| end last" in html
