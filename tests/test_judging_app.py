"""The Streamlit judging app under ``streamlit.testing.v1.AppTest``: sign-in, the wrong token,
grading, skipping and flagging, resuming after a reload, what a judge must never see, and the
database going down at Submit (on a PostgreSQL server of the test's own, stopped and restarted).
The grading panel's messages are sent as the panel sends them (``judging_fixtures.panel_send``);
what the panel does in the browser is tested in Chromium (test_judging_e2e.py)."""

from __future__ import annotations

import json

import pytest
from judging_fixtures import (
    ROOT,
    PostgresServer,
    free_port,
    fresh_database,
    panel_action,
    panel_answers,
    panel_data,
    panel_query,
    panel_send,
    panel_slots,
)
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from qcat.judging.grading.desk import PREFETCH
from qcat.judging.grading.judges import add_admin, add_judge
from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
from qcat.judging.reporting.admin_figures import judge_activity as admin_activity
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment, Judgment, JudgmentVersion, SessionQuery

APP = str(ROOT / "judging_app" / "pages" / "app.py")
QUERIES = [QuerySpec(f"query {i}", ("head", "torso", "tail")[i % 3],
                     [Listing(f"b{i}-{j}", f"Baseline title {i}.{j} *bold*", "Home > Shoes") for j in range(3)],
                     [Listing(f"t{i}-{j}", f"Target title {i}.{j}", "Home > Shoe care") for j in range(2)])
           for i in range(4)]


pytestmark = pytest.mark.usefixtures("fresh_sign_in_limits")


@pytest.fixture
def app_env(tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'app.db'}"
    upgrade(url)
    store = open_store(url)
    session_id = store_session(store, "nb vs hybrid", "models/nb-secret-name", "models/hybrid-secret-name", QUERIES,
                               seed=3)
    tokens = {name: add_judge(store, name)[1] for name in ("ann", "bob")}
    monkeypatch.setenv("QCAT_DB_URL", url)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    yield store, tokens, session_id
    store.dispose()


def start() -> AppTest:
    return AppTest.from_file(APP, default_timeout=30).run()


def button(at: AppTest, label: str):
    matches = [b for b in at.button if b.label == label]
    assert matches, f"no button {label!r} in {[b.label for b in at.button]}"
    return matches[0]


def sign_in(token: str) -> AppTest:
    at = start()
    at.text_input(key="token").input(token)
    button(at, "Sign in").click()
    return at.run()


def shown_query(at: AppTest) -> str | None:
    return panel_query(at)


def all_text(at: AppTest) -> str:
    """Everything the page shows and the panel was sent."""
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.success]
    return "\n".join(parts) + "\n" + json.dumps(panel_data(at) or {})


def grade_everything(at: AppTest, grade: int) -> AppTest:
    return panel_send(at, panel_action(at, "submit", grade))


def messages(at: AppTest) -> list[str]:
    return [answer["message"] for answer in panel_answers(at)]


def count(store, model, *where) -> int:
    with store.sessions() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where))


@pytest.mark.slow
def test_wrong_token_is_refused(app_env):
    store, tokens, _ = app_env
    for wrong in ("not a token", tokens["ann"][:-2] + "xx", "' OR 1=1 --"):
        at = sign_in(wrong)
        assert [e.value for e in at.error] == ["unknown token: check that you pasted the whole token you were given"]
        assert "judge_id" not in at.session_state and shown_query(at) is None
    assert count(store, Assignment) == 0


