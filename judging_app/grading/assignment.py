"""Which query a judge gets next: atomic and safe under concurrency.

Each query of a session is judged by ``judges_per_query`` (3) different judges and never twice
by one judge:

- a judge who holds an *open* assignment in the session gets that query back (resume);
- otherwise the judge claims a query: ``UPDATE session_queries SET claims = claims + 1 WHERE
  id = :id AND claims < :limit`` and, in the same transaction, inserts the assignment, whose
  (judge, query) pair is unique in the database. A claim that loses a race updates no row and
  the next candidate is tried; a duplicate (judge, query) rolls the whole claim back. The
  conditional update is what makes this safe: PostgreSQL re-checks ``claims < limit`` on the
  locked row, and SQLite runs every transaction under ``BEGIN IMMEDIATE``;
- candidates are the queries with the most claims first (finish queries before starting new
  ones), then in session order;
- skipping a query releases the claim (another judge can take it) but keeps the skipped
  assignment, so the same judge never gets it again;
- an admin may send a query back for another judgment (the disagreement queue,
  :mod:`qcat.judging.grading.disagreements`): its ``extra_judges`` raises its quota by one each time;
- claims expire: an open assignment whose judge has not had the query shown or acted on it for
  ``claim_timeout`` (default :data:`CLAIM_TIMEOUT`, 30 minutes; ``qcat judge app
  --claim-timeout``) is *released* by the next :func:`next_query` of the session: it no longer
  counts in ``claims``, so the query is offered to another judge. :func:`release` does the same
  on demand (``qcat judge release``). Each release is a conditional ``UPDATE ... WHERE status =
  'open'``, so a claim is released, and its count lowered, once. A judge whose claim was
  released gets the query back while it still needs a judge (or while it is on their screen:
  ``showing``), and may still submit grades for it (:func:`qcat.judging.grading.judgments.submit`).

Gold questions (``session_queries.gold``, :mod:`qcat.judging.grading.gold`) go to *every* judge of the
session, once each: they take no place among a query's ``judges_per_query`` (their claim is an
unconditional ``claims + 1``, so ``claims`` may exceed the quota there) and their claims are never
released (nobody waits for them). They are mixed in among the regular queries: a judge is given
their ``i``-th gold query (1-based) once they have been given ``(i-1)·K + P`` regular queries,
``K`` = :func:`gold_spacing` = ``max(1, min(5, regular queries // (gold queries + 1)))`` (one gold
query in every 5 regular ones in a large session, closer together in a small one) and ``P`` in
1..K the judge's own phase (:func:`gold_phase`); each judge gets the gold queries in an order of
their own (:func:`gold_order`), so judges comparing notes do not find gold at the same places. The
gold queries still left when no regular query remains for the judge come one after another. The
screen of a gold query is the same as any other's.
"""

from __future__ import annotations

import random
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import exists, func, or_, select, update
from sqlalchemy.exc import IntegrityError, OperationalError

from qcat.errors import InputError
from qcat.judging.grading.screens import QueryScreen, screen
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    Assignment,
    Judge,
    JudgingSession,
    SessionJudge,
    SessionQuery,
    utcnow,
)

CANDIDATES = 16
GOLD_EVERY = 5  # at most this many regular queries before each gold query (fewer in small sessions)
MAX_NOTE = 2000
RETRIES = 50
CLAIM_TIMEOUT = timedelta(minutes=30)
CLAIM_TIMEOUT_ENV = "QCAT_CLAIM_TIMEOUT"  # minutes, for the app (`qcat judge app --claim-timeout`)
INACTIVE = "this judge has been deactivated: ask the session's organizer"
NOT_A_MEMBER = "you are not a judge of this session: ask its organizer to add you (qcat judge members)"


def may_judge(session, judge_id: int, session_id: int) -> bool:
    """Whether the judge may judge the session: it names no judge (open to all), or names this one
    (``session_judges``, :func:`qcat.judging.grading.sessions.change_members`)."""
    named = session.scalar(select(exists().where(SessionJudge.session_id == session_id)))
    return not named or session.scalar(select(exists().where(SessionJudge.session_id == session_id,
                                                             SessionJudge.judge_id == judge_id)))


