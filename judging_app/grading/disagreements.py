"""The admin page's disagreement queue: queries where judges differ by :data:`SPREAD` (2) or
more grades on a listing, and what an admin does about one.

- :func:`queue`: the session's regular (not gold) queries with a disputed listing not yet
  settled, each listing with every judge's grade; a listing shown in both groups is one listing
  (graded once, stored for both sides);
- :func:`send_back`: one more judgment wanted (``session_queries.extra_judges`` + 1, so the
  next judge who has not judged it gets it); the query stays in the queue until settled;
- :func:`settle`: the admin's own grade for disputed listings, which the report uses instead of
  the judges' mean (:mod:`qcat.judging.reporting.results`); the query leaves the queue.

Both are rows of ``query_reviews``, never changed or deleted: :func:`history` lists them.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from sqlalchemy import func, select, update

from qcat.errors import InputError
from qcat.judging.grading.assignment import check_note
from qcat.judging.grading.judgments import check_grade
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    Admin,
    Assignment,
    Judge,
    Judgment,
    QueryReview,
    ResultItem,
    ResultList,
    SessionQuery,
    utcnow,
)

SPREAD = 2


@dataclass(frozen=True)
class Disputed:
    listing_id: str
    title: str
    grades: dict[str, int]  # judge name -> grade

    @property
    def spread(self) -> int:
        return max(self.grades.values()) - min(self.grades.values())


@dataclass(frozen=True)
class Disagreement:
    query_id: int
    text: str
    segment: str
    judges: int
    sent_back: int  # times sent back so far
    listings: list[Disputed]


def queue(store: Store, session_id: int) -> list[Disagreement]:
    """The session's queries with a listing whose grades differ by 2 or more and that no admin
    has settled; the largest spread first, then session order. The spreads are found in SQL, so
    that only the disputed queries' grades and titles are read (a live sprint's admin page reads
    this on every reload)."""
    with store.sessions() as session:
        done = ((Assignment.judge_id == Judgment.judge_id) & (Assignment.query_id == Judgment.query_id))
        disputed_ids = set(session.scalars(
            select(Judgment.query_id).join(SessionQuery, SessionQuery.id == Judgment.query_id).join(Assignment, done)
            .where(SessionQuery.session_id == session_id, ~SessionQuery.gold, Assignment.status == "done")
            .group_by(Judgment.query_id, Judgment.listing_id)
            .having(func.max(Judgment.grade) - func.min(Judgment.grade) >= SPREAD)))
        if not disputed_ids:
            return []
        rows = session.execute(
            select(SessionQuery.id, SessionQuery.text, SessionQuery.segment, SessionQuery.position,
                   SessionQuery.extra_judges, Judgment.listing_id, Judge.name, Judgment.grade)
            .join(Judgment, Judgment.query_id == SessionQuery.id)
            .join(Judge, Judge.id == Judgment.judge_id)
            .join(Assignment, done)
            .where(SessionQuery.id.in_(disputed_ids), Assignment.status == "done")
            .order_by(SessionQuery.position, Judgment.side)).all()
        settled = set(session.execute(
            select(QueryReview.query_id, QueryReview.listing_id).join(SessionQuery, SessionQuery.id == QueryReview.query_id)
            .where(SessionQuery.session_id == session_id, QueryReview.action == "settled")).all())
        sent_back = defaultdict(int)
        for (query_id,) in session.execute(
                select(QueryReview.query_id).join(SessionQuery, SessionQuery.id == QueryReview.query_id)
                .where(SessionQuery.session_id == session_id, QueryReview.action == "sent_back")):
            sent_back[query_id] += 1
        titles = dict(session.execute(
            select(ResultItem.listing_id, ResultItem.title).join(ResultList, ResultList.id == ResultItem.list_id)
            .where(ResultList.query_id.in_(disputed_ids))).all())
    queries: dict[int, tuple] = {}
    grades: dict[int, dict[str, dict[str, int]]] = defaultdict(lambda: defaultdict(dict))
    for query_id, text, segment, position, _, listing, judge, grade in rows:
        queries[query_id] = (text, segment, position)
        grades[query_id][listing].setdefault(judge, grade)  # a listing in both groups: one grade per judge
    out = []
    for query_id, (text, segment, position) in queries.items():
        disputed = [Disputed(listing, titles.get(listing, ""), dict(by_judge))
                    for listing, by_judge in grades[query_id].items()
                    if (query_id, listing) not in settled and max(by_judge.values()) - min(by_judge.values()) >= SPREAD]
        if disputed:
            judges = len({judge for by_judge in grades[query_id].values() for judge in by_judge})
            out.append((-max(d.spread for d in disputed), position,
                        Disagreement(query_id, text, segment, judges, sent_back[query_id], disputed)))
    return [item for *_, item in sorted(out, key=lambda row: row[:2])]


def _check_query(session, query_id: int, session_id: int | None) -> SessionQuery:
    query = session.get(SessionQuery, query_id)
    if query is None or (session_id is not None and query.session_id != session_id):
        raise InputError(f"query {query_id!r} is not in that session")
    return query


def send_back(store: Store, admin_id: int | None, query_id: int, note: str = "", session_id: int | None = None) -> None:
    """Ask for one more judgment of the query (its quota + 1), kept in the history."""
    note = check_note(note)
    with store.transaction() as session:
        _check_query(session, query_id, session_id)
        session.execute(update(SessionQuery).where(SessionQuery.id == query_id)
                        .values(extra_judges=SessionQuery.extra_judges + 1).execution_options(synchronize_session=False))
        session.add(QueryReview(query_id=query_id, admin_id=admin_id, action="sent_back", note=note, created_at=utcnow()))


def settle(store: Store, admin_id: int | None, query_id: int, grades: dict[str, object], note: str = "",
           session_id: int | None = None) -> None:
    """The admin's grade of each listing in ``grades`` (listing id -> 0-3): the report uses it
    instead of the judges' mean. Every listing must be shown for the query."""
    note = check_note(note)
    if not grades:
        raise InputError("settle with a grade for at least one listing")
    checked = {str(listing): check_grade(grade) for listing, grade in grades.items()}
    with store.transaction() as session:
        _check_query(session, query_id, session_id)
        shown = set(session.scalars(select(ResultItem.listing_id).join(ResultList, ResultList.id == ResultItem.list_id)
                                    .where(ResultList.query_id == query_id)))
        unknown = sorted(set(checked) - shown)
        if unknown:
            raise InputError(f"listing {unknown[0]!r} is not shown for query {query_id}")
        now = utcnow()
        for listing, grade in sorted(checked.items()):
            session.add(QueryReview(query_id=query_id, admin_id=admin_id, action="settled", listing_id=listing,
                                    grade=grade, note=note, created_at=now))


def history(store: Store, query_id: int) -> list[dict]:
    """Every admin action on the query, oldest first."""
    with store.sessions() as session:
        rows = session.execute(
            select(QueryReview.created_at, Admin.name, QueryReview.action, QueryReview.listing_id, QueryReview.grade,
                   QueryReview.note)
            .outerjoin(Admin, Admin.id == QueryReview.admin_id)
            .where(QueryReview.query_id == query_id).order_by(QueryReview.id)).all()
    return [{"when": when, "admin": admin or "", "action": action.replace("_", " "), "listing": listing or "",
             "grade": grade, "note": note} for when, admin, action, listing, grade, note in rows]
