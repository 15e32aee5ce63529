"""The Streamlit judging app under ``streamlit.testing.v1.AppTest``: sign-in, the wrong token,
grading, skipping and flagging, resuming after a reload, what a judge must never see, and the
database going down at Submit (on a PostgreSQL server of the test's own, stopped and restarted)."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select
from streamlit.testing.v1 import AppTest

from judging_app.admin import judge_activity as admin_activity
from judging_app.judges import add_admin, add_judge
from judging_app.migrate import upgrade
from judging_app.models import Assignment, Judgment, JudgmentVersion, SessionQuery
from judging_app.sessions import Listing, QuerySpec, store_session
from judging_app.store import open_store
from judging_fixtures import ROOT, PostgresServer, free_port, fresh_database

APP = str(ROOT / "judging_app" / "app.py")
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
    for m in at.markdown:
        if m.value.startswith("## Query: "):
            return m.value.removeprefix("## Query: ").replace("\\", "")
    return None


def all_text(at: AppTest) -> str:
    parts = [m.value for m in at.markdown] + [c.value for c in at.caption] + [s.value for s in at.success]
    parts += [r.label for r in at.radio] + [str(o) for r in at.radio for o in r.options]
    return "\n".join(parts)


def grade_everything(at: AppTest, grade: int) -> AppTest:
    for radio in at.radio:
        radio.set_value(grade)
    button(at, "Submit grades").click()
    return at.run()


def count(store, model, *where) -> int:
    with store.sessions() as session:
        return session.scalar(select(func.count()).select_from(model).where(*where))


def test_wrong_token_is_refused(app_env):
    store, tokens, _ = app_env
    for wrong in ("not a token", tokens["ann"][:-2] + "xx", "' OR 1=1 --"):
        at = sign_in(wrong)
        assert [e.value for e in at.error] == ["unknown token: check that you pasted the whole token you were given"]
        assert "judge_id" not in at.session_state and shown_query(at) is None
    assert count(store, Assignment) == 0


def test_sign_in_then_grade_a_query(app_env):
    store, tokens, _ = app_env
    at = sign_in(tokens["ann"])
    assert not at.exception and not at.error
    first = shown_query(at)
    assert first is not None and len(at.radio) == 5  # 3 + 2 listings, both groups
    assert [h.value for h in at.main.subheader] == ["Group A", "Group B"]
    assert all(r.value is None for r in at.radio)  # nothing pre-selected
    assert [str(o) for o in at.radio[0].options] == ["0 Off-topic", "1 Acceptable", "2 Good", "3 Excellent"]
    # an incomplete submission is refused and stores nothing
    at.radio[0].set_value(3)
    button(at, "Submit grades").click()
    at.run()
    assert any("Grade every listing first: 4 of 5" in w.value for w in at.warning)
    assert count(store, Judgment) == 0
    at = grade_everything(at, 2)
    assert any(f"Saved your 5 grades for “{first}”" in s.value for s in at.success)
    assert count(store, Judgment) == 5 and count(store, Judgment, Judgment.grade == 2) == 5
    assert shown_query(at) not in (None, first)
    assert count(store, Assignment, Assignment.status == "done") == 1


def test_skip_and_flag(app_env):
    store, tokens, _ = app_env
    at = sign_in(tokens["bob"])
    first = shown_query(at)
    button(at, "Skip query").click()
    at.run()
    second = shown_query(at)
    assert second not in (None, first) and any("Skipped" in s.value for s in at.success)
    button(at, "Flag & skip").click()  # without a note: refused
    at.run()
    assert any("Write in the note field" in w.value for w in at.warning) and shown_query(at) == second
    note = "Robert'); DROP TABLE judgments;-- not a product search"
    at.text_input(key=[t.key for t in at.text_input if t.key.startswith("note_")][0]).input(note)
    button(at, "Flag & skip").click()
    at.run()
    assert shown_query(at) not in (None, first, second)
    with store.sessions() as session:
        rows = session.execute(select(SessionQuery.text, Assignment.status, Assignment.flagged, Assignment.flag_note)
                               .join(SessionQuery, SessionQuery.id == Assignment.query_id).order_by(Assignment.id)).all()
    assert [tuple(r) for r in rows[:2]] == [(first, "skipped", False, ""), (second, "skipped", True, note)]
    assert count(store, Judgment) == 0


def test_resume_after_reload_and_never_show_systems_or_other_judges_grades(app_env):
    store, tokens, _ = app_env
    bob = sign_in(tokens["bob"])
    bobs_query = shown_query(bob)
    grade_everything(bob, 3)
    ann = sign_in(tokens["ann"])
    assert shown_query(ann) == bobs_query  # the query closest to its 3 judges comes first
    assert all(r.value is None for r in ann.radio)  # bob's grades are not shown
    text = all_text(ann)
    for secret in ("baseline", "target", "Target", "Baseline", "nb-secret-name", "hybrid-secret-name", "bob"):
        assert secret not in text.replace("Baseline title", "").replace("Target title", "")
    ann = grade_everything(ann, 1)
    second = shown_query(ann)
    assert second != bobs_query
    # a reload: a new browser session signs in again and gets the same open query back
    again = sign_in(tokens["ann"])
    assert shown_query(again) == second
    assert any("You: **1 query** judged" in m.value for m in again.sidebar.markdown)
    assert count(store, Assignment, Assignment.status == "open") == 2  # ann's second, and bob's next
    assert count(store, Judgment) == 10


def test_all_done_and_an_unknown_session(app_env, monkeypatch):
    store, tokens, _ = app_env
    at = sign_in(tokens["ann"])
    for _ in QUERIES:
        at = grade_everything(at, 0)
    assert any("All done" in s.value for s in at.success) and shown_query(at) is None
    monkeypatch.setenv("QCAT_JUDGE_SESSION", "42")
    at = sign_in(tokens["ann"])
    assert any("judging session '42' does not exist" in e.value for e in at.error)


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
    assert shown_query(at) == "only query" and len(at.radio) == 2


def test_judges_see_neutral_session_names_never_the_models_compared(app_env, monkeypatch):
    store, tokens, session_id = app_env
    store_session(store, "demo_model vs xreg-model", "demo/qcat_demo/model", "models/xreg-model",
                  [QuerySpec("only query", "tail", [Listing("x")], [Listing("y")])], display_name="Spring round")
    monkeypatch.delenv("QCAT_JUDGE_SESSION")
    at = sign_in(tokens["ann"])
    choice = at.sidebar.selectbox(key="session_choice")
    assert choice.options == ["Session 1 (4 queries)", "Spring round (1 query)"]
    for option in (session_id, session_id + 1):
        choice.select(option)
        at.run()
        seen = "\n".join([all_text(at), *(m.value for m in at.sidebar.markdown), *map(str, choice.options),
                          *(t.value for t in at.title)])
        for secret in ("demo_model", "xreg-model", "nb vs hybrid", "nb-secret-name", "hybrid-secret-name", " vs "):
            assert secret not in seen


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


def test_cards_show_brand_and_price_when_known(app_env, monkeypatch):
    store, tokens, _ = app_env
    other = store_session(store, "priced", "A", "B", [QuerySpec("usb cable", "head", [
        Listing("known", "Braided USB-C cable", "Electronics > Cables", brand="Anker", price=1299.5),
        Listing("unknown", "Plain cable", "Electronics > Cables", brand="Unknown", price=float("nan"))],
        [Listing("free", "Free cable", "Electronics > Cables", price=0.0)])])
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(other))
    at = sign_in(tokens["ann"])
    assert not at.exception and not at.error and shown_query(at) == "usb cable"
    cards = {title: [m.value for m in at.markdown if title in m.value] for title in ("Braided", "Plain", "Free")}
    assert all(len(found) == 1 for found in cards.values()), cards
    assert "Brand: Anker · Price: 1,299\\.50" in cards["Braided"][0]
    assert "Brand" not in cards["Plain"][0] and "Price" not in cards["Plain"][0]
    assert "Price: 0\\.00" in cards["Free"][0] and "Brand" not in cards["Free"][0]
    assert len(at.radio) == 3


def test_a_listing_in_both_groups_has_one_grade_control(app_env, monkeypatch):
    store, tokens, _ = app_env
    shared = store_session(store, "shared", "A", "B", [QuerySpec("oak table", "torso", [
        Listing("same", "Oak dining table"), Listing("left", "Pine table")],
        [Listing("right", "Glass table"), Listing("same", "Oak dining table")])], seed=5)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(shared))
    at = sign_in(tokens["ann"])
    assert shown_query(at) == "oak table"
    assert len(at.radio) == 3  # 4 cards, the shared listing graded once
    assert sum("Oak dining table" in m.value for m in at.markdown) == 2
    assert any("graded there, the grade counts for both groups" in c.value for c in at.caption)
    for radio, grade in zip(at.radio, (3, 1, 0)):
        radio.set_value(grade)
    button(at, "Submit grades").click()
    at.run()
    assert not at.error
    with store.sessions() as session:
        stored = dict(session.execute(select(Judgment.listing_id + "/" + Judgment.side, Judgment.grade)).all())
    assert len(stored) == 4 and stored["same/left"] == stored["same/right"]


STORE_DOWN = ("The judging store cannot be reached right now; your grades are kept here: "
              "press the button again in a moment.")


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


def test_database_down_at_submit_keeps_the_grades_and_a_retry_stores_them_once(own_postgres, down_store):
    store, token = down_store
    at = sign_in(token)
    query = shown_query(at)
    assert query is not None and len(at.radio) == 5
    grades = [3, 0, 2, 1, 2]
    for radio, grade in zip(at.radio, grades):
        radio.set_value(grade)

    own_postgres.stop()
    button(at, "Submit grades").click()
    at.run()
    assert not at.exception
    # said at the top and again by the Submit button, where the judge is looking (defect 1), with a toast
    assert [e.value for e in at.error] == [STORE_DOWN, STORE_DOWN] and not at.warning
    kinds = [node.type for node in at.main.children.values()]
    assert kinds.index("form") < len(kinds) - 1 - kinds[::-1].index("error"), kinds
    assert any("Not saved" in t.value for t in at.toast)
    page = "\n".join([all_text(at), *(e.value for e in at.error), *(m.value for m in at.sidebar.markdown)])
    for leak in ("Traceback", "127.0.0.1", str(own_postgres.port), ".py", "psycopg", "OperationalError"):
        assert leak not in page
    assert shown_query(at) == query and [r.value for r in at.radio] == grades

    own_postgres.start()
    button(at, "Submit grades").click()
    at.run()
    assert not at.exception and not at.error
    assert any(f"Saved your 5 grades for “{query}”" in s.value for s in at.success)
    assert count(store, Assignment, Assignment.status == "done") == 1
    with store.sessions() as session:
        rows = session.execute(select(Judgment.listing_id, Judgment.side, func.count(), func.min(Judgment.grade))
                               .group_by(Judgment.listing_id, Judgment.side)).all()
    assert len(rows) == 5 and all(n == 1 for _, _, n, _ in rows)
    assert sorted(grade for *_, grade in rows) == sorted(grades)


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
    at.text_input(key=next(t.key for t in at.text_input if t.key.startswith("note_"))).input("not a product")
    own_postgres.stop()
    button(at, "Flag & skip").click()
    at.run()
    assert not at.exception and [e.value for e in at.error] == [STORE_DOWN, STORE_DOWN]  # at the top and by the buttons
    assert shown_query(at) == query  # the query and its note stay for the retry
    own_postgres.start()
    button(at, "Flag & skip").click()
    at.run()
    assert any(f"Flagged and skipped “{query}”" in s.value for s in at.success)
    with store.sessions() as session:
        rows = session.execute(select(Assignment.status, Assignment.flag_note)
                               .join(SessionQuery, SessionQuery.id == Assignment.query_id)
                               .where(SessionQuery.text == query)).all()
    assert rows == [("skipped", "not a product")]  # once, with its note
    assert shown_query(at) not in (None, query)  # and the next query is shown


@pytest.mark.parametrize("elsewhere", ["submit", "skip"])
def test_a_query_finished_in_another_window_is_said_and_changes_nothing(app_env, elsewhere):
    store, tokens, _ = app_env
    first_tab, second_tab = sign_in(tokens["ann"]), sign_in(tokens["ann"])
    query = shown_query(first_tab)
    assert shown_query(second_tab) == query  # the same open query in both windows
    if elsewhere == "submit":
        second_tab = grade_everything(second_tab, 3)
    else:
        button(second_tab, "Skip query").click()
        second_tab.run()
    assert shown_query(second_tab) not in (None, query)
    stored = count(store, Judgment)
    first_tab = grade_everything(first_tab, 1)  # the first window's grades for the same query
    assert not first_tab.exception and not first_tab.error
    done = "graded" if elsewhere == "submit" else "skipped"
    assert [w.value for w in first_tab.warning] == [
        f"“{query}” was already {done} in another window: nothing was changed. Here is your next query."]
    assert shown_query(first_tab) not in (None, query) and not first_tab.success
    assert count(store, Judgment) == stored and count(store, Judgment, Judgment.grade == 1) == 0
    with store.sessions() as session:
        statuses = session.scalars(select(Assignment.status).join(SessionQuery, SessionQuery.id == Assignment.query_id)
                                   .where(SessionQuery.text == query)).all()
    assert statuses == ["done" if elsewhere == "submit" else "skipped"]


def test_submit_refuses_a_query_already_submitted_when_resubmit_is_off(app_env):
    """The store side of a second window's submission that reached the store after the first's."""
    from judging_app import assignment, judgments
    from judging_app.judges import find_judge
    from judging_fixtures import grade_all

    store, tokens, session_id = app_env
    with store.sessions() as session:
        ann_id = find_judge(session, "ann").id
    screen = assignment.next_query(store, ann_id, session_id)
    judgments.submit(store, ann_id, screen.query_id, grade_all(screen, 3))
    with pytest.raises(assignment.AlreadyFinished, match="already judged by this judge: nothing was changed"):
        judgments.submit(store, ann_id, screen.query_id, grade_all(screen, 1), resubmit=False)
    assert count(store, Judgment, Judgment.grade == 1) == 0
    assert judgments.submit(store, ann_id, screen.query_id, grade_all(screen, 1)).updated == 5  # the API's resubmit


def test_a_judge_reviews_and_changes_a_submitted_query(app_env):
    store, tokens, _ = app_env
    at = grade_everything(sign_in(tokens["ann"]), 1)
    judged = [m.value for m in at.success if m.value.startswith("Saved")][0]
    button(at, "Review or change").click()
    at.run()
    assert "You submitted this query already" in at.info[0].value
    assert [r.value for r in at.radio] == [1] * 5  # the grades given
    at.radio[0].set_value(3)
    button(at, "Save changes").click()
    at.run()
    assert any(s.value.startswith("Changed 1 grade of") for s in at.success), [s.value for s in at.success]
    assert "“" in judged and count(store, Judgment, Judgment.grade == 3) == 1
    with store.sessions() as session:
        assert session.scalar(select(func.count()).select_from(JudgmentVersion)) == 6  # 5 first grades + 1 change
    assert shown_query(at) is not None and all(r.value is None for r in at.radio)  # back to grading
    assert "(changed 1 time)" in at.selectbox(key="review_choice").options[0]


def test_the_admin_page_shows_progress_and_deactivates_and_resets_a_judge(app_env):
    store, tokens, _ = app_env
    grade_everything(sign_in(tokens["ann"]), 2)
    _, admin_token = add_admin(store, "boss")
    at = sign_in(admin_token)
    assert not at.exception and at.title[0].value == "qcat judging: admin"
    assert "judge_id" not in at.session_state and not at.radio  # an admin does not grade
    progress = at.dataframe[0].value
    assert list(progress["segment"]) == ["head", "torso", "tail"] and progress["judgments"].sum() == 1
    judges = at.dataframe[2].value
    assert list(judges["judge"]) == ["ann", "bob"] and list(judges["judged"]) == [1, 0]
    claims = at.dataframe[3].value
    assert list(claims["judge"]) == ["ann"]  # ann's next query, claimed when her page showed it
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
    assert any("Released 1 claim" in s.value for s in at.success)
    ann = next(row["id"] for row in admin_activity(store) if row["judge"] == "ann")
    assert count(store, Assignment, Assignment.status == "released", Assignment.judge_id == ann) == 1


def test_a_store_that_cannot_be_opened_is_one_plain_line_without_its_address(app_env, monkeypatch):
    port = free_port()  # nothing listens there
    monkeypatch.setenv("QCAT_DB_URL", f"postgresql+psycopg://qcat:s3cret@127.0.0.1:{port}/judging")
    at = start()
    assert [e.value for e in at.error] == ["The judging store cannot be reached right now; reload the page in a moment."]
    assert not at.exception and not at.text_input
