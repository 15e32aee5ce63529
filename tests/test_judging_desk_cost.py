"""Issue 55 item 2: what one panel message costs the store. A pick reads the judge's held claims in
one query and touches them in one update (not a select and an update per query the panel holds),
reads the new queries' screens in its own transaction, and a desk scans for idle claims at most
every RELEASE_EVERY seconds; an idle claim is still released once that time has passed."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

import pytest
from sqlalchemy import event, select, update

from qcat.judging.grading import desk as desk_module
from qcat.judging.grading.desk import GradingDesk
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment

QUERIES = [QuerySpec(f"query {i}", "head", [Listing(f"b{i}-{j}", f"B {i}.{j}", "Home > Shoes") for j in range(3)],
                     [Listing(f"t{i}-{j}", f"T {i}.{j}", "Home > Shoes") for j in range(2)]) for i in range(30)]


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'cost.db'}"
    upgrade(url)
    store = open_store(url)
    yield store
    store.dispose()


def statements(store):
    seen: Counter = Counter()

    @event.listens_for(store.engine, "before_cursor_execute")
    def count(conn, cursor, statement, params, context, executemany):
        seen[" ".join(statement.split()[:2])] += 1

    return seen


def test_a_message_with_eight_held_queries_costs_the_store_a_fixed_number_of_statements(store):
    session_id = store_session(store, "cost", "a", "b", QUERIES, seed=1)
    ann = add_judge(store, "ann")[0]
    desk = GradingDesk(store, ann.id, session_id)
    held = [shown["id"] for shown in desk.queue([], 8)]
    assert len(held) == 8
    seen = statements(store)
    shown = desk.drawn[held[0]]
    action = {"id": "a1", "kind": "submit", "query": held[0], "text": "q",
              "grades": [[slot["listing"], slot["side"], 2] for slot in shown["slots"]]}
    assert desk.take([action])["a1"]["status"] == "saved"
    after_submit = sum(seen.values())
    queue = desk.queue(held[1:], 8)
    assert [q["id"] for q in queue[:7]] == held[1:] and "slots" in queue[7]  # one new query, drawn in full
    pick = sum(seen.values()) - after_submit
    # 7 held queries: one select of the judge's claims and one update touching them (was 7 + 7);
    # the whole pick, the new claim and its screen included, in one transaction
    assert seen["UPDATE assignments"] == 1 + 1  # the submit's status, the one touch
    assert seen["BEGIN IMMEDIATE"] == 2 and pick <= 16, seen


def test_a_desk_releases_idle_claims_at_most_every_release_every_seconds(store, monkeypatch):
    session_id = store_session(store, "idle", "a", "b", QUERIES, seed=1, judges_per_query=1)
    ann, bob = (judge for judge, _ in (add_judge(store, "ann"), add_judge(store, "bob")))
    desk = GradingDesk(store, bob.id, session_id, claim_timeout=timedelta(minutes=1))
    clock = [1000.0]
    monkeypatch.setattr(desk_module.time, "monotonic", lambda: clock[0])
    desk.queue([], 5)  # bob's first pick scans for idle claims
    anns = GradingDesk(store, ann.id, session_id)
    ann_held = [q["id"] for q in anns.queue([], 5)]
    with store.transaction() as session:  # ann's claims have been idle for an hour
        session.execute(update(Assignment).where(Assignment.judge_id == ann.id)
                        .values(active_at=Assignment.active_at - timedelta(hours=1)))

    def anns_open() -> set[int]:
        with store.sessions() as session:
            return set(session.scalars(select(Assignment.query_id).where(Assignment.judge_id == ann.id,
                                                                         Assignment.status == "open")))

    clock[0] += desk_module.RELEASE_EVERY - 1
    desk.queue([], 5)
    assert anns_open() == set(ann_held)  # scanned less than RELEASE_EVERY ago: not yet
    clock[0] += 1
    desk.queue([], 5)
    assert anns_open() == set()  # released now