def check_member(session, judge_id: int, session_id: int) -> None:
    if not may_judge(session, judge_id, session_id):
        raise InputError(NOT_A_MEMBER)


class AlreadyFinished(InputError):
    """The judge's assignment of the query is already done or skipped (in another window, say):
    the action changed nothing."""

    def __init__(self, query_id: int, status: str) -> None:
        self.query_id, self.status = query_id, status
        done = "judged" if status == "done" else "skipped"
        super().__init__(f"query {query_id!r} was already {done} by this judge: nothing was changed")


def _check_session(session, session_id: int) -> JudgingSession:
    record = session.get(JudgingSession, session_id)
    if record is None:
        raise InputError(f"judging session {session_id!r} does not exist")
    return record


def open_assignment(session, judge_id: int, session_id: int, beyond: Collection[int] = ()) -> Assignment | None:
    """The judge's oldest open assignment in the session, other than those of ``beyond``."""
    return session.scalar(select(Assignment).where(Assignment.judge_id == judge_id, Assignment.session_id == session_id,
                                                   Assignment.status == "open", Assignment.query_id.not_in(list(beyond)))
                          .order_by(Assignment.id).limit(1))


def _on_screen(session, judge_id: int, session_id: int, query_id: int) -> Assignment | None:
    """The judge's assignment of the query they have on screen, unless it is done or skipped."""
    return session.scalar(select(Assignment).where(Assignment.judge_id == judge_id, Assignment.session_id == session_id,
                                                   Assignment.query_id == query_id,
                                                   Assignment.status.in_(("open", "released"))))


def _released_needing_a_judge(session, judge_id: int, record: JudgingSession) -> list[Assignment]:
    return list(session.scalars(
        select(Assignment).join(SessionQuery, SessionQuery.id == Assignment.query_id)
        .where(Assignment.judge_id == judge_id, Assignment.session_id == record.id, Assignment.status == "released",
               or_(SessionQuery.gold, SessionQuery.claims < record.judges_per_query + SessionQuery.extra_judges)).order_by(Assignment.id)))


def _claim(session, query_id: int, limit: int) -> bool:
    """Raise the query's claim count unless it already has ``limit`` claims (one conditional
    update); a gold query has no limit (every judge gets it)."""
    return session.execute(
        update(SessionQuery).where(SessionQuery.id == query_id,
                                  or_(SessionQuery.gold, SessionQuery.claims < limit + SessionQuery.extra_judges))
        .values(claims=SessionQuery.claims + 1).execution_options(synchronize_session=False)).rowcount == 1


