"""How far a judge and their session have come: the judge's own counts, and the session's, both
without gold queries."""

from __future__ import annotations

from sqlalchemy import func, select

from qcat.judging.grading.assignment.membership import check_session
from qcat.judging.store.connection import Store
from qcat.judging.store.models import Assignment, SessionQuery


def _judge_counts(session, judge_id: int, session_id: int) -> tuple[list, dict[str, int]]:
    """The judge's assignments per (status, gold), and per status without gold."""
    counts = session.execute(select(Assignment.status, SessionQuery.gold, func.count())
                             .join(SessionQuery, SessionQuery.id == Assignment.query_id)
                             .where(Assignment.judge_id == judge_id, Assignment.session_id == session_id)
                             .group_by(Assignment.status, SessionQuery.gold)).all()
    mine: dict[str, int] = {}  # regular queries only, as the session's counts: gold stays unspotted
    for status, gold, n in counts:
        if not gold:
            mine[status] = mine.get(status, 0) + n
    return counts, mine


def judge_progress(store: Store, judge_id: int, session_id: int) -> dict:
    """This judge's own counts of :func:`progress` alone (``judged``, ``skipped``): one indexed
    query, cheap enough to read after every action."""
    with store.sessions() as session:
        mine = _judge_counts(session, judge_id, session_id)[1]
    return {"judged": mine.get("done", 0), "skipped": mine.get("skipped", 0)}


def progress(store: Store, judge_id: int, session_id: int) -> dict:
    """This judge's counts and the session's, both without gold queries (a judge comparing the two
    cannot tell gold queries apart): queries with all their judges, judgments needed; ``given``:
    every query this judge has been given, gold included."""
    with store.sessions() as session:
        record = check_session(session, session_id)
        counts, mine = _judge_counts(session, judge_id, session_id)
        total = session.scalar(select(func.count()).select_from(SessionQuery)
                               .where(SessionQuery.session_id == session_id, ~SessionQuery.gold))
        regular_done = (select(Assignment.query_id).join(SessionQuery, SessionQuery.id == Assignment.query_id)
                        .where(Assignment.session_id == session_id, Assignment.status == "done", ~SessionQuery.gold))
        done_per_query = (regular_done.group_by(Assignment.query_id)
                          .having(func.count() >= record.judges_per_query).subquery())
        complete = session.scalar(select(func.count()).select_from(done_per_query))
        done = session.scalar(select(func.count()).select_from(regular_done.subquery()))
    return {"judged": mine.get("done", 0), "skipped": mine.get("skipped", 0), "open": mine.get("open", 0),
            "given": sum(n for _, _, n in counts),
            "queries": total, "complete_queries": complete, "judgments_done": done,
            "judgments_needed": total * record.judges_per_query, "session": record.name}
