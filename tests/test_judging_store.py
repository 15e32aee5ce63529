"""The judging store on SQLite and on a real PostgreSQL server: migrations, schema, constraints,
tokens, sessions and SQL injection attempts."""

from __future__ import annotations

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from judging_fixtures import REVISIONS, grade_all, toy_queries
from sqlalchemy import func, inspect, select, text, update
from sqlalchemy.exc import IntegrityError

from qcat.errors import InputError
from qcat.judging.grading import assignment, judgments, screens
from qcat.judging.grading.judges import add_judge, authenticate
from qcat.judging.grading.sessions import Listing, QuerySpec, find_session, session_overview, store_session
from qcat.judging.store.connection import make_engine, open_store
from qcat.judging.store.migrate import downgrade, upgrade
from qcat.judging.store.models import (
    Assignment,
    Base,
    Judge,
    JudgingSession,
    Judgment,
    ResultItem,
    ResultList,
    SessionQuery,
)

HEAD = REVISIONS[-1]
TABLES = {"judges", "judging_sessions", "session_queries", "result_lists", "result_items", "assignments", "judgments"}


def tables(url: str) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


def schema_differences(url: str) -> list:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return compare_metadata(MigrationContext.configure(connection), Base.metadata)
    finally:
        engine.dispose()


@pytest.mark.slow
def test_migrations_up_down_up_and_schema_matches_the_orm(db_url):
    assert upgrade(db_url) == (None, HEAD)
    assert TABLES <= tables(db_url)
    assert schema_differences(db_url) == []
    for newer, older in zip(REVISIONS[::-1], [*REVISIONS[-2::-1], None]):  # one step at a time, down to empty
        assert downgrade(db_url) == (newer, older)
        if older is not None:  # and up again: every migration runs up, down, up, down
            assert upgrade(db_url, newer) == (older, newer)
            assert downgrade(db_url) == (newer, older)
    assert tables(db_url) <= {"alembic_version"}
    assert upgrade(db_url) == (None, HEAD)
    assert schema_differences(db_url) == []
    assert downgrade(db_url, "base") == (HEAD, None)
    assert upgrade(db_url, "head") == (None, HEAD)
    assert TABLES <= tables(db_url)


@pytest.mark.slow
def test_migration_0002_keeps_assignments_and_downgrades_released_claims_to_skipped(db_url):
    upgrade(db_url, "0001")
    engine = make_engine(db_url)
    created = "2026-01-02 03:04:05"
    with engine.begin() as connection:
        connection.execute(text("insert into judges (id, name, token_id, token_salt, token_hash, created_at) "
                                "values (1, 'ann', 'id1', 's', 'h', :t), (2, 'bob', 'id2', 's', 'h', :t)"), {"t": created})
        connection.execute(text("insert into judging_sessions (id, name, baseline_model, target_model, corpus, "
                                "judges_per_query, seed, settings, created_at) values (1, 's', 'A', 'B', '', 3, 0, '{}', :t)"),
                           {"t": created})
        connection.execute(text("insert into session_queries (id, session_id, position, text, segment, impressions, "
                                "baseline_side, claims) values (1, 1, 0, 'q', 'head', 1.0, 'left', 2)"))
        connection.execute(text("insert into assignments (id, judge_id, query_id, session_id, status, flagged, flag_note, "
                                "created_at) values (1, 1, 1, 1, 'open', false, '', :t), (2, 2, 1, 1, 'done', false, '', :t)"),
                           {"t": created})
    assert upgrade(db_url, "0002") == ("0001", "0002")
    with engine.begin() as connection:
        rows = connection.execute(text("select id, status, active_at from assignments order by id")).all()
        assert [(i, status) for i, status, _ in rows] == [(1, "open"), (2, "done")]
        assert all(str(active).startswith("2026-01-02 03:04:05") for _, _, active in rows)  # = created_at
        connection.execute(text("update assignments set status = 'released' where id = 1"))
    assert downgrade(db_url) == ("0002", "0001")
    with engine.begin() as connection:
        assert connection.execute(text("select status from assignments order by id")).scalars().all() == ["skipped", "done"]
        with pytest.raises(IntegrityError):  # 0001's check constraint is back
            connection.execute(text("update assignments set status = 'released' where id = 1"))
    assert upgrade(db_url) == ("0001", HEAD)
    engine.dispose()


