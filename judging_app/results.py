"""Reading a session's judgments back, for the report and the exports.

Only judgments of finished (``done``) assignments count: a judge's grades of a query are
submitted all at once, and a skipped query has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import and_, select

from judging_app.models import Assignment, Judge, Judgment, JudgingSession, ResultItem, ResultList, SessionQuery
from judging_app.sessions import find_session
from judging_app.store import Store


@dataclass(frozen=True)
class QueryRow:
    id: int
    text: str
    segment: str
    baseline_side: str
    judges: int  # finished assignments
    skipped: int
    flagged: int


@dataclass(frozen=True)
class ItemRow:
    query_id: int
    system: str  # baseline | target
    side: str  # left | right
    position: int
    listing_id: str


@dataclass(frozen=True)
class JudgmentRow:
    query_id: int
    judge: str
    judge_id: int
    listing_id: str
    side: str
    system: str
    position: int
    grade: int
    created_at: datetime
    updated_at: datetime


@dataclass(frozen=True)
class SessionResults:
    id: int
    name: str
    baseline_model: str
    target_model: str
    judges_per_query: int
    settings: str
    queries: list[QueryRow]
    items: list[ItemRow]
    judgments: list[JudgmentRow]
    flag_notes: list[tuple[int, str, str]]  # (query id, judge, note)


def load_results(store: Store, key: str | int) -> SessionResults:
    with store.sessions() as session:
        record: JudgingSession = find_session(session, key)
        statuses = session.execute(
            select(Assignment.query_id, Assignment.status, Assignment.flagged, Assignment.flag_note, Judge.name)
            .join(Judge, Judge.id == Assignment.judge_id).where(Assignment.session_id == record.id)).all()
        done, skipped, flagged, notes = {}, {}, {}, []
        for query_id, status, is_flagged, note, judge in statuses:
            if status == "done":
                done[query_id] = done.get(query_id, 0) + 1
            elif status == "skipped":
                skipped[query_id] = skipped.get(query_id, 0) + 1
            if is_flagged:
                flagged[query_id] = flagged.get(query_id, 0) + 1
                notes.append((query_id, judge, note))
        queries = [QueryRow(q.id, q.text, q.segment, q.baseline_side, done.get(q.id, 0), skipped.get(q.id, 0),
                            flagged.get(q.id, 0))
                   for q in session.scalars(select(SessionQuery).where(SessionQuery.session_id == record.id)
                                            .order_by(SessionQuery.position))]
        items = [ItemRow(*row) for row in session.execute(
            select(ResultList.query_id, ResultList.system, ResultList.side, ResultItem.position, ResultItem.listing_id)
            .join(ResultItem, ResultItem.list_id == ResultList.id)
            .join(SessionQuery, SessionQuery.id == ResultList.query_id)
            .where(SessionQuery.session_id == record.id)
            .order_by(ResultList.query_id, ResultList.system, ResultItem.position))]
        judgments = [JudgmentRow(*row) for row in session.execute(
            select(Judgment.query_id, Judge.name, Judge.id, Judgment.listing_id, Judgment.side, ResultList.system,
                   ResultItem.position, Judgment.grade, Judgment.created_at, Judgment.updated_at)
            .join(Judge, Judge.id == Judgment.judge_id)
            .join(SessionQuery, SessionQuery.id == Judgment.query_id)
            .join(Assignment, and_(Assignment.judge_id == Judgment.judge_id, Assignment.query_id == Judgment.query_id))
            .join(ResultList, and_(ResultList.query_id == Judgment.query_id, ResultList.side == Judgment.side))
            .join(ResultItem, and_(ResultItem.list_id == ResultList.id, ResultItem.listing_id == Judgment.listing_id))
            .where(SessionQuery.session_id == record.id, Assignment.status == "done")
            .order_by(Judgment.query_id, Judgment.side, ResultItem.position, Judge.name))]
        return SessionResults(record.id, record.name, record.baseline_model, record.target_model,
                              record.judges_per_query, record.settings, queries, items, judgments, notes)
