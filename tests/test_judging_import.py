"""Result lists from any search system (qcat.judging.grading.imports, ``create-session --results``): the
formats, bad rows reported by file and line, segments, ``--differing-only``, exports of such a
session, and the report's time per judgment with its flag on much faster judges."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from judging_fixtures import grade_all, qcat
from sqlalchemy import select

from qcat.errors import InputError
from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.imports import read_results
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import Listing, QuerySpec, select_imported, store_session
from qcat.judging.grading.timing import timing_summary
from qcat.judging.store.models import Assignment


def jsonl(path, rows):
    path.write_text("".join((row if isinstance(row, str) else json.dumps(row)) + "\n" for row in rows))
    return path


def test_two_files_bad_rows_by_line_top_five_and_segments(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", [
        {"query": "red  shoes", "rank": 1, "listing_id": "L1", "title": "Red", "segment": "head",
         "image_url": "https://img/1.png", "link": "https://shop/1", "price": "9.5", "brand": "Unknown"},
        {"query": "red shoes", "rank": 2, "listing_id": "L2"},
        {"query": "red shoes", "rank": 2, "listing_id": "L9"},  # rank given twice
        {"query": "red shoes", "rank": 3, "listing_id": "L1"},  # listing given twice
        {"query": "red shoes", "rank": "x", "listing_id": "L3"},
        "not json",
        {"query": "red shoes", "rank": 4, "listing_id": "L4", "image_url": "javascript:alert(1)"},
        {"query": "red shoes", "rank": 5, "listing_id": "L5", "segment": "torso"},  # contradicts line 1
        {"query": "hat", "rank": 1, "listing_id": "H1", "segment": "tail"},
    ] + [{"query": "hat", "rank": r, "listing_id": f"H{r}"} for r in range(2, 8)])
    b = tmp_path / "b.csv"
    b.write_text("query,rank,listing_id,title,price\nred shoes,1,L2,Red boot,12.5\nred shoes,2,L1,Red,-3\nhat,1,H1,Hat,\n")
    imported = read_results([a, b])
    assert imported.systems == ("a", "b")
    assert [m.split(": ")[0] for m in imported.bad_rows] == [f"{a}:{n}" for n in (3, 4, 5, 6, 7, 8)] + [f"{b}:3"]
    assert any("rank 'x' is not a number" in m for m in imported.bad_rows)
    assert any("not an http(s) or data:image URL" in m for m in imported.bad_rows)
    shoes, hat = imported.queries
    assert (shoes.text, shoes.segment, [i.listing_id for i in shoes.baseline]) == ("red shoes", "head", ["L1", "L2"])
    assert (shoes.baseline[0].image_url, shoes.baseline[0].link, shoes.baseline[0].price, shoes.baseline[0].brand) == \
        ("https://img/1.png", "https://shop/1", 9.5, None)
    assert [i.listing_id for i in shoes.target] == ["L2"] and shoes.target[0].price == 12.5
    assert len(hat.baseline) == 5 and imported.beyond_top == 2 and hat.segment == "tail"


def test_one_file_two_systems_impressions_and_default_segment(tmp_path):
    rows = [{"query": f"q{i}", "system": system, "rank": 1, "listing_id": f"{system}{i}", "impressions": 100 - 10 * i}
            for i in range(6) for system in ("prod", "cand")]
    imported = read_results([jsonl(tmp_path / "both.jsonl", rows)])
    assert imported.systems == ("prod", "cand")
    # 30/30/40% of 450 impressions, by where each query's share starts (0, .22, .42, .6, .73, .89)
    assert [q.segment for q in imported.queries] == ["head", "head", "torso", "tail", "tail", "tail"]
    plain = jsonl(tmp_path / "plain.jsonl", [{"query": "q", "system": s, "rank": 1, "listing_id": s} for s in "ab"])
    with pytest.raises(InputError, match="neither a segment nor an impressions column.*--default-segment"):
        read_results([plain])
    assert read_results([plain], default_segment="torso").queries[0].segment == "torso"
    three = jsonl(tmp_path / "three.jsonl", [{"query": "q", "system": s, "rank": 1, "listing_id": s} for s in "abc"])
    with pytest.raises(InputError, match="exactly two systems.*found 3"):
        read_results([three])
    with pytest.raises(InputError, match="result lists are .jsonl, .csv, .tsv or TREC run"):
        read_results([tmp_path / "x.txt", plain]) if (tmp_path / "x.txt").write_text("q") else None


def test_differing_only_counts_identical_queries_per_segment_and_samples_the_rest():
    def spec(i, same):
        base = [Listing(f"L{i}-{j}") for j in range(5)]
        return QuerySpec(f"q{i}", ("head", "torso", "tail")[i % 3], base, base if same else base[::-1])

    queries = [spec(i, same=i < 5) for i in range(12)]
    built = select_imported(queries, None, seed=1, differing_top=5)
    assert built.stats["identical_skipped"] == {"head": 2, "torso": 2, "tail": 1} and len(built.queries) == 7
    sampled = select_imported(queries, 3, seed=1, differing_top=5)
    assert sorted(q.segment for q in sampled.queries) == ["head", "tail", "torso"]
    with pytest.raises(InputError, match="every query shows the same top 5"):
        select_imported(queries[:5], None, differing_top=5)
    # top 2: a query whose lists differ only below rank 2 counts as identical
    partly = QuerySpec("p", "head", [Listing("a"), Listing("b"), Listing("c")], [Listing("a"), Listing("b"), Listing("d")])
    assert select_imported([partly, spec(99, False)], None, differing_top=2).stats["identical_skipped"]["head"] == 1


@pytest.mark.slow
def test_the_cli_reports_bad_rows_and_the_session_exports(tmp_path):
    db = tmp_path / "j.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    rows = [{"query": f"q{i}", "rank": r, "listing_id": f"L{i}-{r}", "segment": "head"} for i in range(3) for r in (1, 2)]
    a = jsonl(tmp_path / "a.jsonl", rows + [{"query": "q0", "rank": 0, "listing_id": "bad"}])
    b = jsonl(tmp_path / "b.jsonl", [dict(row, listing_id=row["listing_id"] + "b") for row in rows])
    result = qcat("judge", "create-session", "--results", a, "--results", b, "--judges-per-query", 1, "--url", db)
    assert result.returncode == 0, result.stderr
    assert f"skipped {a}:7: rank 0 is not a whole number of at least 1" in result.stderr
    assert "3 queries, baseline 'a' and target 'b'" in result.stderr
    refused = qcat("judge", "create-session", "--results", a, "--baseline", "x", "--url", db)
    assert refused.returncode != 0 and "not both" in refused.stderr and "Traceback" not in refused.stderr
    from qcat.judging.store.connection import open_store

    store = open_store(str(db))
    judge, _ = add_judge(store, "ann")
    while (screen := assignment.next_query(store, judge.id, 1)) is not None:
        judgments.submit(store, judge.id, screen.query_id, grade_all(screen, 2))
    store.dispose()
    out = tmp_path / "judgments.csv"
    result = qcat("judge", "export", "1", "--csv", out, "--qrels", tmp_path / "s.qrels", "--url", db)
    assert result.returncode == 0, result.stderr
    assert len(out.read_text().splitlines()) == 1 + 3 * 4  # header, 4 listings graded per query


@pytest.mark.slow
def test_the_report_flags_a_much_faster_judge_beside_their_gold_agreement(sqlite_url, tmp_path):
    from qcat.judging.grading.gold import add_gold
    from qcat.judging.store.connection import open_store
    from qcat.judging.store.migrate import upgrade

    upgrade(sqlite_url)
    store = open_store(sqlite_url)
    queries = [QuerySpec(f"q{i}", ("head", "torso", "tail")[i % 3], [Listing(f"a{i}")], [Listing(f"b{i}")])
               for i in range(6)]
    session_id = store_session(store, "s", "A", "B", queries, judges_per_query=3)
    gold = tmp_path / "gold.csv"
    gold.write_text("query,listing_id,grade\nq0,a0,3\nq0,b0,0\n")
    add_gold(store, session_id, gold)
    judges = [add_judge(store, name)[0] for name in ("ann", "bob", "cy")]
    for judge in judges:
        while (screen := assignment.next_query(store, judge.id, session_id)) is not None:
            judgments.submit(store, judge.id, screen.query_id, grade_all(screen, 3 if judge.id == judges[0].id else 1))
    seconds = {"ann": 2.0, "bob": 30.0, "cy": 40.0}
    with store.transaction() as session:
        for judge in judges:
            for record in session.scalars(select(Assignment).where(Assignment.judge_id == judge.id)):
                record.created_at = record.finished_at - timedelta(seconds=seconds[judge.name])
    summary = timing_summary(store, session_id)
    by_judge = {row["judge"]: row for row in summary["judges"]}
    assert [row["judge"] for row in summary["judges"]] == ["ann", "bob", "cy"]
    assert by_judge["ann"]["median_seconds"] == pytest.approx(2.0, abs=0.01) and by_judge["ann"]["fast"]
    assert not by_judge["bob"]["fast"] and not by_judge["cy"]["fast"]
    assert by_judge["ann"]["gold_exact"] == 0.5 and by_judge["bob"]["gold_exact"] == 0.0
    assert {row["segment"]: row["queries"] for row in summary["segments"]} == {"head": 3, "torso": 6, "tail": 6}
    store.dispose()


@pytest.mark.slow
def test_flags_of_qcats_own_search_are_refused_with_results(tmp_path):
    a = jsonl(tmp_path / "a.jsonl", [{"query": "q", "rank": 1, "listing_id": "x", "segment": "head"}])
    result = qcat("judge", "create-session", "--results", a, "--results", a, "--mode", "filter", "--url", tmp_path / "j.db")
    assert result.returncode != 0 and "--mode sets qcat's own search" in result.stderr and "Traceback" not in result.stderr
    result = qcat("judge", "create-session", "--baseline", "m", "--target", "m", "--default-segment", "head",
                  "--url", tmp_path / "j.db")
    assert result.returncode != 0 and "--default-segment applies to --results files only" in result.stderr


@pytest.mark.slow
def test_a_trec_run_with_topics_and_listings(tmp_path):
    run = tmp_path / "both.run"
    run.write_text("1 Q0 D1 1 9.5 prod\n1 Q0 D2 2 8.1 prod\n1 Q0 D2 1 9.9 cand\n1 Q0 D3 2 7.0 cand\n"
                   "2 Q0 D4 1 5.0 prod\n2 Q0 D4 1 5.0 cand\n9 Q0 D9 1 1.0 prod\nbroken line\n")
    topics = tmp_path / "topics.tsv"
    topics.write_text("1\tred running shoes\n2\tblue hat\n")
    listings = tmp_path / "listings.csv"
    listings.write_text("listing_id,title,image_url\nD1,Red shoe,https://img/d1.png\nD2,Red boot,\n")
    from qcat.judging.grading.imports import read_listings, read_topics

    with pytest.raises(InputError, match="names queries by id: give their text with --topics"):
        read_results([run], default_segment="head")
    imported = read_results([run], "head", read_topics(topics), read_listings(listings))
    assert imported.systems == ("prod", "cand")
    assert [m.split(": ", 1)[1] for m in imported.bad_rows] == [
        "query id '9' is not in --topics", "expected 'qid Q0 docno rank score tag', got 2 fields"]
    shoes, hat = imported.queries
    assert shoes.text == "red running shoes" and [(i.listing_id, i.title) for i in shoes.baseline] == \
        [("D1", "Red shoe"), ("D2", "Red boot")]
    assert shoes.baseline[0].image_url == "https://img/d1.png" and [i.listing_id for i in shoes.target] == ["D2", "D3"]
    assert select_imported(imported.queries, None, differing_top=5).stats["identical_skipped"]["head"] == 1  # blue hat
    db = tmp_path / "j.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    result = qcat("judge", "create-session", "--results", run, "--topics", topics, "--listings", listings,
                  "--default-segment", "head", "--differing-only", 5, "--url", db)
    assert result.returncode == 0, result.stderr
    assert f"skipped {run}:7: query id '9' is not in --topics" in result.stderr
    assert "1 query with the same top 5 in both systems left out" in result.stderr



@pytest.mark.slow
def test_a_system_whose_rows_are_all_skipped_is_refused(tmp_path):
    """Issue 37, item 6: every target row contradicted the baseline's segment; each skip was
    printed, then a 4-query session was made against a system with no results."""
    db = tmp_path / "j.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    a = jsonl(tmp_path / "a.jsonl", [{"query": f"q{i}", "rank": 1, "listing_id": f"A{i}", "segment": "head"}
                                     for i in range(4)])
    b = jsonl(tmp_path / "b.jsonl", [{"query": f"q{i}", "rank": 1, "listing_id": f"B{i}", "segment": "tail"}
                                     for i in range(4)])
    with pytest.raises(InputError, match=rf"--results {b}: no usable row, so the session would judge 'b' on no "
                                         rf"results: 4 rows skipped: line 1: segment 'tail' of 'q0'"):
        read_results([a, b])
    result = qcat("judge", "create-session", "--results", a, "--results", b, "--judges-per-query", 1, "--url", db)
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines()[-1].startswith(f"qcat: error: --results {b}: no usable row")
    assert "no judging sessions yet" in qcat("judge", "sessions", "--url", db).stderr
    both = jsonl(tmp_path / "both.jsonl", [{"query": "q0", "system": "a", "rank": 1, "listing_id": "A0", "segment": "head"},
                                           {"query": "q0", "system": "b", "rank": 1, "listing_id": "B0", "segment": "tail"}])
    with pytest.raises(InputError, match=rf"--results {both}: system 'b': no usable row"):
        read_results([both])


def test_queries_are_matched_on_the_normalized_query_and_merges_counted(tmp_path):
    """Issue 37, item 8: "TV" in one system's list and "tv " in the other's were two queries."""
    a = jsonl(tmp_path / "a.jsonl", [{"query": "TV", "rank": 1, "listing_id": "A1"},
                                     {"query": "Lego  Star Wars!", "rank": 1, "listing_id": "A2"}])
    b = jsonl(tmp_path / "b.jsonl", [{"query": "tv ", "rank": 1, "listing_id": "B1"},
                                     {"query": "tv", "rank": 2, "listing_id": "B2"},
                                     {"query": "lego star wars", "rank": 1, "listing_id": "B3"}])
    imported = read_results([a, b], "head")
    assert [(q.text, [i.listing_id for i in q.baseline], [i.listing_id for i in q.target]) for q in imported.queries] \
        == [("TV", ["A1"], ["B1", "B2"]), ("Lego Star Wars!", ["A2"], ["B3"])]
    assert imported.merged == [("TV", "tv"), ("Lego Star Wars!", "lego star wars")]
    said = []
    from qcat.judging.grading.imports import report_bad_rows

    report_bad_rows(imported, said.append)
    assert said == ["matched 2 queries written in several ways as one (qcat's normalized query), each shown as first "
                    "written (e.g. 'TV' = 'tv'; 'Lego Star Wars!' = 'lego star wars')"]