@pytest.mark.slow
def test_sign_in_then_grade_a_query(app_env):
    store, tokens, _ = app_env
    at = sign_in(tokens["ann"])
    assert not at.exception and not at.error
    first = shown_query(at)
    data = panel_data(at)
    assert first is not None and len(panel_slots(at)) == 5  # 3 + 2 listings, both groups
    assert len(data["queue"][0]["left"]) + len(data["queue"][0]["right"]) == 5
    assert all(slot["grade"] is None for slot in panel_slots(at))  # nothing pre-selected
    held = min(1 + PREFETCH, len(QUERIES))  # the query shown and those held ready after it
    assert len(data["queue"]) == held and len({shown["id"] for shown in data["queue"]}) == held
    assert count(store, Assignment, Assignment.status == "open") == held  # each claimed for ann
    # an incomplete submission (the panel never sends one) is refused, stores nothing, and the
    # panel, which has moved on, lets go of the query: its claim goes back to the others
    action = panel_action(at, "submit", 3)
    action["grades"] = action["grades"][:1]
    at = panel_send(at, action)
    assert [a["status"] for a in panel_answers(at)] == ["refused"]
    assert "grade every listing: 4 of 5 are not graded yet" in messages(at)[0]
    assert count(store, Judgment) == 0 and count(store, Assignment, Assignment.status == "released") == 1
    second = shown_query(at)
    assert second not in (None, first)
    at = grade_everything(at, 2)
    assert messages(at) == [f"Saved your 5 grades for “{second}”."]
    assert count(store, Judgment) == 5 and count(store, Judgment, Judgment.grade == 2) == 5
    assert shown_query(at) not in (None, first, second)
    assert count(store, Assignment, Assignment.status == "done") == 1


@pytest.mark.slow
def test_skip_and_flag(app_env):
    store, tokens, _ = app_env
    at = sign_in(tokens["bob"])
    first = shown_query(at)
    at = panel_send(at, panel_action(at, "skip"))
    second = shown_query(at)
    assert second not in (None, first) and messages(at) == [f"Skipped “{first}”."]
    at = panel_send(at, panel_action(at, "flag"))  # without a note (the panel never sends one): refused
    assert [a["status"] for a in panel_answers(at)] == ["refused"]
    third = shown_query(at)  # the panel let go of the second; its claim went back
    assert third not in (None, first, second)
    note = "Robert'); DROP TABLE judgments;-- not a product search"
    at = panel_send(at, panel_action(at, "flag", note=note))
    assert messages(at) == [f"Flagged and skipped “{third}”."]
    assert shown_query(at) not in (None, first, second, third)
    with store.sessions() as session:
        rows = session.execute(select(SessionQuery.text, Assignment.status, Assignment.flagged, Assignment.flag_note)
                               .join(SessionQuery, SessionQuery.id == Assignment.query_id).order_by(Assignment.id)).all()
    assert [tuple(r) for r in rows[:3]] == [(first, "skipped", False, ""), (second, "released", False, ""),
                                            (third, "skipped", True, note)]
    assert count(store, Judgment) == 0


@pytest.mark.slow
def test_resume_after_reload_and_never_show_systems_or_other_judges_grades(app_env):
    store, tokens, _ = app_env
    bob = sign_in(tokens["bob"])
    bobs_query = shown_query(bob)
    grade_everything(bob, 3)
    ann = sign_in(tokens["ann"])
    assert shown_query(ann) == bobs_query  # the query closest to its 3 judges comes first
    assert all(slot["grade"] is None for slot in panel_slots(ann))  # bob's grades are not shown
    text = all_text(ann)
    for secret in ("baseline", "target", "Target", "Baseline", "nb-secret-name", "hybrid-secret-name", "bob"):
        assert secret not in text.replace("Baseline title", "").replace("Target title", "")
    ann = grade_everything(ann, 1)
    second = shown_query(ann)
    assert second != bobs_query
    # a reload: a new browser session signs in again and gets the same open query back
    again = sign_in(tokens["ann"])
    assert shown_query(again) == second
    assert panel_data(again)["progress"]["judged"] == 1
    assert [shown["id"] for shown in panel_data(again)["queue"]] == [shown["id"] for shown in panel_data(ann)["queue"]]
    assert count(store, Assignment, Assignment.status == "open") == 6  # 3 held by ann and 3 by bob (after his first)
    assert count(store, Judgment) == 10
    button(again, "Sign out").click()
    again.run()  # ann's claims go back to the others at once
    assert count(store, Assignment, Assignment.status == "open") == 3 and "judge_id" not in again.session_state


@pytest.mark.slow
def test_all_done_and_an_unknown_session(app_env, monkeypatch):
    store, tokens, _ = app_env
    at = sign_in(tokens["ann"])
    for _ in QUERIES:
        at = grade_everything(at, 0)
    assert panel_data(at)["mode"] == "done" and shown_query(at) is None
    monkeypatch.setenv("QCAT_JUDGE_SESSION", "42")
    at = sign_in(tokens["ann"])
    assert any("judging session '42' does not exist" in e.value for e in at.error)


