"""Gold questions (issue 12) on SQLite and on PostgreSQL: ``add_gold``'s checks, every judge gets
every gold query mixed in among the regular ones, gold queries stay out of the session's results
and exports, per-judge agreement with the known grades, and ``qcat judge add-gold`` end to end."""

from __future__ import annotations

import csv
import json
import shutil
from collections import Counter
from datetime import timedelta

import pytest
from judging_fixtures import grade_all, qcat, run_threads, toy_queries
from sqlalchemy import func, select, update

from qcat.errors import InputError
from qcat.evaluation.report_files import write_report_files
from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.gold import add_gold, gold_queries, judge_agreement
from qcat.judging.grading.judges import add_judge, authenticate
from qcat.judging.grading.sessions import Listing, QuerySpec, session_overview, store_session
from qcat.judging.reporting.export import golden_from_store, qrels, write_csv
from qcat.judging.reporting.report import build_report, draw_all, render_html, render_markdown
from qcat.judging.store.connection import open_store
from qcat.judging.store.models import Assignment, GoldGrade, SessionQuery, utcnow


def write_gold(path, rows, delimiter=","):
    with open(path, "w", encoding="utf-8", newline="") as handle:
        writer = csv.writer(handle, delimiter=delimiter)
        writer.writerow(("query", "listing_id", "grade"))
        writer.writerows(rows)
    return path


def full_rows(query: str, i: int, grade=2, per_list: int = 5) -> list[tuple]:
    """A grade for every listing of toy query ``i`` (baseline L{i}-0..4, target L{i}-2..6)."""
    return [(query, f"L{i}-{j}", grade) for j in range(per_list + 2)]


def judge_to_the_end(store, judge_id: int, session_id: int, grade_of=lambda shown, item: 2) -> list[int]:
    seen = []
    while (shown := assignment.next_query(store, judge_id, session_id)) is not None:
        seen.append(shown.query_id)
        judgments.submit(store, judge_id, shown.query_id,
                         {(item.listing_id, side): grade_of(shown, item) for side, group in
                          (("left", shown.left), ("right", shown.right)) for item in group})
    return seen


# --- add_gold --------------------------------------------------------------------------------

@pytest.mark.parametrize("rows, message", [
    ([("no such query", "L0-0", 1)], ":2: query 'no such query' is not in the session"),
    (full_rows("query 0", 0) + [("query 0", "L1-0", 1)], ":9: listing 'L1-0' is not shown for query 'query 0'"),
    ([("query 0", f"L0-{j}", 4 if j == 3 else 1) for j in range(7)], ":5: grade '4' is not a whole number in 0..3 (0 (Off-topic)"),
    ([("query 0", f"L0-{j}", "good" if j == 0 else 1) for j in range(7)], ":2: grade 'good' is not a whole number in 0..3"),
    (full_rows("query 0", 0, 1) + [("query 0", "L0-3", 2)],
     ":9: listing 'L0-3' of query 'query 0' is graded 2 here and 1 on line 5"),
    (full_rows("query 0", 0)[:4] + full_rows("query 1", 1),
     "gold query 'query 0' needs a grade for every listing shown for it; 3 missing: 'L0-4', 'L0-5', 'L0-6'"),
    ([], "holds no row to use (a gold questions file"),
])
def test_add_gold_refuses_a_bad_file_naming_file_line_and_value_and_stores_nothing(store, tmp_path, rows, message):
    session_id = store_session(store, "s", "A", "B", toy_queries(4))
    path = write_gold(tmp_path / "gold.csv", rows)
    with pytest.raises(InputError) as error:
        add_gold(store, session_id, path)
    assert message in str(error.value) and str(path) in str(error.value) and "\n" not in str(error.value)
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(GoldGrade)) == 0
        assert session.scalar(select(func.count()).select_from(SessionQuery).where(SessionQuery.gold)) == 0