def test_a_database_that_is_not_upgraded_says_to_run_qcat_db_upgrade(db_url, tmp_path):
    with pytest.raises(InputError, match="qcat db upgrade"):
        open_store(db_url)
    with pytest.raises(InputError, match=r"no judging database at .*missing\.db: run `qcat db upgrade"):
        open_store(f"sqlite:///{tmp_path / 'missing.db'}")
    assert not (tmp_path / "missing.db").exists()  # checking did not create it


def test_the_schema_head_the_code_checks_is_alembics_newest_migration():
    """check_schema compares a store with a written-down head (Alembic is not imported to ask it):
    it must be the head Alembic finds, the newest of the migrations."""
    from qcat.judging.store.connection import SCHEMA_HEAD
    from qcat.judging.store.migration_scripts import script_directory

    assert SCHEMA_HEAD == script_directory().get_current_head() == REVISIONS[-1]


def test_sqlite_runs_in_wal_mode_with_a_busy_timeout_and_foreign_keys(sqlite_url):
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.connect() as connection:
        assert connection.exec_driver_sql("pragma journal_mode").scalar() == "wal"
        assert connection.exec_driver_sql("pragma busy_timeout").scalar() == 30000
        assert connection.exec_driver_sql("pragma foreign_keys").scalar() == 1
    engine.dispose()


def test_database_enforces_one_judgment_per_judge_query_listing_side_and_grade_range(store):
    session_id = store_session(store, "s", "A", "B", toy_queries(1))
    judge, _ = add_judge(store, "ann")
    with store.sessions() as session:
        query_id = session.scalar(select(SessionQuery.id).where(SessionQuery.session_id == session_id))
    row = dict(judge_id=judge.id, query_id=query_id, listing_id="L0-0", side="left", grade=2)
    with store.transaction() as session:
        session.add(Judgment(**row))
    with pytest.raises(IntegrityError):
        with store.transaction() as session:
            session.add(Judgment(**row | {"grade": 3}))
    with store.transaction() as session:  # the other side is another judgment
        session.add(Judgment(**row | {"side": "right"}))
    for bad in ({"grade": 4}, {"grade": -1}, {"side": "middle", "listing_id": "L0-1"}):
        with pytest.raises(IntegrityError):
            with store.transaction() as session:
                session.add(Judgment(**row | {"listing_id": "L0-9"} | bad))
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment)) == 2


def test_tokens_are_stored_hashed_and_checked(store):
    judge, token = add_judge(store, "ann")
    with store.sessions() as session:
        stored = session.get(Judge, judge.id)
        assert token not in (stored.token_hash, stored.token_salt, stored.token_id)
        assert token.split(".", 1)[1] not in stored.token_hash
    assert authenticate(store, token).id == judge.id
    assert authenticate(store, f"  {token}\n").id == judge.id
    other, other_token = add_judge(store, "bob")
    assert other_token != token and authenticate(store, other_token).id == other.id
    token_id, secret = token.split(".", 1)
    with pytest.raises(InputError, match="enter your judge token"):
        authenticate(store, " ")
    for wrong in ("nonsense", f"{token_id}.{secret[:-1]}x", f"{other_token.split('.')[0]}.{secret}",
                  "000000000000." + secret, "' or 1=1 --", token + "x"):
        with pytest.raises(InputError, match="unknown token"):
            authenticate(store, wrong)
    with pytest.raises(InputError, match="already exists"):
        add_judge(store, "ann")
    with pytest.raises(InputError, match="empty"):
        add_judge(store, "   ")