@pytest.mark.slow
def test_without_a_configured_session_the_judge_chooses_one(app_env, monkeypatch):
    store, tokens, _ = app_env
    other = store_session(store, "second session", "A", "B",
                          [QuerySpec("only query", "tail", [Listing("x")], [Listing("y")])])
    monkeypatch.delenv("QCAT_JUDGE_SESSION")
    at = sign_in(tokens["ann"])
    choice = at.sidebar.selectbox(key="session_choice")
    assert choice.options == ["Session 1 (4 queries)", "Session 2 (1 query)"]
    choice.select(other)
    at.run()
    assert shown_query(at) == "only query" and len(panel_slots(at)) == 2


@pytest.mark.slow
def test_judges_see_neutral_session_names_never_the_models_compared(app_env, monkeypatch):
    store, tokens, session_id = app_env
    store_session(store, "demo_model vs xreg-model", "demo/qcat_demo/model", "models/xreg-model",
                  [QuerySpec("only query", "tail", [Listing("x")], [Listing("y")])], display_name="Spring round")
    monkeypatch.delenv("QCAT_JUDGE_SESSION")
    at = sign_in(tokens["ann"])
    choice = at.sidebar.selectbox(key="session_choice")
    assert choice.options == ["Session 1 (4 queries)", "Spring round (1 query)"]
    for option in (session_id, session_id + 1):
        at.sidebar.selectbox(key="session_choice").select(option)
        at.run()
        seen = "\n".join([all_text(at), *(m.value for m in at.sidebar.markdown), *map(str, choice.options),
                          *(t.value for t in at.title)])
        assert panel_data(at)["session"] == ("Session 1" if option == session_id else "Spring round")  # defect 7
        for secret in ("demo_model", "xreg-model", "nb vs hybrid", "nb-secret-name", "hybrid-secret-name", " vs "):
            assert secret not in seen


@pytest.mark.slow
def test_an_empty_token_asks_for_the_token_without_asking_the_store(app_env):
    from sqlalchemy import event
    from sqlalchemy.engine import Engine

    at = start()  # the app's store is open (its schema checked) before the sign-in is pressed
    statements = []

    def count_statement(*_args) -> None:
        statements.append(1)

    event.listen(Engine, "before_cursor_execute", count_statement)
    try:
        for empty in ("", "   "):
            at.text_input(key="token").input(empty)
            button(at, "Sign in").click()
            at.run()
            assert [e.value for e in at.error] == ["enter your judge token: paste the token you were given into "
                                                   "the field, then sign in"]
            assert "judge_id" not in at.session_state
    finally:
        event.remove(Engine, "before_cursor_execute", count_statement)
    assert statements == []


@pytest.mark.slow
def test_cards_show_brand_and_price_when_known(app_env, monkeypatch):
    store, tokens, _ = app_env
    other = store_session(store, "priced", "A", "B", [QuerySpec("usb cable", "head", [
        Listing("known", "Braided USB-C cable", "Electronics > Cables", brand="Anker", price=1299.5),
        Listing("unknown", "Plain cable", "Electronics > Cables", brand="Unknown", price=float("nan"))],
        [Listing("free", "Free cable", "Electronics > Cables", price=0.0)])])
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(other))
    at = sign_in(tokens["ann"])
    assert not at.exception and not at.error and shown_query(at) == "usb cable"
    shown = panel_data(at)["queue"][0]
    cards = {card["title"]: card for card in shown["left"] + shown["right"]}
    assert cards["Braided USB-C cable"]["facts"] == "Brand: Anker · Price: 1,299.50"
    assert "Brand" not in cards["Plain cable"]["facts"] and "Price" not in cards["Plain cable"]["facts"]
    assert cards["Free cable"]["facts"] == "Price: 0.00"
    assert len(panel_slots(at)) == 3


