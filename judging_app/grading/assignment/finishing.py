"""A query the judge is done with without grades: skipped (the claim goes to another judge) or
flagged with a note; whether it is finished; and the assignment an action on a query finds."""

from __future__ import annotations

from sqlalchemy import select, update

from qcat.errors import InputError
from qcat.judging.store.connection import Store
from qcat.judging.store.models import Assignment, SessionQuery, utcnow

MAX_NOTE = 2000


class AlreadyFinished(InputError):
    """The judge's assignment of the query is already done or skipped (in another window, say):
    the action changed nothing."""

    def __init__(self, query_id: int, status: str) -> None:
        self.query_id, self.status = query_id, status
        done = "judged" if status == "done" else "skipped"
        super().__init__(f"query {query_id!r} was already {done} by this judge: nothing was changed")


def judge_assignment(session, judge_id: int, query_id: int) -> Assignment:
    assignment = session.scalar(select(Assignment).where(Assignment.judge_id == judge_id, Assignment.query_id == query_id)
                                .with_for_update())
    if assignment is None:
        if session.get(SessionQuery, query_id) is None:
            raise InputError(f"query {query_id!r} does not exist")
        raise InputError(f"query {query_id!r} is not assigned to this judge")
    return assignment


def check_note(note: str) -> str:
    if not isinstance(note, str):
        raise InputError("the flag note must be text")
    note = note.strip()
    if len(note) > MAX_NOTE:
        raise InputError(f"the flag note is longer than {MAX_NOTE} characters")
    return note


def skip(store: Store, judge_id: int, query_id: int, flag_note: str | None = None) -> None:
    """The judge passes on the query (optionally flagging it with a note): the claim is
    released for another judge, and this judge never gets the query again."""
    note = check_note(flag_note) if flag_note is not None else ""
    with store.transaction() as session:
        assignment = judge_assignment(session, judge_id, query_id)
        if assignment.status in ("done", "skipped"):  # a second skip (another window) keeps the first note
            raise AlreadyFinished(query_id, assignment.status)
        if assignment.status == "open":
            session.execute(update(SessionQuery).where(SessionQuery.id == query_id, SessionQuery.claims > 0)
                            .values(claims=SessionQuery.claims - 1).execution_options(synchronize_session=False))
        assignment.status = "skipped"
        assignment.finished_at = utcnow()
        if note:
            assignment.flagged, assignment.flag_note = True, note


def finished(store: Store, judge_id: int, query_id: int) -> str | None:
    """'done' or 'skipped' when this judge's assignment of the query is finished, else None."""
    with store.sessions() as session:
        status = session.scalar(select(Assignment.status).where(Assignment.judge_id == judge_id,
                                                                 Assignment.query_id == query_id))
    return status if status in ("done", "skipped") else None


def flag(store: Store, judge_id: int, query_id: int, note: str) -> None:
    """Flag a query the judge holds or has judged (e.g. offensive, unintelligible)."""
    note = check_note(note)
    if not note:
        raise InputError("say what is wrong with the query: the flag note is empty")
    with store.transaction() as session:
        assignment = judge_assignment(session, judge_id, query_id)
        assignment.flagged, assignment.flag_note = True, note
