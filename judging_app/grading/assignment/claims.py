"""Which query a judge gets next, and the claim that makes it theirs: the query on screen, their open
one, a released one of theirs that still needs a judge, else a new claim (a gold query when one is
due), each claim one conditional update, the whole pick started over when it races another."""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from datetime import datetime, timedelta

from sqlalchemy import exists, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from qcat.errors import InputError
from qcat.judging.grading.assignment.gold_turns import gold_candidate
from qcat.judging.grading.assignment.membership import INACTIVE, check_member, check_session, judge_exists
from qcat.judging.grading.assignment.release import CLAIM_TIMEOUT, release_where
from qcat.judging.grading.screens import QueryScreen, screen
from qcat.judging.store.connection import Store
from qcat.judging.store.models import Assignment, Judge, JudgingSession, SessionQuery, utcnow

CANDIDATES = 16
RETRIES = 50


class _Mine:
    """The judge's open and released assignments in the session, read once per pick (one query,
    not one per query the panel holds); the open claims kept alive are touched in one update."""

    def __init__(self, session, judge_id: int, record: JudgingSession) -> None:
        self.session, self.record = session, record
        self.rows = list(session.scalars(
            select(Assignment).where(Assignment.judge_id == judge_id, Assignment.session_id == record.id,
                                     Assignment.status.in_(("open", "released"))).order_by(Assignment.id)))
        self.touched: list[int] = []

    def on_screen(self, query_id: int) -> Assignment | None:
        """The judge's assignment of the query on their screen, unless it is done or skipped (the rows
        are the open and released ones)."""
        return next((row for row in self.rows if row.query_id == query_id), None)

    def open(self, beyond: Collection[int]) -> Assignment | None:
        return next((row for row in self.rows if row.status == "open" and row.query_id not in beyond), None)

    def released_needing_a_judge(self) -> list[Assignment]:
        released = [row for row in self.rows if row.status == "released"]
        if not released:
            return []
        needing = set(self.session.scalars(
            select(SessionQuery.id).where(SessionQuery.id.in_([row.query_id for row in released]),
                                          or_(SessionQuery.gold, SessionQuery.claims
                                              < self.record.judges_per_query + SessionQuery.extra_judges))))
        return [row for row in released if row.query_id in needing]

    def reclaim(self, held: Assignment, now: datetime) -> bool:
        """Keep the judge's claim alive: an open one is touched (at :meth:`touch`), a released one
        is claimed again if the query still has room. False when a released claim could not be
        taken back."""
        if held.status == "released":
            if not _claim(self.session, held.query_id, self.record.judges_per_query):
                return False
            held.status, held.active_at = "open", now
        elif held.id not in self.touched:
            self.touched.append(held.id)
        return True

    def touch(self, now: datetime) -> None:
        if self.touched:
            self.session.execute(update(Assignment).where(Assignment.id.in_(self.touched), Assignment.status == "open")
                                 .values(active_at=now).execution_options(synchronize_session=False))


def _claim(session, query_id: int, limit: int) -> bool:
    """Raise the query's claim count unless it already has ``limit`` claims (one conditional
    update); a gold query has no limit (every judge gets it)."""
    return session.execute(
        update(SessionQuery).where(SessionQuery.id == query_id,
                                  or_(SessionQuery.gold, SessionQuery.claims < limit + SessionQuery.extra_judges))
        .values(claims=SessionQuery.claims + 1).execution_options(synchronize_session=False)).rowcount == 1


def next_query(store: Store, judge_id: int, session_id: int, claim_timeout: timedelta = CLAIM_TIMEOUT,
               showing: int | None = None, beyond: Collection[int] = ()) -> QueryScreen | None:
    """The query this judge should judge now, or None when no query of the session still needs
    this judge. Claims of the session idle longer than ``claim_timeout`` are released first. In
    order: the query on the judge's screen (``showing``, while not done or skipped, even when its
    claim was released and could not be taken back: their grades may still count), their open
    query, a query of theirs whose claim was released and that still needs a judge, a new claim:
    their next gold query when one is due (see the module's docstring), else a regular query.
    ``beyond``: queries the judge already holds ahead (the grading panel's prefetch): the query
    after them is wanted, and they are neither given again nor released."""
    def pick(session) -> QueryScreen | None:
        record, now = _ready(session, judge_id, session_id, claim_timeout)
        mine = _Mine(session, judge_id, record)
        query_id = _pick(session, judge_id, record, now, mine, showing, beyond)
        mine.touch(now)
        return screen(session, query_id, judge_id) if query_id is not None else None

    return _claiming(store, pick)


