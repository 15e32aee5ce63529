"""What the app's admin page shows: each session's progress per segment, each judge's counts and
last activity, the claims in flight, and the agreement so far (Krippendorff's alpha, live).

Gold questions (``session_queries.gold``) are left out of progress: every judge gets them, so
they have no quota to fill.
"""

from __future__ import annotations

from datetime import datetime, timezone

from sqlalchemy import and_, case, func, select

from qcat.judging.grading.sessions import SEGMENTS, judge_facing_name
from qcat.judging.reporting.categories import build_category_report
from qcat.judging.reporting.report import agreement_rows
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    Assignment,
    Judge,
    JudgingSession,
    Judgment,
    ResultItem,
    ResultList,
    SessionQuery,
    utcnow,
)


def _aware(moment: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes (stored in UTC)."""
    return moment.replace(tzinfo=timezone.utc) if moment is not None and moment.tzinfo is None else moment


def session_progress(store: Store) -> list[dict]:
    """One row per (session, segment): queries, queries with all their judges, judgments done and
    needed, and claims open now."""
    with store.sessions() as session:
        done_per_query = (select(Assignment.query_id, func.count().label("done"))
                          .where(Assignment.status == "done").group_by(Assignment.query_id).subquery())
        rows = session.execute(
            select(JudgingSession.id, JudgingSession.name, JudgingSession.display_name, JudgingSession.judges_per_query,
                   SessionQuery.segment, func.count(SessionQuery.id),
                   func.sum(case((func.coalesce(done_per_query.c.done, 0) >= JudgingSession.judges_per_query, 1),
                                 else_=0)),
                   func.sum(func.coalesce(done_per_query.c.done, 0)))
            .join(SessionQuery, SessionQuery.session_id == JudgingSession.id)
            .outerjoin(done_per_query, done_per_query.c.query_id == SessionQuery.id)
            .where(SessionQuery.gold.is_(False))
            .group_by(JudgingSession.id, JudgingSession.name, JudgingSession.display_name,
                      JudgingSession.judges_per_query, SessionQuery.segment)).all()
        open_claims = {(session_id, segment): n for session_id, segment, n in session.execute(
            select(SessionQuery.session_id, SessionQuery.segment, func.count())
            .join(Assignment, Assignment.query_id == SessionQuery.id)
            .where(Assignment.status == "open", SessionQuery.gold.is_(False))
            .group_by(SessionQuery.session_id, SessionQuery.segment)).all()}
    order = {segment: i for i, segment in enumerate(SEGMENTS)}
    out = [{"session": name, "judges see": judge_facing_name(session_id, display), "segment": segment,
            "queries": int(n), "complete": int(complete or 0), "judgments": int(judged or 0),
            "judgments needed": int(n) * quota, "open claims": open_claims.get((session_id, segment), 0),
            "_order": (session_id, order.get(segment, len(order)))}
           for session_id, name, display, quota, segment, n, complete, judged in rows]
    out.sort(key=lambda row: row.pop("_order"))
    return out


def judge_activity(store: Store) -> list[dict]:
    """One row per judge: active or not, queries judged and skipped, claims open, last activity."""
    with store.sessions() as session:
        counts = session.execute(
            select(Assignment.judge_id,
                   func.sum(case((Assignment.status == "done", 1), else_=0)),
                   func.sum(case((Assignment.status == "skipped", 1), else_=0)),
                   func.sum(case((Assignment.status == "open", 1), else_=0)),
                   func.max(Assignment.active_at), func.max(Assignment.finished_at))
            .group_by(Assignment.judge_id)).all()
        judges = session.execute(select(Judge.id, Judge.name, Judge.active).order_by(Judge.name)).all()
    by_judge = {judge_id: rest for judge_id, *rest in counts}
    out = []
    for judge_id, name, active in judges:
        done, skipped, open_, shown, finished = by_judge.get(judge_id, (0, 0, 0, None, None))
        moments = [m for m in (_aware(shown), _aware(finished)) if m is not None]
        out.append({"id": judge_id, "judge": name, "active": bool(active), "judged": int(done or 0),
                    "skipped": int(skipped or 0), "open claims": int(open_ or 0),
                    "last activity": max(moments) if moments else None})
    return out


def claims_in_flight(store: Store, now: datetime | None = None) -> list[dict]:
    """Every open claim: session, query, judge, and minutes since the judge last had it shown."""
    now = now or utcnow()
    with store.sessions() as session:
        rows = session.execute(
            select(JudgingSession.name, SessionQuery.id, SessionQuery.text, Judge.name, Judge.id, Assignment.active_at)
            .join(SessionQuery, SessionQuery.id == Assignment.query_id)
            .join(JudgingSession, JudgingSession.id == Assignment.session_id)
            .join(Judge, Judge.id == Assignment.judge_id)
            .where(Assignment.status == "open").order_by(Assignment.active_at)).all()
    return [{"session": name, "query_id": query_id, "query": text, "judge": judge, "judge_id": judge_id,
             "idle minutes": round((now - _aware(active)).total_seconds() / 60, 1)}
            for name, query_id, text, judge, judge_id, active in rows]


def live_agreement(store: Store, session_id: int) -> list[dict]:
    """Krippendorff's alpha (ordinal) per segment over every judgment stored so far: the report's
    agreement table (:func:`agreement_rows`), read from the judgments alone (building the whole
    report for it took about a second of CPU at 1,200 judged queries, every time the page drew)."""
    with store.sessions() as session:
        kind = session.get(JudgingSession, session_id).kind
    if kind == "categories":  # (outside that session: on SQLite it holds the store's write lock)
        return build_category_report(store, session_id, bootstrap=0, min_judges=1)["agreement"]
    with store.sessions() as session:
        record = session.get(JudgingSession, session_id)
        regular = (SessionQuery.session_id == session_id, ~SessionQuery.gold)
        segment_by_id = dict(session.execute(select(SessionQuery.id, SessionQuery.segment).where(*regular)).all())
        judgments = session.execute(
            select(Judgment.query_id, Judgment.listing_id, Judgment.side, Judgment.grade)
            .join(SessionQuery, SessionQuery.id == Judgment.query_id)
            .join(Assignment, and_(Assignment.judge_id == Judgment.judge_id, Assignment.query_id == Judgment.query_id))
            .where(*regular, Assignment.status == "done")).all()
        shared = set(map(tuple, session.execute(
            select(ResultList.query_id, ResultItem.listing_id).join(ResultItem, ResultItem.list_id == ResultList.id)
            .join(SessionQuery, SessionQuery.id == ResultList.query_id).where(*regular)
            .group_by(ResultList.query_id, ResultItem.listing_id)
            .having(func.count(func.distinct(ResultList.side)) == 2)).all()))  # tuples: a Row compares slowly
        return agreement_rows(judgments, segment_by_id, shared, record.judges_per_query)
