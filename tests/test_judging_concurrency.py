"""Concurrent judges on SQLite and on PostgreSQL: nothing lost, nothing duplicated, idempotent
resubmission, and assignment never gives a query to more than 3 judges or twice to one judge."""

from __future__ import annotations

import time
from collections import Counter

import pytest
from judging_fixtures import grade_all, run_threads, toy_queries
from sqlalchemy import func, select

from qcat.judging.grading import assignment, judgments, screens
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import store_session
from qcat.judging.store.models import Assignment, Judgment, SessionQuery

JUDGES = 8
PER_JUDGE = 200  # judgments: 20 queries x 10 listings (5 per side)
QUERIES_PER_JUDGE = PER_JUDGE // 10


@pytest.mark.slow
def test_eight_judges_submit_200_judgments_each_concurrently(store):
    # 80 queries: even when one judge holds 19 queries, the other 61 cannot all be full (53 at most)
    session_id = store_session(store, "load", "A", "B", toy_queries(80))
    judges = [add_judge(store, f"judge {i}")[0] for i in range(JUDGES)]

    def judge_work(i: int) -> dict:
        judge = judges[i]
        inserted = resubmitted = 0
        seen = []
        for n in range(QUERIES_PER_JUDGE):
            shown = assignment.next_query(store, judge.id, session_id)
            assert shown is not None
            seen.append(shown.query_id)
            listings = sorted({listing for listing, _ in grade_all(shown, 0)})  # one grade per listing, both sides
            grades = {(listing, side): (i + n + listings.index(listing)) % 4 for listing, side in grade_all(shown, 0)}
            result = judgments.submit(store, judge.id, shown.query_id, grades)
            inserted += result.inserted
            again = judgments.submit(store, judge.id, shown.query_id, grades)  # idempotent
            assert (again.inserted, again.updated, again.unchanged) == (0, 0, len(grades))
            resubmitted += again.unchanged
        return {"inserted": inserted, "resubmitted": resubmitted, "queries": seen}

    started = time.perf_counter()
    results = run_threads(judge_work, JUDGES)
    elapsed = time.perf_counter() - started
    print(f"\n{store.engine.dialect.name}: {JUDGES} judges x {PER_JUDGE} judgments (+ the same again) in {elapsed:.2f} s")
    assert [r["inserted"] for r in results] == [PER_JUDGE] * JUDGES
    assert all(len(set(r["queries"])) == QUERIES_PER_JUDGE for r in results)
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment)) == JUDGES * PER_JUDGE
        duplicates = session.execute(
            select(Judgment.judge_id, Judgment.query_id, Judgment.listing_id, Judgment.side, func.count())
            .group_by(Judgment.judge_id, Judgment.query_id, Judgment.listing_id, Judgment.side)
            .having(func.count() > 1)).all()
        assert duplicates == []
        per_judge = dict(session.execute(select(Judgment.judge_id, func.count()).group_by(Judgment.judge_id)).all())
        assert sorted(per_judge.values()) == [PER_JUDGE] * JUDGES
        judges_per_query = Counter(session.scalars(select(Assignment.query_id).where(Assignment.status == "done")))
        assert max(judges_per_query.values()) <= 3
        claims = dict(session.execute(select(SessionQuery.id, SessionQuery.claims)).all())
        assert all(claims[q] == n for q, n in judges_per_query.items())
        # every stored grade is the one its judge sent
        stored = session.execute(select(Judgment.judge_id, Judgment.query_id, Judgment.grade)).all()
    assert {g for _, _, g in stored} == {0, 1, 2, 3}

    # a changed grade by the same judge updates the one row
    judge = judges[0]
    query_id = results[0]["queries"][0]
    with store.sessions() as session:
        screen = screens.screen(session, query_id)
    changed = judgments.submit(store, judge.id, query_id, grade_all(screen, 3))
    assert changed.inserted == 0 and changed.updated + changed.unchanged == 10 and changed.updated > 0
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment)) == JUDGES * PER_JUDGE
        assert set(session.scalars(select(Judgment.grade).where(Judgment.judge_id == judge.id,
                                                                 Judgment.query_id == query_id))) == {3}


def test_the_same_submission_from_eight_threads_is_stored_once(store):
    session_id = store_session(store, "same", "A", "B", toy_queries(3))
    judge, _ = add_judge(store, "ann")
    shown = assignment.next_query(store, judge.id, session_id)
    grades = grade_all(shown, 2)
    results = run_threads(lambda i: judgments.submit(store, judge.id, shown.query_id, grades), JUDGES)
    assert sum(r.inserted for r in results) <= len(grades) * JUDGES  # counted per call; rows are what matter
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment)) == len(grades)
        assert session.scalar(select(Assignment.status)) == "done"


@pytest.mark.slow
def test_concurrent_assignment_gives_a_query_to_at_most_three_distinct_judges(store):
    session_id = store_session(store, "assign", "A", "B", toy_queries(10))
    judges = [add_judge(store, f"judge {i}")[0] for i in range(JUDGES)]

    def claim_all(i: int) -> list[int]:
        got = []
        while (shown := assignment.next_query(store, judges[i].id, session_id)) is not None:
            got.append(shown.query_id)
            if len(got) % 3 == 2:
                assignment.skip(store, judges[i].id, shown.query_id)  # released for someone else
            else:
                judgments.submit(store, judges[i].id, shown.query_id, grade_all(shown, 1))
        return got

    results = run_threads(claim_all, JUDGES)
    # A skip may release a query after some judge already finished: drain once more, one by one.
    results = [got + claim_all(i) for i, got in enumerate(results)]
    for got in results:
        assert len(got) == len(set(got))  # never twice to one judge
    with store.sessions() as session:
        done = Counter(session.scalars(select(Assignment.query_id).where(Assignment.status == "done")))
        seen = Counter(session.scalars(select(Assignment.query_id)))
        pairs = session.execute(select(Assignment.judge_id, Assignment.query_id)).all()
        open_left = session.scalar(select(func.count()).select_from(Assignment).where(Assignment.status == "open"))
        claims = dict(session.execute(select(SessionQuery.id, SessionQuery.claims)).all())
    assert len(pairs) == len(set(pairs)) and open_left == 0
    assert max(done.values()) <= 3
    assert all(claims[q] == done.get(q, 0) for q in claims)
    # a query still short of 3 judges has been offered to (and skipped by) every other judge
    assert all(seen[q] == JUDGES for q, n in claims.items() if n < 3)
    assert sum(done.values()) >= 20