def test_session_stores_both_lists_with_seeded_random_sides(store):
    queries = toy_queries(60)
    first = store_session(store, "one", "models/A", "models/B", queries, seed=7)
    second = store_session(store, "two", "models/A", "models/B", queries, seed=7)
    third = store_session(store, "three", "models/A", "models/B", queries, seed=8)
    with store.sessions() as session:
        sides = {s: session.scalars(select(SessionQuery.baseline_side).where(SessionQuery.session_id == s)
                                    .order_by(SessionQuery.position)).all() for s in (first, second, third)}
        assert sides[first] == sides[second] != sides[third]
        assert 15 <= sides[first].count("left") <= 45
        q = session.scalar(select(SessionQuery).where(SessionQuery.session_id == first, SessionQuery.position == 0))
        lists = {rl.system: rl for rl in q.lists}
        assert lists["baseline"].side == q.baseline_side and lists["target"].side != q.baseline_side
        assert [i.listing_id for i in lists["baseline"].items] == [f"L0-{j}" for j in range(5)]
        assert [i.position for i in lists["target"].items] == [1, 2, 3, 4, 5]
        screen = screens.screen(session, q.id)
    shown_left = screen.left if q.baseline_side == "left" else screen.right
    assert [s.listing_id for s in shown_left] == [f"L0-{j}" for j in range(5)]
    assert "baseline" not in repr(screen) and "target" not in repr(screen) and "models/" not in repr(screen)
    with pytest.raises(InputError, match="already exists"):
        store_session(store, "one", "A", "B", queries)
    with pytest.raises(InputError, match="duplicate"):
        store_session(store, "dup", "A", "B", queries[:2] + queries[:1])
    with pytest.raises(InputError, match="at least one query"):
        store_session(store, "none", "A", "B", [])


def test_unknown_session_and_query_are_refused(store):
    session_id = store_session(store, "s", "A", "B", toy_queries(3))
    judge, _ = add_judge(store, "ann")
    with store.sessions() as session:
        assert find_session(session, str(session_id)).name == "s"
        assert find_session(session, "s").id == session_id
        for key in ("999", "no such session", "1; drop table judges"):
            with pytest.raises(InputError, match="does not exist"):
                find_session(session, key)
    with pytest.raises(InputError, match="does not exist"):
        assignment.next_query(store, judge.id, 999)
    with pytest.raises(InputError, match="query 12345 does not exist"):
        judgments.submit(store, judge.id, 12345, {})
    with pytest.raises(InputError, match="does not exist"):
        assignment.skip(store, judge.id, 12345)
    shown = assignment.next_query(store, judge.id, session_id)
    with pytest.raises(InputError, match="out of range"):
        judgments.submit(store, judge.id, shown.query_id, grade_all(shown, 4))
    with pytest.raises(InputError, match="not a whole number"):
        judgments.submit(store, judge.id, shown.query_id, grade_all(shown, 2.5))
    with pytest.raises(InputError, match="not shown"):
        judgments.submit(store, judge.id, shown.query_id, grade_all(shown, 1) | {("L-other", "left"): 1})
    with pytest.raises(InputError, match="side 'middle'"):
        judgments.submit(store, judge.id, shown.query_id, {("L0-0", "middle"): 1})
    with pytest.raises(InputError, match="not graded yet"):
        judgments.submit(store, judge.id, shown.query_id, dict(list(grade_all(shown, 1).items())[:3]))
    other, _ = add_judge(store, "bob")
    with pytest.raises(InputError, match="not assigned to this judge"):
        judgments.submit(store, other.id, shown.query_id, grade_all(shown, 1))
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment)) == 0


INJECTIONS = [
    "Robert'); DROP TABLE judges;--",
    "x' OR '1'='1",
    "1; DELETE FROM judgments; --",
    "\"; DROP TABLE judging_sessions; --",
    "' UNION SELECT token_hash FROM judges --",
    "%s %(name)s :name ? $1",
]


def counts(store) -> dict[str, int]:
    with store.sessions() as session:
        return {model.__tablename__: session.scalar(select(func.count()).select_from(model))
                for model in (Judge, JudgingSession, SessionQuery, ResultList, ResultItem, Assignment, Judgment)}