@pytest.mark.slow
def test_a_listing_in_both_groups_has_one_grade_control(app_env, monkeypatch):
    store, tokens, _ = app_env
    shared = store_session(store, "shared", "A", "B", [QuerySpec("oak table", "torso", [
        Listing("same", "Oak dining table"), Listing("left", "Pine table")],
        [Listing("right", "Glass table"), Listing("same", "Oak dining table")])], seed=5)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(shared))
    at = sign_in(tokens["ann"])
    assert shown_query(at) == "oak table"
    assert len(panel_slots(at)) == 3  # 4 cards, the shared listing graded once
    shown = panel_data(at)["queue"][0]
    cards = shown["left"] + shown["right"]
    assert sum(card["title"] == "Oak dining table" for card in cards) == 2
    assert [card.get("same_as") for card in shown["right"] if card["title"] == "Oak dining table"] == [
        next(card["position"] for card in shown["left"] if card["title"] == "Oak dining table")]
    at = panel_send(at, panel_action(at, "submit", [3, 1, 0]))
    assert not at.error and [a["status"] for a in panel_answers(at)] == ["saved"]
    with store.sessions() as session:
        stored = dict(session.execute(select(Judgment.listing_id + "/" + Judgment.side, Judgment.grade)).all())
    assert len(stored) == 4 and stored["same/left"] == stored["same/right"]


STORE_DOWN = ("Not saved: the judging store cannot be reached right now. Your grades are kept here: press R "
              "(or Retry) in a moment.")


@pytest.fixture
def own_postgres():
    """A PostgreSQL server of this test's own (the shared one is never stopped), started."""
    server = PostgresServer()
    server.start()
    yield server
    server.remove()


@pytest.fixture
def down_store(own_postgres, monkeypatch):
    """A store on that server, with a 2-query session and a judge; the app pointed at it."""
    url, drop = fresh_database(own_postgres.admin_url)
    upgrade(url)
    store = open_store(url)
    session_id = store_session(store, "down", "A", "B", QUERIES[:2], seed=3)
    token = add_judge(store, "ann")[1]
    monkeypatch.setenv("QCAT_DB_URL", url)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    yield store, token
    store.dispose()
    drop()


def resent(action: dict) -> dict:
    """The action as the panel sends it again (R): the same, under an id of its own."""
    return {**action, "id": action["id"] + "~1"}


@pytest.mark.slow
def test_database_down_at_submit_keeps_the_grades_and_a_retry_stores_them_once(own_postgres, down_store):
    store, token = down_store
    at = sign_in(token)
    query = shown_query(at)
    assert query is not None and len(panel_slots(at)) == 5
    grades = [3, 0, 2, 1, 2]
    submit = panel_action(at, "submit", grades, seconds=12.5)

    own_postgres.stop()
    at = panel_send(at, submit)
    assert not at.exception and not at.error  # the panel says it, once (defect 9), not the page
    data = panel_data(at)
    assert [a["status"] for a in panel_answers(at)] == ["store_down"] and messages(at) == [STORE_DOWN]
    assert data["store_down"].startswith("The judging store cannot be reached right now")
    assert shown_query(at) == query  # the queries held stay, for the panel to go on with
    page = "\n".join([all_text(at), *(e.value for e in at.error), *(m.value for m in at.sidebar.markdown)])
    for leak in ("Traceback", "127.0.0.1", str(own_postgres.port), ".py", "psycopg", "OperationalError"):
        assert leak not in page

    own_postgres.start()
    at = panel_send(at, resent(submit))
    assert not at.exception and not at.error
    assert messages(at) == [f"Saved your 5 grades for “{query}”."]
    assert count(store, Assignment, Assignment.status == "done") == 1
    at = panel_send(at, resent(submit))  # sent once more (a reload): stored once all the same
    assert [a["status"] for a in panel_answers(at)] == ["saved"]
    with store.sessions() as session:
        rows = session.execute(select(Judgment.listing_id, Judgment.side, func.count(), func.min(Judgment.grade))
                               .group_by(Judgment.listing_id, Judgment.side)).all()
        seconds = session.scalar(select(Assignment.active_seconds).where(Assignment.status == "done"))
    assert len(rows) == 5 and all(n == 1 for _, _, n, _ in rows)
    assert sorted(grade for *_, grade in rows) == sorted(grades)
    assert seconds == 12.5  # the time the panel measured


