"""Judges' own past judgments (edits keep every version), deactivating a judge, resetting a token,
admin tokens, sign-ins kept across a reload, and what the admin page shows: on SQLite and on
PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from judging_fixtures import grade_all, qcat, toy_queries
from sqlalchemy import func, select, update

from qcat.errors import InputError
from qcat.judging.grading import assignment, judgments
from qcat.judging.grading.judges import add_admin, add_judge, authenticate, authenticate_any, reset_token, set_active
from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
from qcat.judging.reporting import admin_figures as admin
from qcat.judging.reporting.report import build_report
from qcat.judging.reporting.results import load_results
from qcat.judging.store import sign_ins
from qcat.judging.store.models import Admin, Assignment, Judge, JudgmentVersion, SignIn, utcnow


def history_rows(store) -> int:
    with store.sessions() as session:
        return session.scalar(select(func.count()).select_from(JudgmentVersion))


@pytest.mark.slow
def test_changing_a_submitted_judgment_keeps_every_version_and_results_use_the_latest(store):
    queries = [QuerySpec("q", "head", [Listing("a"), Listing("same")], [Listing("same"), Listing("b")])]
    session_id = store_session(store, "s", "A", "B", queries)
    judge, _ = add_judge(store, "ann")
    screen = assignment.next_query(store, judge.id, session_id)
    judgments.submit(store, judge.id, screen.query_id, grade_all(screen, 1), resubmit=False)
    assert history_rows(store) == 4  # a, b, and "same" stored for both sides
    assert [s.edits for s in judgments.submitted_queries(store, judge.id, session_id)] == [0]
    changed = {pair: (3 if pair[0] == "same" else 1) for pair in grade_all(screen, 1)}
    result = judgments.submit(store, judge.id, screen.query_id, changed)
    assert (result.inserted, result.updated, result.unchanged) == (0, 2, 2)  # "same" on both sides
    assert history_rows(store) == 6
    versions = [(listing, side, grade) for listing, side, grade, _ in judgments.history(store, judge.id, screen.query_id)]
    assert sorted(versions[:4]) == sorted((listing, side, 1) for listing, side in grade_all(screen, 1))
    assert sorted(versions[4:]) == [("same", "left", 3), ("same", "right", 3)]
    stored = judgments.history(store, judge.id, screen.query_id)
    assert stored[4][3] >= stored[0][3]  # recorded in order, with their time
    latest = {(j.listing_id, j.side): j.grade for j in load_results(store, session_id).judgments}
    assert latest == changed
    assert [s.edits for s in judgments.submitted_queries(store, judge.id, session_id)] == [2]
    judgments.submit(store, judge.id, screen.query_id, changed)  # the same grades again: no new version
    assert history_rows(store) == 6


def test_a_deactivated_judge_cannot_sign_in_or_get_queries_and_their_claims_go_to_others(store):
    session_id = store_session(store, "s", "A", "B", toy_queries(2), judges_per_query=1)
    ann, token = add_judge(store, "ann")
    bob, _ = add_judge(store, "bob")
    held = assignment.next_query(store, ann.id, session_id)
    judgments.submit(store, ann.id, held.query_id, grade_all(held, 2))
    held = assignment.next_query(store, ann.id, session_id)  # a second query, claimed and open
    key = sign_ins.remember(store, authenticate(store, token))
    released = set_active(store, ann.id, False)
    assert [claim.query_id for claim in released] == [held.query_id]
    with pytest.raises(InputError, match="deactivated"):
        authenticate(store, token)
    with pytest.raises(InputError, match="deactivated"):
        assignment.next_query(store, ann.id, session_id)
    assert sign_ins.recall(store, key) is None
    assert assignment.next_query(store, bob.id, session_id).query_id == held.query_id  # the claim went to bob
    assert len(load_results(store, session_id).judgments) > 0  # ann's judgments stay
    set_active(store, ann.id, True)
    assert authenticate(store, token).id == ann.id


def test_a_reset_token_replaces_the_old_one_and_signs_the_judge_out(store):
    ann, old = add_judge(store, "ann")
    key = sign_ins.remember(store, ann)
    new = reset_token(store, ann.id)
    assert new != old and authenticate(store, new).id == ann.id
    with pytest.raises(InputError, match="unknown token"):
        authenticate(store, old)
    assert sign_ins.recall(store, key) is None
    with pytest.raises(InputError, match="does not exist"):
        reset_token(store, 999)


def test_admin_tokens_are_separate_from_judge_tokens(store):
    boss, admin_token = add_admin(store, "boss")
    ann, judge_token = add_judge(store, "ann")
    with pytest.raises(InputError, match="unknown token"):
        authenticate(store, admin_token)  # an admin token does not grade
    assert isinstance(authenticate_any(store, admin_token), Admin)
    assert isinstance(authenticate_any(store, judge_token), Judge)
    with pytest.raises(InputError, match="already exists"):
        add_admin(store, "boss")
    with store.sessions() as session:
        stored = session.scalar(select(Admin).where(Admin.id == boss.id))
    assert admin_token.split(".")[1] not in (stored.token_hash, stored.token_salt)


def test_a_sign_in_key_is_stored_hashed_and_forgotten_on_sign_out(store):
    ann, _ = add_judge(store, "ann")
    boss, _ = add_admin(store, "boss")
    key, admin_key = sign_ins.remember(store, ann), sign_ins.remember(store, boss)
    assert sign_ins.recall(store, key).id == ann.id and isinstance(sign_ins.recall(store, admin_key), Admin)
    with store.sessions() as session:
        hashes = session.scalars(select(SignIn.key_hash)).all()
    assert key not in hashes and len(hashes) == 2
    assert sign_ins.recall(store, "made-up") is None and sign_ins.recall(store, None) is None
    sign_ins.forget(store, key)
    assert sign_ins.recall(store, key) is None and sign_ins.recall(store, admin_key) is not None


def test_the_admin_overview_counts_progress_judges_claims_and_agreement(store):
    session_id = store_session(store, "nb vs xreg", "A", "B", toy_queries(3), judges_per_query=2,
                               display_name="Round 1")
    ann, _ = add_judge(store, "ann")
    bob, _ = add_judge(store, "bob")
    add_judge(store, "cy")
    for judge in (ann, bob):  # both judge the first query (head)
        screen = assignment.next_query(store, judge.id, session_id)
        judgments.submit(store, judge.id, screen.query_id, grade_all(screen, 2 if judge is ann else 3))
    open_query = assignment.next_query(store, ann.id, session_id).query_id  # ann holds a claim
    assignment.skip(store, bob.id, assignment.next_query(store, bob.id, session_id).query_id)
    with store.transaction() as session:  # ann's claim has been idle for 12 minutes
        session.execute(update(Assignment).where(Assignment.status == "open")
                        .values(active_at=utcnow() - timedelta(minutes=12)))
    progress = admin.session_progress(store)
    assert [(r["segment"], r["queries"], r["complete"], r["judgments"], r["judgments needed"], r["open claims"])
            for r in progress] == [("head", 1, 1, 2, 2, 0), ("torso", 1, 0, 0, 2, 1), ("tail", 1, 0, 0, 2, 0)]
    assert {r["session"] for r in progress} == {"nb vs xreg"} and {r["judges see"] for r in progress} == {"Round 1"}
    activity = {r["judge"]: r for r in admin.judge_activity(store)}
    assert [(activity[n]["judged"], activity[n]["skipped"], activity[n]["open claims"]) for n in ("ann", "bob", "cy")] == [
        (1, 0, 1), (1, 1, 0), (0, 0, 0)]
    assert activity["cy"]["last activity"] is None and activity["ann"]["last activity"] is not None
    claims = admin.claims_in_flight(store)
    assert [(c["judge"], c["query_id"]) for c in claims] == [("ann", open_query)]
    assert 11.5 <= claims[0]["idle minutes"] <= 13
    live = {row["segment"]: row for row in admin.live_agreement(store, session_id)}
    report = {row["segment"]: row for row in build_report(store, session_id, bootstrap=0)["agreement"]}
    assert live["head"]["units"] == report["head"]["units"] > 0
    assert live["head"]["pairwise_agreement"] == 0.0  # ann gave 2, bob 3, to every listing


@pytest.mark.slow
def test_admin_cli_commands(tmp_path):
    db = tmp_path / "s.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    assert qcat("judge", "add-judge", "ann", "--url", db).returncode == 0
    made = qcat("judge", "add-admin", "boss", "--url", db)
    assert made.returncode == 0 and "shown only this once" in made.stderr
    reset = qcat("judge", "reset-token", "ann", "--url", db)
    assert reset.returncode == 0 and "old one no longer works" in reset.stderr
    off = qcat("judge", "deactivate", "ann", "--url", db)
    assert off.returncode == 0 and "deactivated" in off.stderr
    unknown = qcat("judge", "deactivate", "zed", "--url", db)
    assert unknown.returncode == 2 and unknown.stderr.strip() == (
        "qcat: error: no judge named 'zed' (`qcat judge add-judge NAME` adds one)")
    from qcat.judging.store.connection import open_store

    store = open_store(f"sqlite:///{db}")
    try:
        assert isinstance(authenticate_any(store, made.stdout.strip()), Admin)
        with pytest.raises(InputError, match="deactivated"):
            authenticate(store, reset.stdout.strip())
    finally:
        store.dispose()
    assert qcat("judge", "deactivate", "ann", "--reactivate", "--url", db).returncode == 0


@pytest.mark.slow
def test_the_live_agreement_is_the_reports_agreement_read_from_the_judgments_alone(store):
    """Issue 55 item 5: the admin page's agreement no longer builds the whole report; on a session
    with a listing shown in both groups, three judges and three segments, every figure is the
    report's."""
    queries = [QuerySpec(f"query {i}", ("head", "torso", "tail")[i % 3],
                         [Listing(f"s{i}", f"Shared {i}", "Home"), *(Listing(f"b{i}-{j}", f"B {i}.{j}", "Home")
                                                                      for j in range(2))],
                         [Listing(f"s{i}", f"Shared {i}", "Home"), Listing(f"t{i}", f"T {i}", "Home")])
               for i in range(6)]
    session_id = store_session(store, "live", "A", "B", queries, judges_per_query=3)
    judges = [add_judge(store, name)[0] for name in ("ann", "bob", "cy")]
    for n, judge in enumerate(judges):
        while (screen := assignment.next_query(store, judge.id, session_id)) is not None:
            grades = {key: (sum(map(ord, key[0])) * (judge.id + 1) + n) % 4 for key in grade_all(screen, 0)}
            shared = {listing for listing, side in grades if side == "right" and (listing, "left") in grades}
            grades.update({(listing, "right"): grades[(listing, "left")] for listing in shared})
            judgments.submit(store, judge.id, screen.query_id, grades)
    live = admin.live_agreement(store, session_id)
    report = build_report(store, session_id, bootstrap=0, min_judges=1)["agreement"]
    assert [row["segment"] for row in live] == [row["segment"] for row in report]
    for mine, theirs in zip(live, report):
        assert mine.keys() == theirs.keys()
        for key, value in mine.items():
            assert value == pytest.approx(theirs[key], nan_ok=True), (mine["segment"], key)
    assert live[-1]["units"] == 6 * 4  # each query's four listings, the shared one once