@pytest.mark.slow
def test_sql_injection_strings_are_stored_verbatim_and_change_nothing_else(store):
    queries = [QuerySpec(text, "tail", [Listing(f"x{i}", text, text)], [Listing(f"y{i}", "t", "c")])
               for i, text in enumerate(INJECTIONS)]
    judges = [add_judge(store, name)[0] for name in INJECTIONS]
    sessions = [store_session(store, name, "A", "B", queries, seed=i) for i, name in enumerate(INJECTIONS)]
    before = counts(store)
    assert before["judges"] == len(INJECTIONS) and before["judging_sessions"] == len(INJECTIONS)
    for judge, note in zip(judges, INJECTIONS):
        shown = assignment.next_query(store, judge.id, sessions[0])
        judgments.submit(store, judge.id, shown.query_id, grade_all(shown, 1), flag_note=note)
    shown = assignment.next_query(store, judges[0].id, sessions[0])
    assignment.skip(store, judges[0].id, shown.query_id, flag_note=INJECTIONS[0])
    with pytest.raises(InputError, match="unknown token"):
        authenticate(store, INJECTIONS[1])
    with store.sessions() as session:
        for name in INJECTIONS:
            assert find_session(session, name).name == name
            with pytest.raises(InputError):
                find_session(session, name + "x")
        assert sorted(session.scalars(select(Judge.name))) == sorted(INJECTIONS)
        assert sorted(session.scalars(select(JudgingSession.name))) == sorted(INJECTIONS)
        assert set(session.scalars(select(SessionQuery.text))) == set(INJECTIONS)
        assert set(session.scalars(select(ResultItem.title).where(ResultItem.listing_id.like("x%")))) == set(INJECTIONS)
        notes = session.scalars(select(Assignment.flag_note).where(Assignment.flagged)).all()
        assert sorted(notes) == sorted(INJECTIONS + [INJECTIONS[0]])
    after = counts(store)
    expected = before | {"assignments": len(INJECTIONS) + 1, "judgments": 2 * len(INJECTIONS)}
    assert after == expected
    engine = store.engine
    assert TABLES <= set(inspect(engine).get_table_names())
    with engine.connect() as connection:
        assert connection.execute(text("select count(*) from judges")).scalar() == len(INJECTIONS)


def test_downgrade_refuses_to_drop_tables_holding_rows_unless_confirmed(db_url):
    from qcat.judging.store.migrate import DataLossRefused

    upgrade(db_url)
    store = open_store(db_url)
    store_session(store, "s", "A", "B", toy_queries(2))
    add_judge(store, "ann")
    store.dispose()
    with pytest.raises(DataLossRefused, match=r"would drop 5 tables holding 28 rows \(result_items 20, result_lists 4, "
                                              r"session_queries 2, judges 1, judging_sessions 1\).*pass --yes"):
        downgrade(db_url, "base")
    assert TABLES <= tables(db_url)  # rolled back: nothing dropped
    store = open_store(db_url)
    assert counts(store)["result_items"] == 20
    store.dispose()
    assert downgrade(db_url, "base", drop_data=True)[1] is None
    assert tables(db_url) <= {"alembic_version"}
    with pytest.raises(InputError, match="already at base .*nothing to downgrade"):
        downgrade(db_url)
    with pytest.raises(InputError, match="cannot migrate .* to revision 'nope': Can't locate revision"):
        upgrade(db_url, "nope")


def _idle(store, judge_id: int, minutes: float) -> None:
    """Make the judge's claims look ``minutes`` idle."""
    from datetime import timedelta

    from qcat.judging.store.models import utcnow

    with store.transaction() as session:
        session.execute(update(Assignment).where(Assignment.judge_id == judge_id)
                        .values(active_at=utcnow() - timedelta(minutes=minutes)))


def _status(store, judge_id: int, query_id: int) -> str:
    with store.sessions() as session:
        return session.scalar(select(Assignment.status).where(Assignment.judge_id == judge_id,
                                                              Assignment.query_id == query_id))


def _claims(store, query_id: int) -> int:
    with store.sessions() as session:
        return session.get(SessionQuery, query_id).claims


@pytest.mark.slow
def test_an_idle_claim_expires_the_query_goes_to_another_judge_and_late_grades_are_kept(store):
    from datetime import timedelta

    session_id = store_session(store, "s", "A", "B", toy_queries(1))
    ann, bob, cy, dee = (add_judge(store, name)[0] for name in ("ann", "bob", "cy", "dee"))
    shown = {judge.id: assignment.next_query(store, judge.id, session_id) for judge in (ann, bob, cy)}
    query_id = shown[ann.id].query_id
    assert assignment.next_query(store, dee.id, session_id) is None  # three claims: the quota is filled
    _idle(store, cy.id, 29)
    assert assignment.next_query(store, dee.id, session_id) is None  # not idle long enough yet
    _idle(store, cy.id, 31)
    assert assignment.next_query(store, dee.id, session_id, claim_timeout=timedelta(hours=1)) is None  # configurable
    got = assignment.next_query(store, dee.id, session_id)  # default: 30 minutes
    assert got is not None and got.query_id == query_id
    assert _status(store, cy.id, query_id) == "released" and _claims(store, query_id) == 3
    # cy comes back late and submits: kept (the query has fewer than 3 submitted judgments), claim taken back
    judgments.submit(store, cy.id, query_id, grade_all(shown[cy.id], 1))
    assert _status(store, cy.id, query_id) == "done" and _claims(store, query_id) == 4
    for judge in (ann, bob, dee):
        judgments.submit(store, judge.id, query_id, grade_all(shown[ann.id], 2))
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment)) == 4 * 10
    again = judgments.submit(store, cy.id, query_id, grade_all(shown[cy.id], 1))  # resubmitted: no duplicates
    assert (again.inserted, again.updated) == (0, 0)


