"""Reading a session's judgments back, for the report and the exports.

Only judgments of finished (``done``) assignments count: a judge's grades of a query are
submitted all at once, and a skipped query has none. The report and the exports count a query
once ``--min-judges`` judges (default: all of the session's) have graded it
(:func:`judged_by_enough`), so by default they cover the same queries.

A listing an admin settled (the disagreement queue, :mod:`qcat.judging.grading.disagreements`) has
their grade in ``settled``; the report uses it instead of the judges' mean.

Gold questions (:mod:`qcat.judging.grading.gold`) are left out entirely: their queries, lists,
judgments, skips and flags are not in :class:`SessionResults`, so no metric or export of the
session sees them; :func:`qcat.judging.grading.gold.judge_agreement` reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

from sqlalchemy import and_, select

from qcat.errors import InputError
from qcat.judging.grading.sessions import find_session
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    Assignment,
    Judge,
    JudgingSession,
    Judgment,
    QueryReview,
    ResultItem,
    ResultList,
    SessionQuery,
)


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
    category: str = ""  # the listing's category path (a category session: the category's own path)
    answer: str = "top"  # which of the model's answers (qcat.judging.store.models.ANSWERS): top, or a node answer


@dataclass(frozen=True)
class JudgmentRow:
    query_id: int
    judge: str
    judge_id: int
    listing_id: str
    side: str
    system: str  # a category session: the systems that proposed the category, "baseline+target" for both
    position: int  # a category session: its best rank among the proposals
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
    settled: dict = field(default_factory=dict)  # (query id, listing id) -> the grade an admin settled on
    kind: str = "results"  # categories: items are the models' proposed categories (listing_id the category id)


def load_results(store: Store, key: str | int) -> SessionResults:
    with store.sessions() as session:
        record: JudgingSession = find_session(session, key)
        statuses = session.execute(
            select(Assignment.query_id, Assignment.status, Assignment.flagged, Assignment.flag_note, Judge.name)
            .join(Judge, Judge.id == Assignment.judge_id)
            .join(SessionQuery, SessionQuery.id == Assignment.query_id)
            .where(Assignment.session_id == record.id, ~SessionQuery.gold)).all()
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
                   for q in session.scalars(select(SessionQuery).where(SessionQuery.session_id == record.id,
                                                                       ~SessionQuery.gold)
                                            .order_by(SessionQuery.position))]
        items = [ItemRow(*row) for row in session.execute(
            select(ResultList.query_id, ResultList.system, ResultList.side, ResultItem.position, ResultItem.listing_id,
                   ResultItem.category, ResultItem.answer)
            .join(ResultItem, ResultItem.list_id == ResultList.id)
            .join(SessionQuery, SessionQuery.id == ResultList.query_id)
            .where(SessionQuery.session_id == record.id, ~SessionQuery.gold)
            .order_by(ResultList.query_id, ResultList.system, ResultItem.position))]
        finished = (select(Judgment.query_id, Judge.name, Judge.id, Judgment.listing_id, Judgment.side, Judgment.grade,
                           Judgment.created_at, Judgment.updated_at)
                    .join(Judge, Judge.id == Judgment.judge_id)
                    .join(SessionQuery, SessionQuery.id == Judgment.query_id)
                    .join(Assignment, and_(Assignment.judge_id == Judgment.judge_id,
                                           Assignment.query_id == Judgment.query_id))
                    .where(SessionQuery.session_id == record.id, ~SessionQuery.gold, Assignment.status == "done"))
        if record.kind == "categories":
            judgments = category_judgments(session.execute(finished.order_by(Judgment.query_id, Judgment.listing_id,
                                                                              Judge.name)).all(), items)
        else:
            judgments = [JudgmentRow(query_id, judge, judge_id, listing, side, system, position, grade, created, updated)
                         for query_id, judge, judge_id, listing, side, grade, created, updated, system, position
                         in session.execute(
                             finished.add_columns(ResultList.system, ResultItem.position)
                             .join(ResultList, and_(ResultList.query_id == Judgment.query_id,
                                                    ResultList.side == Judgment.side))
                             .join(ResultItem, and_(ResultItem.list_id == ResultList.id,
                                                    ResultItem.listing_id == Judgment.listing_id))
                             .order_by(Judgment.query_id, Judgment.side, ResultItem.position, Judge.name))]
        settled = {}
        for query_id, listing_id, grade in session.execute(  # oldest first: the latest settlement wins
                select(QueryReview.query_id, QueryReview.listing_id, QueryReview.grade)
                .join(SessionQuery, SessionQuery.id == QueryReview.query_id)
                .where(SessionQuery.session_id == record.id, QueryReview.action == "settled")
                .order_by(QueryReview.id)):
            settled[(query_id, listing_id)] = grade
        return SessionResults(record.id, record.name, record.baseline_model, record.target_model,
                              record.judges_per_query, record.settings, queries, items, judgments, notes, settled,
                              record.kind)


def category_judgments(rows, items: list[ItemRow]) -> list[JudgmentRow]:
    """A category session's judgments, each with the systems that proposed its category and its
    best rank among them (the judge saw neither)."""
    proposed: dict[tuple[int, str], list[ItemRow]] = {}
    for item in items:
        proposed.setdefault((item.query_id, item.listing_id), []).append(item)
    out = []
    for query_id, judge, judge_id, listing, side, grade, created, updated in rows:
        by = proposed.get((query_id, listing), [])
        out.append(JudgmentRow(query_id, judge, judge_id, listing, side, "+".join(sorted(i.system for i in by)),
                               min((i.position for i in by), default=0), grade, created, updated))
    return out


def judges_needed(results: SessionResults, min_judges: int | None) -> int:
    """``--min-judges``, or the session's judges per query; checked against the session."""
    needed = results.judges_per_query if min_judges is None else min_judges
    if not 1 <= needed <= results.judges_per_query:
        raise InputError(f"--min-judges must lie in 1..{results.judges_per_query}, got {needed}")
    return needed


@dataclass(frozen=True)
class Selection:
    results: SessionResults  # only the queries graded by enough judges, and their judgments
    needed: int
    left_out: int  # queries graded by some judges, but fewer than needed


def judged_by_enough(results: SessionResults, min_judges: int | None) -> Selection:
    needed = judges_needed(results, min_judges)
    kept = {q.id for q in results.queries if q.judges >= needed}
    left_out = sum(1 for q in results.queries if 0 < q.judges < needed)
    selected = replace(results, queries=[q for q in results.queries if q.id in kept],
                       items=[i for i in results.items if i.query_id in kept],
                       judgments=[j for j in results.judgments if j.query_id in kept])
    return Selection(selected, needed, left_out)
