"""Soak test of the judging store (issue 12's "Done when"), on SQLite and on PostgreSQL: 8 judges,
each in their own thread with their own store (as 8 app processes would be), judge a session to
the end (about 200 judgments each) while 10% of all claims are abandoned: a passer-by judge is
given a query and never comes back (the browser closed), and the claim is left to expire.

Expiry is driven by time, not by waiting: an abandoned claim's last activity is moved 31 minutes
into the past, past the default 30-minute claim timeout, and the next ``next_query`` of any
judge releases it. Every query must end with exactly its 3 judges, and every submitted grade
must be stored once: no judgment lost, none duplicated.

Run ``pytest -s tests/test_judging_soak.py`` to see the figures (docs/benchmarks.md).
"""

from __future__ import annotations

import time
from collections import Counter
from datetime import timedelta

import pytest
from judging_fixtures import grade_all, run_threads, toy_queries
from sqlalchemy import func, select, update

from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment, Judgment, SessionQuery, utcnow

JUDGES = 8
JUDGES_PER_QUERY = 3
QUERIES = 54  # 54 x 3 judges x 10 judgments (5 listings per side) = 1,620 judgments, ~200 per judge
ABANDON_EVERY = 9  # one abandoned claim per 9 kept ones: 10% of all claims
PASSERS_BY = QUERIES // ABANDON_EVERY + 1  # per judge thread: enough even for a judge who gets every query
THINK_S = 0.03  # a judge's grading time per query: without it one SQLite thread can take most queries
DEADLINE_S = 50


def abandon_claim(store, passer_by: int, session_id: int) -> bool:
    """A passer-by is given a query and leaves; their claim is made 31 idle minutes old (past the
    30-minute timeout), so the next request of any judge releases it. False when no query was free."""
    if assignment.next_query(store, passer_by, session_id) is None:
        return False
    with store.transaction() as session:
        session.execute(update(Assignment).where(Assignment.judge_id == passer_by)
                        .values(active_at=utcnow() - timedelta(minutes=31)))
    return True


def abandonment_due(kept: int, abandoned: int) -> bool:
    """One abandoned claim in each run of ``ABANDON_EVERY`` kept ones (in its middle)."""
    return kept % ABANDON_EVERY == ABANDON_EVERY // 2 and abandoned <= kept // ABANDON_EVERY


def session_complete(store, session_id: int) -> bool:
    with store.sessions() as session:
        done = session.scalar(select(func.count()).select_from(Assignment)
                              .where(Assignment.session_id == session_id, Assignment.status == "done"))
    return done >= QUERIES * JUDGES_PER_QUERY


def grades_of(judge_index: int, shown) -> dict[tuple[str, str], int]:
    """The judge's grades: one per listing (a listing in both groups gets the same on both sides)."""
    listings = sorted({listing for listing, _ in grade_all(shown, 0)})
    return {(listing, side): (judge_index + listings.index(listing)) % 4 for listing, side in grade_all(shown, 0)}


def test_one_thread_judges_a_small_session_to_the_end_past_an_abandoned_claim(sqlite_url):
    """The soak's bookkeeping, small and in one thread on SQLite: a passer-by's abandoned claim is
    released by the next judge's request (the query it held goes to that judge), every query ends
    with exactly its judge, every grade submitted is stored once and unchanged."""
    upgrade(sqlite_url)
    store = open_store(sqlite_url)
    try:
        session_id = store_session(store, "mini soak", "A", "B", toy_queries(3), judges_per_query=1)
        judge = add_judge(store, "judge 0")[0].id
        assert abandon_claim(store, add_judge(store, "passer-by")[0].id, session_id)
        submitted = {}
        while (shown := assignment.next_query(store, judge, session_id)) is not None:
            grades = grades_of(0, shown)
            judgments.submit(store, judge, shown.query_id, grades)
            submitted.update({(judge, shown.query_id, listing, side): grade
                              for (listing, side), grade in grades.items()})
        with store.sessions() as session:
            stored = {(judge, query, listing, side): grade for judge, query, listing, side, grade in session.execute(
                select(Judgment.judge_id, Judgment.query_id, Judgment.listing_id, Judgment.side, Judgment.grade))}
            done = Counter(session.scalars(select(Assignment.query_id).where(Assignment.status == "done")))
            states = Counter(session.scalars(select(Assignment.status)))
            claims = session.scalars(select(SessionQuery.claims)).all()
    finally:
        store.dispose()
    assert len(done) == 3 and set(done.values()) == {1} and claims == [1, 1, 1]
    assert states == {"done": 3, "released": 1}  # the passer-by's claim released, none left open
    assert stored == submitted and len(stored) == 3 * 10  # 3 queries of 5 + 5 listings