def test_add_gold_checks_the_header_and_the_file(store, tmp_path):
    session_id = store_session(store, "s", "A", "B", toy_queries(2))
    (tmp_path / "bad.csv").write_text("query,listing,grade\nquery 0,L0-0,1\n")
    with pytest.raises(InputError, match="listing_id missing"):
        add_gold(store, session_id, tmp_path / "bad.csv")
    with pytest.raises(InputError, match="--file .*missing.csv: no such file"):
        add_gold(store, session_id, tmp_path / "missing.csv")
    with pytest.raises(InputError, match="judging session 'nope' does not exist"):
        add_gold(store, "nope", write_gold(tmp_path / "g.csv", full_rows("query 0", 0)))


def test_add_gold_reads_tsv_ignores_other_columns_and_a_rerun_replaces_the_grades(store, tmp_path):
    session_id = store_session(store, "s", "A", "B", toy_queries(4))
    added = add_gold(store, "s", write_gold(tmp_path / "g.tsv", full_rows("query 1", 1, 3) + full_rows("query 2", 2, 0),
                                            delimiter="\t"))
    assert (added.queries, added.grades, added.already_judged, added.gold_queries) == (2, 14, 0, 2)
    path = tmp_path / "g.csv"
    path.write_text("judge,query,listing_id,grade,side\n" + "".join(
        f"ann,query 1,L1-{j},1,left\nann,query 1,L1-{j},1,right\n" for j in range(7)))  # the same grade twice: fine
    added = add_gold(store, session_id, path)
    assert (added.queries, added.grades, added.gold_queries) == (1, 7, 2)
    assert [(text, n) for _, text, n in gold_queries(store, session_id)] == [("query 1", 7), ("query 2", 7)]
    with store.sessions() as session:
        grades = dict(session.execute(select(GoldGrade.listing_id, GoldGrade.grade)).all())
    assert {grades[f"L1-{j}"] for j in range(7)} == {1} and {grades[f"L2-{j}"] for j in range(7)} == {0}


# --- assignment ------------------------------------------------------------------------------

@pytest.mark.slow
def test_every_judge_gets_every_gold_query_once_mixed_in_and_regular_queries_keep_their_quota(store, tmp_path):
    # 12 regular and 2 gold queries, 3 judges per query, 4 judges: K = min(5, 12 // 3) = 4
    session_id = store_session(store, "s", "A", "B", toy_queries(14))
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", full_rows("query 3", 3) + full_rows("query 10", 10)))
    assert assignment.gold_spacing(12, 2) == 4 and assignment.gold_spacing(4500, 20) == 5
    assert assignment.gold_spacing(3, 5) == 1
    with store.sessions() as session:
        gold = set(session.scalars(select(SessionQuery.id).where(SessionQuery.gold)))
    judges = [add_judge(store, f"judge {n}")[0] for n in range(4)]
    seen = [judge_to_the_end(store, judge.id, session_id) for judge in judges]
    # the first judge gets 12 regular queries, the i-th gold one after (i-1)*4 + P regular ones, P = their
    # phase in 1..4 (issue 24, defect 10: gold sits at different places, in a different order, per judge)
    phase = assignment.gold_phase(judges[0].id, 4)
    assert [i for i, q in enumerate(seen[0]) if q in gold] == [phase, phase + 4 + 1] and len(seen[0]) == 14
    phases = {assignment.gold_phase(judge_id, 5) for judge_id in range(1, 41)}
    orders = {tuple(assignment.gold_order(judge_id, [7, 8, 9])) for judge_id in range(1, 41)}
    assert len(phases) == 5 and len(orders) == 6  # 40 judges: every phase and every order of 3 gold queries
    assert len({tuple(i for i, q in enumerate(s) if q in gold) for s in seen[:3]}) > 1 or \
        len({tuple(q for q in s if q in gold) for s in seen[:3]}) > 1  # these judges differ in place or order
    assert all(set(s) >= gold and len(s) == len(set(s)) for s in seen)  # every judge, each gold query once
    assert len(seen[3]) == 2  # the regular queries had their 3 judges: the 4th judge still gets the gold ones
    with store.sessions() as session:
        done = Counter(session.scalars(select(Assignment.query_id).where(Assignment.status == "done")))
    assert {q: n for q, n in done.items() if q in gold} == {q: 4 for q in gold}  # more than judges_per_query
    assert sorted(n for q, n in done.items() if q not in gold) == [3] * 12
    counts = assignment.progress(store, judges[0].id, session_id)
    assert (counts["queries"], counts["complete_queries"], counts["judgments_done"], counts["judgments_needed"]) == \
        (12, 12, 36, 36)
    # the judge's own count leaves gold out like the session's (issue 24, defect 10): comparing them shows no gold
    assert (counts["judged"], counts["given"]) == (12, 14)
    overview = session_overview(store)[0]
    assert (overview["queries"], overview["gold"], overview["complete"]) == (12, 2, 12)


