"""Issue 46, "Judging, round 4": what needs no browser. The stalled-answer and layout checks in
Chromium are in test_judging_typeahead.py and test_judging_screen.py."""

from __future__ import annotations

import pytest
from judging_fixtures import qcat, toy_queries
from sqlalchemy import select

from qcat.judging.grading import assignment
from qcat.judging.grading.desk import MAX_HOLD, PREFETCH, GradingDesk
from qcat.judging.grading.judges import add_judge
from qcat.judging.grading.sessions import store_session
from qcat.judging.store.connection import open_store
from qcat.judging.store.migrate import upgrade
from qcat.judging.store.models import Assignment


@pytest.fixture
def store(tmp_path):
    url = f"sqlite:///{tmp_path / 'round4.db'}"
    upgrade(url)
    store = open_store(url)
    yield store
    store.dispose()


def test_item_1_an_answer_keeps_every_query_the_panel_holds_whatever_it_wants(store):
    """The panel held 11 queries and, its judge's pace measured on a quick first answer, wanted 5:
    the desk answered with the first 5 of the list, and the judge, on the 10th by the time the answer
    came, lost it. Every held query that is still the judge's comes back, in the panel's order."""
    session_id = store_session(store, "stalled", "A", "B", toy_queries(40), judges_per_query=1)
    ann, _ = add_judge(store, "ann")
    desk = GradingDesk(store, ann.id, session_id)
    held = [shown["id"] for shown in desk.queue([], MAX_HOLD)]
    assert len(held) == MAX_HOLD
    first = held[0]
    shown = desk.drawn[first]
    action = {"id": "enter-1", "kind": "submit", "query": first, "text": "q", "seconds": 1.0,
              "grades": [[slot["listing"], slot["side"], 1] for slot in shown["slots"]]}
    assert desk.take([action])["enter-1"]["status"] == "saved"
    answer = [shown["id"] for shown in desk.queue(held[1:], 1 + PREFETCH)]
    assert answer[:MAX_HOLD - 1] == held[1:]
    assert all(set(shown) == {"id"} for shown in desk.queue(held[1:], 1 + PREFETCH)[:MAX_HOLD - 1])
    with store.sessions() as session:
        still_open = set(session.scalars(select(Assignment.query_id).where(Assignment.judge_id == ann.id,
                                                                          Assignment.status == "open")))
    assert set(held[1:]) <= still_open
    # a held query whose claim went to another judge is still passed over (as before)
    bob, _ = add_judge(store, "bob")
    assignment.release(store, query_id=held[5])
    GradingDesk(store, bob.id, session_id).queue([], MAX_HOLD)
    assert held[5] not in [shown["id"] for shown in desk.queue(held[1:], 1 + PREFETCH)]


def test_item_2_3_one_file_for_two_outputs_of_an_export_is_refused_writing_nothing(tmp_path):
    """``--gold F --csv F`` wrote one over the other and reported both written."""
    db = tmp_path / "export.db"
    assert qcat("db", "upgrade", "--url", db).returncode == 0
    target = tmp_path / "out.tsv"
    for flags in (["--gold", target, "--csv", target],
                  ["--csv", target, "--qrels", tmp_path / "." / "out.tsv"]):
        result = qcat("judge", "export", "any session", "--url", db, *flags)
        assert result.returncode == 2, result.stderr
        line = result.stderr.strip()
        assert line.startswith("qcat: error: ") and "\n" not in line and "Traceback" not in line
        assert "name one file" in line and flags[0] in line and flags[2] in line and "nothing written" in line, line
        assert not target.exists()
    target.write_text("kept\n")
    (tmp_path / "link.tsv").symlink_to(target)
    result = qcat("judge", "export", "any session", "--url", db, "--gold", target, "--qrels", tmp_path / "link.tsv")
    assert result.returncode == 2 and "--qrels and --gold name one file" in result.stderr, result.stderr
    assert target.read_text() == "kept\n"