def next_queries(store: Store, judge_id: int, session_id: int, count: int,
                 claim_timeout: timedelta = CLAIM_TIMEOUT, holding: Sequence[int] = (),
                 passed_over: Collection[int] = (), release_idle: bool = True,
                 then: Callable[[Session, list[int]], None] | None = None) -> list[int]:
    """The ids of up to ``count`` queries for the judge, in the order to judge them: the one to
    show now and the ones the grading panel holds ready after it (each claimed, as
    :func:`next_query` claims one), in one transaction. ``holding``: the queries the panel holds
    now, in its order; those not finished meanwhile come first, so a prefetched query is never
    swapped for another. ``passed_over``: queries the panel has let go of (never given again by it).
    ``release_idle``: False when the caller released the session's idle claims a moment ago (they
    are released at most ``claim_timeout`` plus that moment late). ``then(session, ids)`` runs in
    the same transaction, after the pick (the grading desk reads the new queries' screens there).
    (:func:`screen` gives what each shows; it never changes.)"""
    def pick(session) -> list[int]:
        record, now = _ready(session, judge_id, session_id, claim_timeout, release_idle)
        mine = _Mine(session, judge_id, record)
        picked: list[int] = []
        for index in range(count):
            showing = next((query_id for query_id in holding if query_id not in picked), None)
            # only the query on screen stays the judge's when its released claim cannot be taken back
            query_id = _pick(session, judge_id, record, now, mine, showing, [*picked, *passed_over],
                             keep_released=index == 0)
            if query_id is None:
                break
            picked.append(query_id)
        mine.touch(now)
        if then is not None:
            then(session, picked)
        return picked

    return _claiming(store, pick)


def _claiming(store: Store, pick):
    """``pick(session)`` in a transaction, started over when a claim races another."""
    for _ in range(RETRIES):
        try:
            with store.transaction() as session:
                return pick(session)
        except (IntegrityError, _Raced):
            continue  # this judge claimed the query in another tab meanwhile, or others took them: start over
        except OperationalError as exc:
            if not _is_conflict(exc):
                raise
            continue  # a serialization failure or deadlock: start over
    raise InputError("could not claim a query after many attempts: the database is too busy, try again")


def _ready(session, judge_id: int, session_id: int, claim_timeout: timedelta,
           release_idle: bool = True) -> tuple[JudgingSession, datetime]:
    """Check the session, the judge and their membership; release the session's idle claims."""
    record = check_session(session, session_id)
    if not session.scalar(select(Judge.active).where(Judge.id == judge_id)):
        raise InputError(INACTIVE if judge_exists(session, judge_id) else f"judge {judge_id!r} does not exist")
    check_member(session, judge_id, session_id)
    now = utcnow()
    if release_idle:
        release_where(session, Assignment.session_id == session_id, Assignment.active_at < now - claim_timeout)
    return record, now


def _pick(session, judge_id: int, record: JudgingSession, now: datetime, held_by_judge: _Mine, showing: int | None,
          beyond: Collection[int], keep_released: bool = True) -> int | None:
    """The id of the next query of :func:`next_query`, in its order, claimed within the caller's
    transaction. ``keep_released``: ``showing`` stays the judge's even when its released claim
    cannot be taken back (the query on screen); else such a query is passed over."""
    session_id, limit = record.id, record.judges_per_query
    held = held_by_judge.on_screen(showing) if showing is not None and showing not in beyond else None
    if held is not None and not held_by_judge.reclaim(held, now) and not keep_released:
        held = None
    if held is not None:
        return held.query_id
    held = held_by_judge.open(beyond)
    if held is not None:
        held_by_judge.reclaim(held, now)
        return held.query_id
    for released in held_by_judge.released_needing_a_judge():
        if released.query_id not in beyond and held_by_judge.reclaim(released, now):
            return released.query_id
    mine = exists().where(Assignment.query_id == SessionQuery.id, Assignment.judge_id == judge_id)
    candidates = session.scalars(
        select(SessionQuery.id)
        .where(SessionQuery.session_id == session_id, ~SessionQuery.gold,
               SessionQuery.claims < limit + SessionQuery.extra_judges, ~mine)
        .order_by(SessionQuery.claims.desc(), SessionQuery.position).limit(CANDIDATES)).all()
    gold = gold_candidate(session, judge_id, session_id, mine, bool(candidates))
    if gold is not None:
        candidates = [gold]
    for query_id in candidates:
        if _claim(session, query_id, limit):
            session.add(Assignment(judge_id=judge_id, query_id=query_id, session_id=session_id,
                                   created_at=now, active_at=now))
            session.flush()
            return query_id
    if candidates:
        raise _Raced()  # every candidate was claimed by others meanwhile: look again
    return None


class _Raced(Exception):
    """Other judges took every candidate between the look and the claim."""


def _is_conflict(exc: OperationalError) -> bool:
    text = str(exc.orig).lower()
    return any(word in text for word in ("deadlock", "could not serialize", "database is locked"))