def gold_spacing(regular: int, gold: int) -> int:
    """``K``: how many regular queries a judge is given before each gold query."""
    return max(1, min(GOLD_EVERY, regular // (gold + 1)))


def _gold_candidate(session, judge_id: int, session_id: int, mine, regular_left: bool) -> int | None:
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


def _reclaim(session, held: Assignment, limit: int, now: datetime) -> bool:
    """Keep the judge's claim alive: an open one is touched, a released one is claimed again if
    the query still has room. False when a released claim could not be taken back."""
    if held.status == "released":
        if not _claim(session, held.query_id, limit):
            return False
        held.status = "open"
    held.active_at = now
    return True


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
        query_id = _pick(session, judge_id, record, now, showing, beyond)
        return screen(session, query_id, judge_id) if query_id is not None else None

    return _claiming(store, pick)


def next_queries(store: Store, judge_id: int, session_id: int, count: int,
                 claim_timeout: timedelta = CLAIM_TIMEOUT, holding: Sequence[int] = (),
                 passed_over: Collection[int] = ()) -> list[int]:
    """The ids of up to ``count`` queries for the judge, in the order to judge them: the one to
    show now and the ones the grading panel holds ready after it (each claimed, as
    :func:`next_query` claims one), in one transaction. ``holding``: the queries the panel holds
    now, in its order; those not finished meanwhile come first, so a prefetched query is never
    swapped for another. ``passed_over``: queries the panel has let go of (never given again by it).
    (:func:`screen` gives what each shows; it never changes.)"""
    def pick(session) -> list[int]:
        record, now = _ready(session, judge_id, session_id, claim_timeout)
        picked: list[int] = []
        for index in range(count):
            showing = next((query_id for query_id in holding if query_id not in picked), None)
            # only the query on screen stays the judge's when its released claim cannot be taken back
            query_id = _pick(session, judge_id, record, now, showing, [*picked, *passed_over],
                             keep_released=index == 0)
            if query_id is None:
                break
            picked.append(query_id)
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


def _ready(session, judge_id: int, session_id: int, claim_timeout: timedelta) -> tuple[JudgingSession, datetime]:
    """Check the session, the judge and their membership; release the session's idle claims."""
    record = _check_session(session, session_id)
    if not session.scalar(select(Judge.active).where(Judge.id == judge_id)):
        raise InputError(INACTIVE if _exists(session, judge_id) else f"judge {judge_id!r} does not exist")
    check_member(session, judge_id, session_id)
    now = utcnow()
    _release_where(session, Assignment.session_id == session_id, Assignment.active_at < now - claim_timeout)
    return record, now


def _pick(session, judge_id: int, record: JudgingSession, now: datetime, showing: int | None,
          beyond: Collection[int], keep_released: bool = True) -> int | None:
    """The id of the next query of :func:`next_query`, in its order, claimed within the caller's
    transaction. ``keep_released``: ``showing`` stays the judge's even when its released claim
    cannot be taken back (the query on screen); else such a query is passed over."""
    session_id, limit = record.id, record.judges_per_query
    held = (_on_screen(session, judge_id, session_id, showing)
            if showing is not None and showing not in beyond else None)
    if held is not None and not _reclaim(session, held, limit, now) and not keep_released:
        held = None
    if held is not None:
        return held.query_id
    held = open_assignment(session, judge_id, session_id, beyond)
    if held is not None:
        _reclaim(session, held, limit, now)
        return held.query_id
    for released in _released_needing_a_judge(session, judge_id, record):
        if released.query_id not in beyond and _reclaim(session, released, limit, now):
            return released.query_id
    mine = exists().where(Assignment.query_id == SessionQuery.id, Assignment.judge_id == judge_id)
    candidates = session.scalars(
        select(SessionQuery.id)
        .where(SessionQuery.session_id == session_id, ~SessionQuery.gold,
               SessionQuery.claims < limit + SessionQuery.extra_judges, ~mine)
        .order_by(SessionQuery.claims.desc(), SessionQuery.position).limit(CANDIDATES)).all()
    gold = _gold_candidate(session, judge_id, session_id, mine, bool(candidates))
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


def _exists(session, judge_id: int) -> bool:
    return session.get(Judge, judge_id) is not None


def _release_where(session, *conditions) -> list[int]:
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
        released = _release_where(session, *conditions)
        if not released:
            return []
        rows = session.execute(
            select(JudgingSession.name, SessionQuery.id, SessionQuery.text, Judge.name, Assignment.active_at)
            .join(SessionQuery, SessionQuery.id == Assignment.query_id)
            .join(JudgingSession, JudgingSession.id == Assignment.session_id)
            .join(Judge, Judge.id == Assignment.judge_id)
            .where(Assignment.id.in_(released)).order_by(Assignment.id)).all()
    return [Released(*row) for row in rows]


def _is_conflict(exc: OperationalError) -> bool:
    text = str(exc.orig).lower()
    return any(word in text for word in ("deadlock", "could not serialize", "database is locked"))


def _assignment(session, judge_id: int, query_id: int) -> Assignment:
    if session.get(SessionQuery, query_id) is None:
        raise InputError(f"query {query_id!r} does not exist")
    assignment = session.scalar(select(Assignment).where(Assignment.judge_id == judge_id, Assignment.query_id == query_id)
                                .with_for_update())
    if assignment is None:
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
        assignment = _assignment(session, judge_id, query_id)
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
        assignment = _assignment(session, judge_id, query_id)
        assignment.flagged, assignment.flag_note = True, note


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
        record = _check_session(session, session_id)
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