@pytest.mark.slow
def test_concurrent_judges_each_get_every_gold_query_and_regular_queries_end_with_their_quota(store, tmp_path):
    session_id = store_session(store, "s", "A", "B", toy_queries(33))
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", [row for i in (2, 17, 30)
                                                               for row in full_rows(f"query {i}", i)]))
    judges = [add_judge(store, f"judge {n}")[0] for n in range(6)]
    seen = run_threads(lambda n: judge_to_the_end(store, judges[n].id, session_id), len(judges))
    with store.sessions() as session:
        gold = set(session.scalars(select(SessionQuery.id).where(SessionQuery.gold)))
        done = Counter(session.scalars(select(Assignment.query_id).where(Assignment.status == "done")))
        claims = dict(session.execute(select(SessionQuery.id, SessionQuery.claims)).all())
    assert all(set(s) >= gold and len(s) == len(set(s)) for s in seen)
    assert {q: done[q] for q in gold} == {q: 6 for q in gold}
    assert sorted(n for q, n in done.items() if q not in gold) == [3] * 30
    assert claims == {q: done[q] for q in claims}


def test_a_skipped_gold_query_is_not_given_again_and_gold_claims_do_not_expire(store, tmp_path):
    session_id = store_session(store, "s", "A", "B", toy_queries(3), judges_per_query=1)
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", full_rows("query 1", 1)))
    ann, bob = (add_judge(store, name)[0] for name in ("ann", "bob"))
    first = assignment.next_query(store, ann.id, session_id)  # K = max(1, min(5, 2 // 2)) = 1
    judgments.submit(store, ann.id, first.query_id, grade_all(first, 1))
    gold = assignment.next_query(store, ann.id, session_id)
    assert gold.text == "query 1" and first.text == "query 0"
    assignment.skip(store, ann.id, gold.query_id)
    last = assignment.next_query(store, ann.id, session_id)
    assert last.text == "query 2"
    judgments.submit(store, ann.id, last.query_id, grade_all(last, 1))
    assert assignment.next_query(store, ann.id, session_id) is None  # the skipped gold query never comes back
    # no regular query is left for bob: he gets the gold one; left idle past the timeout, it is not
    # released (it keeps nobody waiting) and stays his
    assert assignment.next_query(store, bob.id, session_id).query_id == gold.query_id
    with store.transaction() as session:
        session.execute(update(Assignment).where(Assignment.judge_id == bob.id)
                        .values(active_at=utcnow() - timedelta(hours=2)))
    assert assignment.next_query(store, ann.id, session_id) is None
    assert assignment.release(store, judge_id=bob.id) == []
    with store.sessions() as session:
        assert session.scalar(select(Assignment.status).where(Assignment.judge_id == bob.id)) == "open"
    assert assignment.next_query(store, bob.id, session_id).query_id == gold.query_id


def test_a_released_claim_of_a_query_made_gold_is_taken_back_and_its_grades_count(store, tmp_path):
    session_id = store_session(store, "s", "A", "B", toy_queries(3), judges_per_query=1)
    ann, bob = (add_judge(store, name)[0] for name in ("ann", "bob"))
    held = assignment.next_query(store, ann.id, session_id)
    assert [r.query_id for r in assignment.release(store, judge_id=ann.id)] == [held.query_id]
    other = assignment.next_query(store, bob.id, session_id)
    assert other.query_id == held.query_id  # bob took the released place
    judgments.submit(store, bob.id, other.query_id, grade_all(other, 2))
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", full_rows(held.text, int(held.text.split()[1]))))
    with store.sessions() as session:  # open again: ann's grades, still on her screen, are wanted
        assert session.scalar(select(Assignment.status).where(Assignment.judge_id == ann.id)) == "open"
    judgments.submit(store, ann.id, held.query_id, grade_all(held, 2))  # not refused as "already judged by 1"
    assert [(r["judge"], r["exact"]) for r in judge_agreement(store, session_id)] == [("ann", 1.0), ("bob", 1.0)]