def test_late_grades_are_refused_once_the_query_has_all_its_judgments(store):
    from datetime import timedelta

    session_id = store_session(store, "s", "A", "B", toy_queries(1), judges_per_query=1)
    ann, bob = (add_judge(store, name)[0] for name in ("ann", "bob"))
    first = assignment.next_query(store, ann.id, session_id)
    _idle(store, ann.id, 5)
    second = assignment.next_query(store, bob.id, session_id, claim_timeout=timedelta(minutes=1))
    assert second.query_id == first.query_id
    judgments.submit(store, bob.id, second.query_id, grade_all(second, 3))
    with pytest.raises(InputError, match="was released .* judged by its 1 judges: these grades are not needed"):
        judgments.submit(store, ann.id, first.query_id, grade_all(first, 0))
    assert _status(store, ann.id, first.query_id) == "released" and _claims(store, first.query_id) == 1
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment).where(Judgment.judge_id == ann.id)) == 0
    assert assignment.next_query(store, ann.id, session_id) is None
    assignment.skip(store, ann.id, first.query_id)  # a released claim can still be skipped; the count stays
    assert _claims(store, first.query_id) == 1


def test_a_judge_gets_their_released_query_back_while_it_still_needs_a_judge(store):
    session_id = store_session(store, "s", "A", "B", toy_queries(2), judges_per_query=1)
    ann, bob = (add_judge(store, name)[0] for name in ("ann", "bob"))
    first = assignment.next_query(store, ann.id, session_id)
    _idle(store, ann.id, 60)
    back = assignment.next_query(store, ann.id, session_id)  # released, then taken back at once
    assert back.query_id == first.query_id and _status(store, ann.id, first.query_id) == "open"
    assert _claims(store, first.query_id) == 1
    assert assignment.release(store, judge_id=ann.id)[0].query_id == first.query_id
    other = assignment.next_query(store, bob.id, session_id)
    assert other.query_id == first.query_id  # the released query goes to bob first (most claims, then order)
    # the query ann has on screen stays hers to submit, though bob holds its only place now
    shown = assignment.next_query(store, ann.id, session_id, showing=first.query_id)
    assert shown.query_id == first.query_id and _status(store, ann.id, first.query_id) == "released"
    judgments.submit(store, ann.id, first.query_id, grade_all(first, 2))
    assert _status(store, ann.id, first.query_id) == "done" and _claims(store, first.query_id) == 2


def test_release_by_judge_or_by_query_frees_open_claims_only(store):
    session_id = store_session(store, "s", "A", "B", toy_queries(3))
    ann, bob = (add_judge(store, name)[0] for name in ("ann", "bob"))
    a = assignment.next_query(store, ann.id, session_id)
    b = assignment.next_query(store, bob.id, session_id)
    assert a.query_id == b.query_id
    with pytest.raises(InputError, match="say whose claims"):
        assignment.release(store)
    released = assignment.release(store, query_id=a.query_id, session_id=session_id)
    assert sorted(r.judge for r in released) == ["ann", "bob"] and {r.session for r in released} == {"s"}
    assert _claims(store, a.query_id) == 0
    assert assignment.release(store, query_id=a.query_id) == []  # nothing open any more
    judgments.submit(store, bob.id, b.query_id, grade_all(b, 1))  # still accepted: no judgment lost
    nxt = assignment.next_query(store, ann.id, session_id)
    assert nxt.query_id == a.query_id  # ann's released query still needs judges: she gets it back
    assert [r.query_id for r in assignment.release(store, judge_id=ann.id)] == [a.query_id]
    assert assignment.release(store, judge_id=bob.id) == []  # bob's only assignment is done


