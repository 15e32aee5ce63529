"""The disagreement queue (qcat.judging.grading.disagreements): listings 2+ grades apart, sent back for
another judgment (one more judge gets the query) or settled (the report uses the admin's grade),
both kept in the history; and the admin page's buttons under AppTest."""

from __future__ import annotations

import pytest
from judging_fixtures import ROOT
from streamlit.testing.v1 import AppTest

from qcat.judging.grading import assignment, disagreements, judgments
from qcat.judging.grading.judges import add_admin, add_judge
from qcat.judging.grading.sessions import Listing, QuerySpec, store_session
from qcat.judging.reporting.report import build_report
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade

APP = str(ROOT / "judging_app" / "pages" / "app.py")


@pytest.fixture
def disputed(tmp_path, monkeypatch):
    """A 2-judges-per-query session of 3 queries; ann grades everything 3, bob everything 1 (2 on
    q2): q0 and q1 are disputed on every listing, q2 is not."""
    url = f"sqlite:///{tmp_path / 'd.db'}"
    upgrade(url)
    store = open_store(url)
    queries = [QuerySpec(f"q{i}", ("head", "torso", "tail")[i], [Listing(f"a{i}", f"A {i}"), Listing(f"s{i}", "S")],
                         [Listing(f"b{i}", f"B {i}"), Listing(f"s{i}", "S")]) for i in range(3)]
    session_id = store_session(store, "s", "A", "B", queries, judges_per_query=2)
    judges = {name: add_judge(store, name)[0] for name in ("ann", "bob", "cy")}
    for name, grade in (("ann", 3), ("bob", 1)):
        while (screen := assignment.next_query(store, judges[name].id, session_id)) is not None:
            grades = {(i.listing_id, side): grade for side, group in (("left", screen.left), ("right", screen.right))
                      for i in group}
            if screen.text == "q2":
                grades = {key: 2 if name == "bob" else grade for key, grade in grades.items()}  # within 1 of ann
            judgments.submit(store, judges[name].id, screen.query_id, grades)
    monkeypatch.setenv("QCAT_DB_URL", url)
    monkeypatch.setenv("QCAT_JUDGE_SESSION", str(session_id))
    yield store, session_id, judges
    store.dispose()


def test_queue_send_back_settle_and_history(disputed):
    store, session_id, judges = disputed
    queue = disagreements.queue(store, session_id)
    assert [item.text for item in queue] == ["q0", "q1"]  # q2: 3 and 2, one apart
    first = queue[0]
    assert sorted(d.listing_id for d in first.listings) == ["a0", "b0", "s0"]  # the shared listing once
    assert all(d.grades == {"ann": 3, "bob": 1} and d.spread == 2 for d in first.listings)
    assert assignment.next_query(store, judges["cy"].id, session_id) is None  # every query has its 2 judges
    disagreements.send_back(store, None, first.query_id, "look again")
    screen = assignment.next_query(store, judges["cy"].id, session_id)
    assert screen is not None and screen.query_id == first.query_id  # one more judge gets it
    judgments.submit(store, judges["cy"].id, screen.query_id, {key: 2 for key in screen.expected()})
    assert [item.text for item in disagreements.queue(store, session_id)] == ["q0", "q1"]  # still disputed
    before = build_report(store, session_id, bootstrap=0)["per_query"]
    disagreements.settle(store, None, first.query_id, {"a0": 0, "s0": 0, "b0": 0}, "all off-topic")
    assert [item.text for item in disagreements.queue(store, session_id)] == ["q1"]
    after = {row["query"]: row for row in build_report(store, session_id, bootstrap=0)["per_query"]}
    assert after["q0"]["baseline"] == pytest.approx(2 ** 0 / 2 ** 3) and after["q0"]["target"] == after["q0"]["baseline"]
    assert {row["query"]: row["baseline"] for row in before}["q1"] == after["q1"]["baseline"]
    history = disagreements.history(store, first.query_id)
    assert [(h["action"], h["listing"], h["grade"]) for h in history] == [
        ("sent back", "", None), ("settled", "a0", 0), ("settled", "b0", 0), ("settled", "s0", 0)]
    with pytest.raises(Exception, match="not shown for query"):
        disagreements.settle(store, None, first.query_id, {"nope": 1})


@pytest.mark.slow
def test_the_admin_page_sends_back_and_settles(disputed):
    store, session_id, _ = disputed
    _, token = add_admin(store, "lead")
    at = AppTest.from_file(APP, default_timeout=30).run()
    at.text_input(key="token").input(token)
    next(b for b in at.button if b.label == "Sign in").click()
    at.run()
    assert any(h.value == "Disagreements" for h in at.header)
    next(b for b in at.button if b.label == "Send back for another judgment").click()
    at.run()
    assert any(s.value.startswith("Sent “q0” back") for s in at.success)
    next(b for b in at.button if b.label == "Settle with these grades").click()
    at.run()
    assert any("Choose a grade" in w.value for w in at.warning)  # nothing chosen: nothing settled
    for radio in [r for r in at.radio if r.key.startswith("admin_settle_")]:
        radio.set_value(1)
    next(b for b in at.button if b.label == "Settle with these grades").click()
    at.run()
    assert any(s.value.startswith("Settled “q0”: 3 listing grade(s)") for s in at.success)
    assert [item.text for item in disagreements.queue(store, session_id)] == ["q1"]
    assert len(disagreements.history(store, disagreements.queue(store, session_id)[0].query_id)) == 0