@pytest.mark.slow
def test_database_down_at_sign_in_and_at_flag_is_one_plain_line_and_a_retry_works(own_postgres, down_store):
    store, token = down_store
    at = start()
    own_postgres.stop()
    at.text_input(key="token").input(token)
    button(at, "Sign in").click()
    at.run()
    assert not at.exception and "judge_id" not in at.session_state
    assert [e.value for e in at.error] == ["The judging store cannot be reached right now; sign in again in a moment."]
    own_postgres.start()
    button(at, "Sign in").click()
    at.run()
    query = shown_query(at)
    assert query is not None and not at.error
    flag = panel_action(at, "flag", note="not a product")
    own_postgres.stop()
    at = panel_send(at, flag)
    assert not at.exception and not at.error and messages(at) == [STORE_DOWN]
    assert shown_query(at) == query
    own_postgres.start()
    at = panel_send(at, resent(flag))
    assert messages(at) == [f"Flagged and skipped “{query}”."]
    with store.sessions() as session:
        rows = session.execute(select(Assignment.status, Assignment.flag_note)
                               .join(SessionQuery, SessionQuery.id == Assignment.query_id)
                               .where(SessionQuery.text == query)).all()
    assert rows == [("skipped", "not a product")]  # once, with its note
    assert shown_query(at) not in (None, query)  # and the next query is shown


@pytest.mark.slow
@pytest.mark.parametrize("elsewhere", ["submit", "skip"])
def test_a_query_finished_in_another_window_is_said_and_changes_nothing(app_env, elsewhere):
    """Without a Streamlit server (AppTest) the app cannot tell which windows are open, so both get
    the judge's open query: the case where it happens (in Chromium, tests/test_judging_windows.py,
    two windows are offered queries of their own)."""
    store, tokens, _ = app_env
    first_tab, second_tab = sign_in(tokens["ann"]), sign_in(tokens["ann"])
    query = shown_query(first_tab)
    assert shown_query(second_tab) == query  # the same open query in both windows
    if elsewhere == "submit":
        second_tab = grade_everything(second_tab, 3)
    else:
        second_tab = panel_send(second_tab, panel_action(second_tab, "skip"))
    assert shown_query(second_tab) not in (None, query)
    stored = count(store, Judgment)
    first_tab = panel_send(first_tab, panel_action(first_tab, "submit", 1))  # the first window's grades for it
    assert not first_tab.exception and not first_tab.error
    done = "graded" if elsewhere == "submit" else "skipped"
    if elsewhere == "submit":  # other grades for the judge's own query: the first stored are kept, and said so
        assert messages(first_tab) == [f"Your grades for “{query}” were not stored: you graded it in another window "
                                       "already (those grades are kept)."]
    else:
        assert messages(first_tab) == [f"“{query}” was already {done} in another window: nothing was changed."]
    assert shown_query(first_tab) not in (None, query)
    assert count(store, Judgment) == stored and count(store, Judgment, Judgment.grade == 1) == 0
    with store.sessions() as session:
        statuses = session.scalars(select(Assignment.status).join(SessionQuery, SessionQuery.id == Assignment.query_id)
                                   .where(SessionQuery.text == query)).all()
    assert statuses == ["done" if elsewhere == "submit" else "skipped"]


def test_submit_refuses_a_query_already_submitted_when_resubmit_is_off(app_env):
    """The store side of a second window's submission that reached the store after the first's."""
    from judging_fixtures import grade_all

    from qcat.judging.grading import assignment, judgments
    from qcat.judging.grading.judges import find_judge

    store, tokens, session_id = app_env
    with store.sessions() as session:
        ann_id = find_judge(session, "ann").id
    screen = assignment.next_query(store, ann_id, session_id)
    judgments.submit(store, ann_id, screen.query_id, grade_all(screen, 3))
    with pytest.raises(assignment.AlreadyFinished, match="already judged by this judge: nothing was changed"):
        judgments.submit(store, ann_id, screen.query_id, grade_all(screen, 1), resubmit=False)
    assert count(store, Judgment, Judgment.grade == 1) == 0
    assert judgments.submit(store, ann_id, screen.query_id, grade_all(screen, 1)).updated == 5  # the API's resubmit