def test_a_session_display_name_is_checked_and_unique(store):
    first = store_session(store, "nb vs hybrid", "A", "B", toy_queries(1), display_name="  Round 1 ")
    second = store_session(store, "nb vs xreg", "A", "C", toy_queries(1))
    with store.sessions() as session:
        assert session.get(JudgingSession, first).display_name == "Round 1"
    assert [row["display_name"] for row in session_overview(store)] == ["Round 1", f"Session {second}"]
    with pytest.raises(InputError, match="already has the display name 'Round 1'.*--display-name"):
        store_session(store, "other", "A", "B", toy_queries(1), display_name="Round 1")
    with pytest.raises(InputError, match="session display name is empty"):
        store_session(store, "other", "A", "B", toy_queries(1), display_name=" ")


def test_migration_0004_adds_brand_and_price_and_keeps_result_items(db_url):
    upgrade(db_url, "0003")
    engine = make_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text("insert into judging_sessions (id, name, baseline_model, target_model, corpus, "
                                "judges_per_query, seed, settings, created_at) values (1, 's', 'A', 'B', '', 3, 0, '{}', "
                                "'2026-01-02 03:04:05')"))
        connection.execute(text("insert into session_queries (id, session_id, position, text, segment, impressions, "
                                "baseline_side, claims) values (1, 1, 0, 'q', 'head', 1.0, 'left', 0)"))
        connection.execute(text("insert into result_lists (id, query_id, system, model, side) values (1, 1, 'baseline', 'A', 'left')"))
        connection.execute(text("insert into result_items (id, list_id, position, listing_id, title, category) "
                                "values (1, 1, 1, 'x', 'old title', 'A > B')"))
    assert upgrade(db_url, "0004") == ("0003", "0004")
    with engine.begin() as connection:
        assert connection.execute(text("select listing_id, title, brand, price from result_items")).all() == [
            ("x", "old title", None, None)]
        connection.execute(text("update result_items set brand = 'Anker', price = 12.5"))
    assert downgrade(db_url) == ("0004", "0003")
    with engine.begin() as connection:
        assert connection.execute(text("select listing_id, title from result_items")).all() == [("x", "old title")]
    engine.dispose()


def test_brand_and_price_are_stored_with_the_result_items_when_known(store):
    session_id = store_session(store, "s", "A", "B", [QuerySpec("q", "head", [
        Listing("x", brand="Anker", price=12.5), Listing("y", brand=" unknown ", price=float("nan"))], [Listing("z")])])
    with store.sessions() as session:
        query_id = session.scalar(select(SessionQuery.id).where(SessionQuery.session_id == session_id))
        shown = screens.screen(session, query_id)
    by_id = {item.listing_id: (item.brand, item.price) for item in shown.left + shown.right}
    assert by_id == {"x": ("Anker", 12.5), "y": (None, None), "z": (None, None)}


def test_a_listing_in_both_groups_is_graded_once_and_stored_for_both_sides(store):
    queries = [QuerySpec("q", "head", [Listing("same"), Listing("base only")], [Listing("other"), Listing("same")])]
    session_id = store_session(store, "s", "A", "B", queries)
    ann, bob = (add_judge(store, name)[0] for name in ("ann", "bob"))
    shown = assignment.next_query(store, ann.id, session_id)
    assert shown.shared() == {"same"}
    side_of = {item.listing_id: side for side, group in (("left", shown.left), ("right", shown.right))
               for item in group if item.listing_id != "same"}
    others = {(listing, side): 1 for listing, side in side_of.items()}
    # graded once, on either side: the grade is stored for both sides
    result = judgments.submit(store, ann.id, shown.query_id, {("same", "right"): 2, **others})
    assert (result.inserted, result.updated, result.unchanged) == (4, 0, 0)
    assert judgments.my_grades(store, ann.id, shown.query_id) == {("same", "left"): 2, ("same", "right"): 2, **others}
    # a new grade given once updates both sides; the same grade on both sides is accepted too
    again = judgments.submit(store, ann.id, shown.query_id, {("same", "left"): 3, ("same", "right"): 3, **others})
    assert (again.inserted, again.updated, again.unchanged) == (0, 2, 2)
    shown = assignment.next_query(store, bob.id, session_id)
    with pytest.raises(InputError, match="'same' is shown in both groups and takes one grade, got 1 and 2"):
        judgments.submit(store, bob.id, shown.query_id, {("same", "left"): 1, ("same", "right"): 2, **others})
    with pytest.raises(InputError, match="grade every listing: 1 of 4"):
        judgments.submit(store, bob.id, shown.query_id, {("same", "left"): 1, **dict(list(others.items())[:1])})
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(Judgment).where(Judgment.judge_id == bob.id)) == 0


