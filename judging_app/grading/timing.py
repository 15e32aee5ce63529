"""Time per judgment: how long a judge was at work on a query.

The grading panel measures it in the browser (``assignments.active_seconds``): from the query
shown to its grades submitted, counting each gap without a key, a click or a scroll of more than
:data:`IDLE_CAP_SECONDS` as that cap, so a query left open over a break counts the cap, not the
break. Queries submitted before the panel measured time (no ``active_seconds``) fall back on the
time from the assignment's creation to its submission. The report gives the median seconds per
query per judge and per segment, and flags judges much faster than the rest: a median below
:data:`FAST_SHARE` of the median of the other judges' medians, shown beside their gold agreement
(fast and accurate is fine; fast and far from gold is not).
"""

from __future__ import annotations

from datetime import datetime, timezone

import numpy as np
from sqlalchemy import select

from qcat.judging.store.connection import Store
from qcat.judging.store.models import Assignment, Judge, SessionQuery

FAST_SHARE = 0.5
IDLE_CAP_SECONDS = 60  # the grading panel counts a longer gap of inactivity as this many seconds
TIMING_RULE = (f"Time is what the grading panel measured the judge at work on the query: a gap of more than "
               f"{IDLE_CAP_SECONDS} s without a key, click or scroll counts as {IDLE_CAP_SECONDS} s (queries graded "
               "before the panel measured time: from the query shown to its grades submitted).")


def _aware(moment: datetime) -> datetime:
    return moment.replace(tzinfo=timezone.utc) if moment.tzinfo is None else moment


def query_seconds(store: Store, session_id: int) -> list[tuple[str, str, bool, float]]:
    """``(judge, segment, gold, seconds)`` of every submitted query of the session."""
    with store.sessions() as session:
        rows = session.execute(
            select(Judge.name, SessionQuery.segment, SessionQuery.gold, Assignment.created_at, Assignment.finished_at,
                   Assignment.active_seconds)
            .join(Judge, Judge.id == Assignment.judge_id)
            .join(SessionQuery, SessionQuery.id == Assignment.query_id)
            .where(Assignment.session_id == session_id, Assignment.status == "done",
                   Assignment.finished_at.is_not(None))
            .order_by(Assignment.id)).all()
    return [(judge, segment, bool(gold),
             active if active is not None else max(0.0, (_aware(finished) - _aware(shown)).total_seconds()))
            for judge, segment, gold, shown, finished, active in rows]


def timing_summary(store: Store, session_id: int, gold_exact: dict[str, float] | None = None) -> dict:
    """Median seconds per query per judge (with the fast flag and gold agreement) and per segment."""
    from qcat.judging.grading.gold import gold_summary
    from qcat.judging.grading.sessions import SEGMENTS

    timed = query_seconds(store, session_id)
    if gold_exact is None:
        gold_exact = {row["judge"]: row["exact"] for row in gold_summary(store, session_id)["judges"]}
    per_judge: dict[str, list[float]] = {}
    for judge, _, _, seconds in timed:
        per_judge.setdefault(judge, []).append(seconds)
    medians = {judge: float(np.median(values)) for judge, values in per_judge.items()}
    judges = []
    for judge in sorted(medians, key=lambda name: (medians[name], name)):
        others = [m for name, m in medians.items() if name != judge]
        typical = float(np.median(others)) if others else float("nan")
        judges.append({"judge": judge, "queries": len(per_judge[judge]), "median_seconds": medians[judge],
                       "others_median_seconds": typical,
                       "fast": bool(others) and medians[judge] < FAST_SHARE * typical,
                       "gold_exact": gold_exact.get(judge)})
    segments = []
    for segment in SEGMENTS:
        values = [seconds for _, s, gold, seconds in timed if s == segment and not gold]
        segments.append({"segment": segment, "queries": len(values),
                         "median_seconds": float(np.median(values)) if values else float("nan")})
    return {"judges": judges, "segments": segments, "fast_share": FAST_SHARE}
