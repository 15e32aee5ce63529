"""When a judge's gold queries come: one after every ``K`` regular queries (:func:`gold_spacing`),
from a phase of the judge's own (:func:`gold_phase`), in an order of the judge's own
(:func:`gold_order`); all that are left once no regular query is."""

from __future__ import annotations

import random

from sqlalchemy import func, select

from qcat.judging.store.models import Assignment, SessionQuery

GOLD_EVERY = 5  # at most this many regular queries before each gold query (fewer in small sessions)


def gold_spacing(regular: int, gold: int) -> int:
    """``K``: how many regular queries a judge is given before each gold query."""
    return max(1, min(GOLD_EVERY, regular // (gold + 1)))


def gold_candidate(session, judge_id: int, session_id: int, mine, regular_left: bool) -> int | None:
    """The gold query to give this judge now: their next one (session order) when one is due
    (:func:`gold_spacing`), or as soon as no regular query is left for them; else None."""
    sizes = dict(session.execute(select(SessionQuery.gold, func.count()).where(SessionQuery.session_id == session_id)
                                 .group_by(SessionQuery.gold)).all())
    if not sizes.get(True):
        return None
    if regular_left:
        given = dict(session.execute(
            select(SessionQuery.gold, func.count()).join(Assignment, Assignment.query_id == SessionQuery.id)
            .where(Assignment.judge_id == judge_id, Assignment.session_id == session_id)
            .group_by(SessionQuery.gold)).all())
        spacing = gold_spacing(sizes.get(False, 0), sizes[True])
        if given.get(False, 0) < given.get(True, 0) * spacing + gold_phase(judge_id, spacing):
            return None
    left = set(session.scalars(select(SessionQuery.id).where(SessionQuery.session_id == session_id, SessionQuery.gold,
                                                             ~mine)))
    return next((query_id for query_id in gold_order(judge_id, left) if query_id in left), None)


def gold_phase(judge_id: int, spacing: int) -> int:
    """How many regular queries this judge gets before their first gold one: 1..``spacing``, drawn
    from the judge's id, so that judges comparing notes find gold at different places."""
    return 1 + random.Random(f"gold-phase-{judge_id}").randrange(spacing)


def gold_order(judge_id: int, gold_ids) -> list[int]:
    """The order in which this judge gets the gold queries: a shuffle seeded by the judge's id."""
    ordered = sorted(gold_ids)
    random.Random(f"gold-order-{judge_id}").shuffle(ordered)
    return ordered