# --- results, report, exports ----------------------------------------------------------------

def two_sessions(store, tmp_path):
    """The same two regular queries, and in the first session a third query made gold, whose
    grades would move every number: judged by three judges in each session."""
    regular = [QuerySpec("red shoe", "head", [Listing("a"), Listing("b")], [Listing("c")]),
               QuerySpec("oak table", "tail", [Listing("e")], [Listing("f"), Listing("a")])]
    trap = QuerySpec("gold lamp", "torso", [Listing("x")], [Listing("y"), Listing("z")])
    with_gold = store_session(store, "with gold", "A", "B", regular[:1] + [trap] + regular[1:], seed=5)
    plain = store_session(store, "plain", "A", "B", regular, seed=5)
    add_gold(store, with_gold, write_gold(tmp_path / "g.csv", [("gold lamp", "x", 0), ("gold lamp", "y", 3),
                                                              ("gold lamp", "z", 3)]))
    grades = [{"a": 3, "b": 0, "c": 2, "e": 1, "f": 3, "x": 3, "y": 0, "z": 0},
              {"a": 2, "b": 1, "c": 2, "e": 0, "f": 3, "x": 3, "y": 0, "z": 1},
              {"a": 3, "b": 2, "c": 1, "e": 1, "f": 2, "x": 2, "y": 1, "z": 0}]
    for n, grade in enumerate(grades):
        judge, _ = add_judge(store, f"judge {n}")
        for session_id in (with_gold, plain):
            judge_to_the_end(store, judge.id, session_id, lambda shown, item: grade[item.listing_id])
    return with_gold, plain


def test_gold_queries_are_left_out_of_the_report_and_every_export(store, tmp_path):
    with_gold, plain = two_sessions(store, tmp_path)
    report, expected = (build_report(store, key, bootstrap=50, seed=3) for key in (with_gold, plain))
    for field in ("baseline", "target", "delta", "win", "tie", "loss", "queries", "available"):
        assert [r[field] for r in report["table5"]] == pytest.approx([r[field] for r in expected["table5"]], nan_ok=True), field
    assert json.dumps(report["agreement"]) == json.dumps(expected["agreement"])  # NaN where undefined, as NaN
    assert report["coverage"] == expected["coverage"] and report["coverage"]["queries"] == 2
    assert report["checks"]["mean_grade_by_system"] == expected["checks"]["mean_grade_by_system"]
    assert "gold lamp" not in {q["query"] for q in report["per_query"]}
    assert report["gold"]["queries"] == 1 and expected["gold"] == {"queries": 0, "judges": []}
    with store.sessions() as session:
        gold_id = session.scalar(select(SessionQuery.id).where(SessionQuery.text == "gold lamp"))
    assert gold_id not in {q for q, _, _ in qrels(store, with_gold, min_judges=1)}
    assert write_csv(store, with_gold, tmp_path / "j.csv", min_judges=1) == write_csv(store, plain, tmp_path / "p.csv")
    assert "gold lamp" not in (tmp_path / "j.csv").read_text()
    golden = golden_from_store(store.engine.url.render_as_string(hide_password=False), "with gold")
    assert "gold lamp" not in set(golden.pairs().query) and len(golden) == len(
        golden_from_store(store.engine.url.render_as_string(hide_password=False), "plain"))


