"""Claims given up: those idle longer than the claim timeout (released by the next pick of the
session) and those released on demand (``qcat judge release``, the admin page). A gold query's claim
is never released."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import select, update

from qcat.errors import InputError
from qcat.judging.store.connection import Store
from qcat.judging.store.models import Assignment, Judge, JudgingSession, SessionQuery

CLAIM_TIMEOUT = timedelta(minutes=30)
CLAIM_TIMEOUT_ENV = "QCAT_CLAIM_TIMEOUT"  # minutes, for the app (`qcat judge app --claim-timeout`)


def release_where(session, *conditions) -> list[int]:
    """Release the open claims matching ``conditions`` (on assignment columns); returns the ids of
    the released assignments. Each is one conditional update, so a claim is released (and its
    query's count lowered) once even when two judges' requests release it at the same time.
    Claims of gold queries are never released: they keep no other judge waiting."""
    rows = session.execute(select(Assignment.id, Assignment.query_id)
                           .join(SessionQuery, SessionQuery.id == Assignment.query_id)
                           .where(Assignment.status == "open", ~SessionQuery.gold, *conditions)
                           .order_by(Assignment.id)).all()
    released = []
    for assignment_id, query_id in rows:
        hit = session.execute(update(Assignment).where(Assignment.id == assignment_id, Assignment.status == "open",
                                                       *conditions)
                              .values(status="released").execution_options(synchronize_session=False)).rowcount
        if hit == 1:
            session.execute(update(SessionQuery).where(SessionQuery.id == query_id, SessionQuery.claims > 0)
                            .values(claims=SessionQuery.claims - 1).execution_options(synchronize_session=False))
            released.append(assignment_id)
    return released


@dataclass(frozen=True)
class Released:
    """A claim given up by :func:`release`."""

    session: str
    query_id: int
    query: str
    judge: str
    active_at: datetime


def release(store: Store, judge_id: int | None = None, query_id: int | None = None,
            session_id: int | None = None) -> list[Released]:
    """Release the open claims of a judge and/or of a query (optionally only in one session), so
    that the queries go to other judges; the judges may still submit their grades."""
    if judge_id is None and query_id is None:
        raise InputError("say whose claims to release: a judge or a query")
    conditions = [column == value for column, value in ((Assignment.judge_id, judge_id), (Assignment.query_id, query_id),
                                                         (Assignment.session_id, session_id)) if value is not None]
    with store.transaction() as session:
        released = release_where(session, *conditions)
        if not released:
            return []
        rows = session.execute(
            select(JudgingSession.name, SessionQuery.id, SessionQuery.text, Judge.name, Assignment.active_at)
            .join(SessionQuery, SessionQuery.id == Assignment.query_id)
            .join(JudgingSession, JudgingSession.id == Assignment.session_id)
            .join(Judge, Judge.id == Assignment.judge_id)
            .where(Assignment.id.in_(released)).order_by(Assignment.id)).all()
    return [Released(*row) for row in rows]