@pytest.mark.slow
def test_migration_0005_keeps_judges_active_and_copies_every_judgment_into_the_history(db_url):
    upgrade(db_url, "0004")
    engine = make_engine(db_url)
    with engine.begin() as connection:
        connection.execute(text("insert into judges (id, name, token_id, token_salt, token_hash, created_at) "
                                "values (1, 'ann', 'abcdefabcdef', '00', '00', '2026-01-02 03:04:05')"))
        connection.execute(text("insert into judging_sessions (id, name, baseline_model, target_model, corpus, "
                                "judges_per_query, seed, settings, created_at) values (1, 's', 'A', 'B', '', 3, 0, '{}', "
                                "'2026-01-02 03:04:05')"))
        connection.execute(text("insert into session_queries (id, session_id, position, text, segment, impressions, "
                                "baseline_side, claims) values (1, 1, 0, 'q', 'head', 1.0, 'left', 1)"))
        connection.execute(text("insert into judgments (judge_id, query_id, listing_id, side, grade, created_at, updated_at) "
                                "values (1, 1, 'x', 'left', 2, '2026-01-02 03:04:05', '2026-01-03 03:04:05'), "
                                "(1, 1, 'y', 'right', 0, '2026-01-02 03:04:05', '2026-01-02 03:04:05')"))
    assert upgrade(db_url, "0005") == ("0004", "0005")
    with engine.begin() as connection:
        assert connection.execute(text("select name, active from judges")).all() == [("ann", True)]
        assert connection.execute(text("select gold from session_queries")).all() == [(False,)]
        assert connection.execute(text("select listing_id, side, grade from judgment_history order by listing_id")).all() == [
            ("x", "left", 2), ("y", "right", 0)]
    assert downgrade(db_url, "0004", drop_data=True) == ("0005", "0004")
    with engine.begin() as connection:
        assert connection.execute(text("select listing_id, grade from judgments order by listing_id")).all() == [
            ("x", 2), ("y", 0)]
    engine.dispose()


def test_downgrading_step_by_step_to_the_first_revision_keeps_sessions_queries_and_judgments(db_url):
    """A step down recreates no parent table: on SQLite that would delete its children's rows."""
    upgrade(db_url)
    store = open_store(db_url)
    session_id = store_session(store, "s", "A", "B", toy_queries(3))
    judge, _ = add_judge(store, "ann")
    screen = assignment.next_query(store, judge.id, session_id)
    judgments.submit(store, judge.id, screen.query_id, grade_all(screen, 2))
    store.dispose()
    tables = ("judging_sessions", "session_queries", "result_lists", "result_items", "assignments", "judgments")

    def counts():
        engine = make_engine(db_url)
        with engine.begin() as connection:
            found = {table: connection.execute(text(f"select count(*) from {table}")).scalar() for table in tables}
        engine.dispose()
        return found

    before = counts()
    assert before["judgments"] > 0 and before["session_queries"] == 3
    for revision in reversed(REVISIONS[:-1]):
        downgrade(db_url, revision, drop_data=True)
        assert counts() == before, revision


def test_a_second_skip_changes_nothing_and_keeps_the_first_flag_note(store):
    session_id = store_session(store, "s", "A", "B", toy_queries(2))
    judge, _ = add_judge(store, "ann")
    shown = assignment.next_query(store, judge.id, session_id)
    assignment.skip(store, judge.id, shown.query_id, flag_note="offensive")
    with pytest.raises(assignment.AlreadyFinished, match="already skipped"):
        assignment.skip(store, judge.id, shown.query_id, flag_note="another window's note")
    with store.sessions() as session:
        record = session.scalar(select(Assignment).where(Assignment.query_id == shown.query_id))
        claims = session.get(SessionQuery, shown.query_id).claims
    assert (record.status, record.flag_note, claims) == ("skipped", "offensive", 0)