@pytest.mark.slow
def test_each_judges_agreement_with_the_gold_by_hand_lowest_first(store, tmp_path):
    # gold query 0: 10 listings, L0-0..4 (baseline) and L0-5..9 (target); query 1: x in both groups, y, z
    queries = [QuerySpec("q0", "head", [Listing(f"L0-{j}") for j in range(5)], [Listing(f"L0-{j}") for j in range(5, 10)]),
               QuerySpec("q1", "tail", [Listing("x"), Listing("y")], [Listing("x"), Listing("z")]),
               QuerySpec("q2", "torso", [Listing("r")], [Listing("s")])]
    session_id = store_session(store, "s", "A", "B", queries, judges_per_query=1)
    known = {**{f"L0-{j}": j % 4 for j in range(10)}, "x": 3, "y": 0, "z": 1}
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", [("q1" if k in "xyz" else "q0", k, g)
                                                               for k, g in known.items()]))
    off = {"careful": {}, "careless": {f"L0-{j}": 1 for j in range(10)} | {"x": -1, "y": 1, "z": 1},
           "ann": {"L0-2": 1, "L0-6": -2}}  # ann: 8 of q0's 10 exact, |diff| 1 + 2 = 3: mean 0.3, 9 within 1
    judges = {name: add_judge(store, name)[0] for name in ("careful", "careless", "ann", "skipper")}
    for name in ("careful", "careless", "ann"):
        judge_to_the_end(store, judges[name].id, session_id,
                         lambda shown, item, name=name: min(3, max(0, known.get(item.listing_id, 2)
                                                                      + off[name].get(item.listing_id, 0))))
    while (shown := assignment.next_query(store, judges["skipper"].id, session_id)) is not None:
        assignment.skip(store, judges["skipper"].id, shown.query_id)  # a skipped gold query counts for nothing
    rows = judge_agreement(store, session_id)
    assert [r["judge"] for r in rows] == ["careless", "ann", "careful"]
    careless, ann, careful = rows
    # ann: q0 8 of 10 exact (|diff| 1 + 2), q1's 3 listings (x once though shown twice) exact
    assert (ann["queries"], ann["listings"]) == (2, 13)
    assert ann["exact"] == pytest.approx(11 / 13) and ann["mean_abs_diff"] == pytest.approx(3 / 13)
    assert ann["within_one"] == pytest.approx(12 / 13)
    assert (careful["exact"], careful["mean_abs_diff"], careful["within_one"]) == (1.0, 0.0, 1.0)
    # careless: grades clipped at 3 where the known grade is 3 (L0-3, L0-7): 2 exact of 13, the rest 1 off
    assert careless["exact"] == pytest.approx(2 / 13) and careless["mean_abs_diff"] == pytest.approx(11 / 13)
    assert careless["within_one"] == 1.0


def test_judge_agreement_matches_ann_8_of_10_on_a_single_gold_query(store, tmp_path):
    queries = [QuerySpec("q0", "head", [Listing(f"L{j}") for j in range(5)], [Listing(f"L{j}") for j in range(5, 10)]),
               QuerySpec("q1", "tail", [Listing("r")], [Listing("s")])]
    session_id = store_session(store, "s", "A", "B", queries)
    known = {f"L{j}": j % 4 for j in range(10)}
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", [("q0", k, g) for k, g in known.items()]))
    judge, _ = add_judge(store, "ann")
    wrong = {"L1": 2, "L6": 0}  # known 1 and 2: off by 1 and by 2
    judge_to_the_end(store, judge.id, session_id, lambda shown, item: wrong.get(item.listing_id,
                                                                                  known.get(item.listing_id, 1)))
    [row] = judge_agreement(store, session_id)
    assert (row["judge"], row["queries"], row["listings"]) == ("ann", 1, 10)
    assert (row["exact"], row["mean_abs_diff"], row["within_one"]) == pytest.approx((0.8, 0.3, 0.9))


HOSTILE_JUDGE = "<img src=x onerror=alert(1)> | [x](javascript:y)"