@pytest.mark.slow
def test_a_judge_reviews_and_changes_a_submitted_query(app_env):
    store, tokens, _ = app_env
    at = grade_everything(sign_in(tokens["ann"]), 1)
    judged = messages(at)[0]
    at.run()  # the sidebar's list of submitted queries (refreshed every few seconds in the browser)
    button(at, "Review or change").click()
    at.run()
    data = panel_data(at)
    assert data["mode"] == "review" and len(data["queue"]) == 1
    assert [slot["grade"] for slot in panel_slots(at)] == [1] * 5  # the grades given
    review = panel_action(at, "review", [3, 1, 1, 1, 1])
    at = panel_send(at, review)
    assert messages(at)[0].startswith("Changed 1 grade of"), messages(at)
    assert "“" in judged and count(store, Judgment, Judgment.grade == 3) == 1
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(JudgmentVersion)) == 6  # 5 first grades + 1 change
    assert panel_data(at)["mode"] == "grade" and all(slot["grade"] is None for slot in panel_slots(at))  # back
    at.run()
    assert "(changed 1 time)" in at.selectbox(key="review_choice").options[0]
    button(at, "Review or change").click()  # the same query again, the panel's state still holding the saved
    at = panel_send(at, review)            # review: its old answer does not close the new review at once
    assert panel_data(at)["mode"] == "review" and [slot["grade"] for slot in panel_slots(at)] == [3, 1, 1, 1, 1]


@pytest.mark.slow
def test_the_admin_page_shows_progress_and_deactivates_and_resets_a_judge(app_env):
    store, tokens, _ = app_env
    grade_everything(sign_in(tokens["ann"]), 2)
    _, admin_token = add_admin(store, "boss")
    at = sign_in(admin_token)
    assert not at.exception and at.title[0].value == "qcat judging: admin"
    assert "judge_id" not in at.session_state and panel_data(at) is None  # an admin does not grade
    progress = at.dataframe[0].value
    assert list(progress["segment"]) == ["head", "torso", "tail"] and progress["judgments"].sum() == 1
    judges = at.dataframe[2].value
    assert list(judges["judge"]) == ["ann", "bob"] and list(judges["judged"]) == [1, 0]
    claims = at.dataframe[3].value
    assert list(claims["judge"]) == ["ann"] * 3  # ann's next query and the 2 her panel holds ready
    bob = next(row["id"] for row in admin_activity(store) if row["judge"] == "bob")
    at.selectbox(key="admin_judge").set_value(bob)
    button(at, "Deactivate").click()
    at.run()
    # issue 24, defect 9: nothing happens before a second, explicit click
    assert any(w.value.startswith("Deactivate bob?") for w in at.warning) and not at.success
    assert not sign_in(tokens["bob"]).error
    button(at, "Yes, deactivate").click()
    at.run()
    assert any("Deactivated bob" in s.value for s in at.success)
    assert [e.value for e in sign_in(tokens["bob"]).error] == ["this judge has been deactivated: ask the session's organizer"]
    at.selectbox(key="admin_judge").set_value(bob)
    button(at, "Reactivate").click()
    at.run()
    at.selectbox(key="admin_judge").set_value(bob)
    button(at, "Reset their token").click()
    at.run()
    button(at, "Cancel").click()
    at.run()
    assert not at.code and not any(w.value.startswith("Reset the token") for w in at.warning)
    assert not sign_in(tokens["bob"]).error  # cancelled: the old token still works
    at.selectbox(key="admin_judge").set_value(bob)
    button(at, "Reset their token").click()
    at.run()
    assert any(w.value.startswith("Reset the token of bob?") for w in at.warning) and not at.code
    button(at, "Yes, reset the token").click()
    at.run()
    new_token = at.code[0].value
    assert new_token != tokens["bob"] and not sign_in(new_token).error
    assert [e.value for e in sign_in(tokens["bob"]).error][0].startswith("unknown token")
    button(at, "Release the claims on this query").click()
    at.run()
    assert any("Released 2 claim(s)" in s.value for s in at.success), [s.value for s in at.success]  # ann's and bob's
    ann = next(row["id"] for row in admin_activity(store) if row["judge"] == "ann")
    assert count(store, Assignment, Assignment.status == "released", Assignment.judge_id == ann) == 1


@pytest.mark.slow
def test_a_store_that_cannot_be_opened_is_one_plain_line_without_its_address(app_env, monkeypatch):
    port = free_port()  # nothing listens there
    monkeypatch.setenv("QCAT_DB_URL", f"postgresql+psycopg://qcat:s3cret@127.0.0.1:{port}/judging")
    at = start()
    assert [e.value for e in at.error] == ["The judging store cannot be reached right now; reload the page in a moment."]
    assert not at.exception and not at.text_input