@pytest.mark.slow  # over 3 s: 8 threads judge about 1,600 judgments
def test_eight_judges_judge_a_session_to_the_end_while_10_percent_of_claims_are_abandoned(store, db_url):
    session_id = store_session(store, "soak", "A", "B", toy_queries(QUERIES), judges_per_query=JUDGES_PER_QUERY)
    judges = [add_judge(store, f"judge {i}")[0].id for i in range(JUDGES)]
    passers_by = [[add_judge(store, f"passer-by {i}.{k}")[0].id for k in range(PASSERS_BY)] for i in range(JUDGES)]
    started = time.perf_counter()

    def judge_until_done(i: int) -> dict:
        own = open_store(db_url)  # one store (engine, pool) per judge, as one app process per judge
        submitted, abandoned, kept = {}, 0, 0
        try:
            while time.perf_counter() - started < DEADLINE_S:
                if abandonment_due(kept, abandoned):
                    abandoned += abandon_claim(own, passers_by[i][abandoned], session_id)
                shown = assignment.next_query(own, judges[i], session_id)
                if shown is None:
                    if session_complete(own, session_id):
                        break
                    time.sleep(0.02)  # the rest is held by other judges: ask again, as a judge would
                    continue
                kept += 1
                time.sleep(THINK_S)
                grades = grades_of(i, shown)
                judgments.submit(own, judges[i], shown.query_id, grades)
                submitted.update({(judges[i], shown.query_id, listing, side): grade
                                  for (listing, side), grade in grades.items()})
        finally:
            own.dispose()
        return {"submitted": submitted, "abandoned": abandoned, "kept": kept}

    results = run_threads(judge_until_done, JUDGES)
    elapsed = time.perf_counter() - started
    submitted = {key: grade for r in results for key, grade in r["submitted"].items()}
    abandoned, kept = sum(r["abandoned"] for r in results), sum(r["kept"] for r in results)
    with store.sessions() as session:
        stored_rows = session.execute(select(Judgment.judge_id, Judgment.query_id, Judgment.listing_id, Judgment.side,
                                             Judgment.grade)).all()
        done = Counter(session.scalars(select(Assignment.query_id).where(Assignment.status == "done")))
        states = Counter(session.scalars(select(Assignment.status)))
        claims = session.scalars(select(SessionQuery.claims)).all()
        released_passers_by = session.scalar(select(func.count()).select_from(Assignment).where(
            Assignment.judge_id.in_([p for group in passers_by for p in group]), Assignment.status == "released"))
    stored = {(judge, query, listing, side): grade for judge, query, listing, side, grade in stored_rows}
    per_judge = Counter(judge for judge, *_ in stored)
    figures = {"database": store.engine.dialect.name, "queries": QUERIES, "judgments": len(stored_rows),
               "judgments_per_judge": sorted(per_judge.values()), "kept_claims": kept, "abandoned_claims": abandoned,
               "abandoned_share": round(abandoned / (abandoned + kept), 3), "seconds": round(elapsed, 2)}
    print(f"\nsoak {figures}")
    assert time.perf_counter() - started < DEADLINE_S, "the session was not judged to the end in time"
    assert len(done) == QUERIES and set(done.values()) == {JUDGES_PER_QUERY}  # every query: exactly 3 judges
    assert claims == [JUDGES_PER_QUERY] * QUERIES and states["open"] == 0
    assert len(stored_rows) == len(stored) == QUERIES * JUDGES_PER_QUERY * 10  # none duplicated
    assert stored == submitted  # none lost, none changed
    # Which judges got queries is up to thread scheduling (on a busy 2-core CI machine one thread can
    # start after the others have taken everything), so only the judges' count per query is asserted.
    assert kept == QUERIES * JUDGES_PER_QUERY and JUDGES_PER_QUERY <= len(per_judge) and set(per_judge) <= set(judges)
    assert abandoned == released_passers_by == states["released"] and abandoned >= kept // (ABANDON_EVERY + 2)