@pytest.mark.slow
def test_the_report_shows_the_gold_table_with_judge_names_escaped(store, tmp_path):
    session_id = store_session(store, "s", "A", "B", toy_queries(3), judges_per_query=1)
    add_gold(store, session_id, write_gold(tmp_path / "g.csv", full_rows("query 1", 1, 2)))
    for name, grade in ((HOSTILE_JUDGE, 0), ("bob", 2)):
        judge_to_the_end(store, add_judge(store, name)[0].id, session_id, lambda shown, item, g=grade: g)
    report = build_report(store, session_id, bootstrap=10)
    assert [(g["judge"], g["exact"]) for g in report["gold"]["judges"]] == [(HOSTILE_JUDGE, 0.0), ("bob", 1.0)]
    paths = write_report_files(report, tmp_path / "out", draw_all(report), render_markdown, render_html)
    markdown, html = paths[1].read_text(), paths[2].read_text()
    table = markdown.split("### Agreement with gold questions")[1].split("###")[0].strip().splitlines()
    assert table[0] == ("| judge | gold queries judged | gold listings graded | exact agreement (%) | "
                        "mean absolute difference | within 1 grade (%) |")
    assert table[2] == "| &lt;img src=x onerror=alert(1)&gt; \\| \\[x\\](javascript:y) | 1 | 7 | 0.00 | 2.00 | 0.00 |"
    assert table[3] == "| bob | 1 | 7 | 100.00 | 0.00 | 100.00 |"
    assert "1 gold question (" in markdown and "<img src=x" not in html and "&lt;img src=x onerror" in html


# --- the CLI ---------------------------------------------------------------------------------

@pytest.mark.slow
def test_qcat_judge_add_gold_from_an_exported_judges_grades_then_the_report_shows_the_table(demo_db, tmp_path):
    path, tokens = demo_db
    db = tmp_path / "judged.db"
    shutil.copy(path, db)
    store = open_store(str(db))
    ann, bob, cy = (authenticate(store, token) for token in tokens)
    judge_to_the_end(store, ann.id, 1, lambda shown, item: item.position % 4)  # ann, the expert, judges first
    store.dispose()
    exported = qcat("judge", "export", "demo", "--url", db, "--golden", tmp_path / "all.csv", "--min-judges", "1")
    assert exported.returncode == 0, exported.stderr
    with open(tmp_path / "all.csv", encoding="utf-8") as handle:
        rows = [r for r in csv.DictReader(handle) if r["judge"] == "ann"]
    first = rows[0]["query"]
    with open(tmp_path / "gold.csv", "w", encoding="utf-8", newline="") as handle:  # one query, ann's grades
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(r for r in rows if r["query"] == first)
    bad = write_gold(tmp_path / "bad.csv", [(first, rows[0]["listing_id"], 7)])
    refused = qcat("judge", "add-gold", "--session", "demo", "--file", bad, "--url", db)
    assert refused.returncode == 2 and f"--file {bad}:2: grade '7' is not a whole number in 0..3" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1 and "Traceback" not in refused.stderr
    added = qcat("judge", "add-gold", "--session", "demo", "--file", tmp_path / "gold.csv", "--url", db)
    assert added.returncode == 0, added.stderr
    assert "1 gold question with" in added.stderr and "1 already judged" in added.stderr
    store = open_store(str(db))
    for k, judge in enumerate((bob, cy)):
        judge_to_the_end(store, judge.id, 1, lambda shown, item, k=k: (item.position + k) % 4)
    store.dispose()
    report = qcat("judge", "report", "demo", "--url", db, "--out", tmp_path / "report", "--bootstrap", 40, "--json")
    assert report.returncode == 0, report.stderr
    data = json.loads(report.stdout)
    assert data["coverage"]["queries"] == 5 and data["coverage"]["complete"] == 5 and data["gold"]["queries"] == 1
    agreement = {g["judge"]: g for g in data["gold"]["judges"]}
    assert set(agreement) == {"ann", "bob", "cy"} and agreement["ann"]["exact"] == 1.0 == agreement["bob"]["exact"]
    assert agreement["cy"]["exact"] == 0.0 and data["gold"]["judges"][0]["judge"] == "cy"  # lowest first
    markdown = (tmp_path / "report" / "report.md").read_text()
    assert "### Agreement with gold questions" in markdown and "| cy | 1 |" in markdown
    listing = qcat("judge", "sessions", "--url", db)
    assert "5 queries, 5 with all 3 judges" in listing.stdout
