"""Submitting grades: validated, then upserted.

One judgment per (judge, query, listing, side) is enforced by the database's unique
constraint; a submission inserts the missing rows and updates only the grades that changed
(``INSERT ... ON CONFLICT DO UPDATE ... WHERE grade <> excluded.grade`` on both SQLite and
PostgreSQL), so resubmitting the same grades changes nothing. A submission covers every listing
of both groups of the query; the judge's assignment is then done. A listing shown in both groups
is graded once (for either side): that grade is stored for both sides, so per-side results keep
their meaning.

Every grade stored is also kept in ``judgment_history`` with its time (:func:`history`): a judge
may revisit a query they submitted and change grades (:func:`submitted_queries`, then
:func:`submit`), and ``judgments`` keeps only the latest, which the report and exports use.

Grades for a claim that was released (the judge idle past the claim timeout, or ``qcat judge
release``) are kept, and the claim taken back, while the query has fewer submitted judgments
than its judges per query; once it has them all, they are refused (nothing is stored). So a
query can end with one judgment more than its quota per late submission that arrived while
another judge held the released place; never with two judgments of one judge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Iterable, Mapping

from sqlalchemy import func, insert, select, update
from sqlalchemy.dialects import postgresql, sqlite

from qcat.errors import InputError
from qcat.judging.grading.assignment import AlreadyFinished, check_note, judge_assignment
from qcat.judging.grading.screens import QueryScreen, screen
from qcat.judging.store.connection import Store
from qcat.judging.store.models import (
    GRADE_NAMES,
    SIDES,
    Assignment,
    JudgingSession,
    Judgment,
    JudgmentVersion,
    SessionQuery,
    utcnow,
)


@dataclass(frozen=True)
class SubmitResult:
    inserted: int
    updated: int  # (listing, side) pairs whose grade changed
    unchanged: int
    listings_updated: int = 0  # listings whose grade changed (one in both groups counts once)


class NotNeeded(InputError):
    """Late grades for a released claim of a query that has meanwhile all its judgments: nothing
    was stored."""


def check_grade(grade: object) -> int:
    if isinstance(grade, bool) or not isinstance(grade, int):
        if isinstance(grade, str) and grade.strip() in ("0", "1", "2", "3"):
            return int(grade.strip())
        raise InputError(f"grade {grade!r} is not a whole number: grades are 0 ({GRADE_NAMES[0]}) to 3 ({GRADE_NAMES[3]})")
    if not 0 <= grade <= 3:
        raise InputError(f"grade {grade} is out of range: grades are 0 ({GRADE_NAMES[0]}) to 3 ({GRADE_NAMES[3]})")
    return grade


def _normalize(grades: Mapping[tuple[str, str], object] | Iterable[tuple[str, str, object]]) -> dict[tuple[str, str], int]:
    items = grades.items() if isinstance(grades, Mapping) else (((listing, side), grade) for listing, side, grade in grades)
    out: dict[tuple[str, str], int] = {}
    for (listing, side), grade in items:
        if side not in SIDES:
            raise InputError(f"side {side!r} is not one of {', '.join(SIDES)}")
        key = (str(listing), side)
        value = check_grade(grade)
        if key in out and out[key] != value:
            raise InputError(f"listing {listing!r} on the {side} is graded twice with different grades")
        out[key] = value
    return out


def grade_shared_once(graded: dict[tuple[str, str], int], shared: set[str]) -> dict[tuple[str, str], int]:
    """The grades with each listing shown in both groups graded once: its grade, given for either
    side (or for both, the same), is stored for both sides."""
    out = dict(graded)
    for listing in sorted(shared):
        grades = {graded[(listing, side)] for side in SIDES if (listing, side) in graded}
        if len(grades) > 1:
            raise InputError(f"listing {listing!r} is shown in both groups and takes one grade, "
                             f"got {' and '.join(map(str, sorted(grades)))}: grade it once")
        for grade in grades:
            out.update({(listing, side): grade for side in SIDES})
    return out


def _upsert(session, rows: list[dict]):
    dialect = session.get_bind().dialect.name
    module = postgresql if dialect == "postgresql" else sqlite
    statement = module.insert(Judgment).values(rows)
    return statement.on_conflict_do_update(
        index_elements=["judge_id", "query_id", "listing_id", "side"],
        set_={"grade": statement.excluded.grade, "updated_at": statement.excluded.updated_at},
        where=Judgment.grade != statement.excluded.grade,
    )


def submit(store: Store, judge_id: int, query_id: int,
           grades: Mapping[tuple[str, str], object] | Iterable[tuple[str, str, object]],
           flag_note: str | None = None, resubmit: bool = True, active_seconds: float | None = None,
           shown: QueryScreen | None = None) -> SubmitResult:
    """Store this judge's grades of every listing shown for the query.

    ``grades`` maps ``(listing_id, side)`` to a grade 0–3 (or is a list of ``(listing_id, side,
    grade)``). Refused with :class:`InputError`: a grade out of range, a listing or side not
    shown for this query, a listing left ungraded, a query that does not exist or is not
    assigned to this judge; with :class:`AlreadyFinished` (storing nothing) a query this judge
    skipped, and, when ``resubmit`` is False (the app: another window may have submitted it), a
    query this judge has already submitted. ``resubmit=True`` updates the changed grades.
    ``active_seconds``: the time the grading panel measured the judge at work on the query, kept
    with the first submission (a later change of grades keeps it). ``shown``: the query's screen
    when the caller has it already (:func:`screen`; a query's lists never change), else read."""
    graded = _normalize(grades)
    seconds = check_active_seconds(active_seconds)
    note = check_note(flag_note) if flag_note is not None else ""
    with store.transaction() as session:
        assignment = judge_assignment(session, judge_id, query_id)
        if assignment.status == "skipped" or (assignment.status == "done" and not resubmit):
            raise AlreadyFinished(query_id, assignment.status)
        if assignment.status == "released":
            _take_back_claim(session, assignment)
        if shown is None or shown.query_id != query_id:
            shown = screen(session, query_id)
        expected = shown.expected()
        unknown = sorted(set(graded) - expected)
        if unknown:
            listing, side = unknown[0]
            raise InputError(f"listing {listing!r} is not shown on the {side} for query {query_id}")
        graded = grade_shared_once(graded, shown.shared())
        missing = expected - set(graded)
        if missing:
            raise InputError(f"grade every listing: {len(missing)} of {len(expected)} are not graded yet")
        # Grades are only ever stored by a submit, which marks the assignment done in the same
        # transaction: before the first one there is nothing to read.
        before = {} if assignment.status != "done" else dict(
            ((listing, side), grade) for listing, side, grade in session.execute(
                select(Judgment.listing_id, Judgment.side, Judgment.grade)
                .where(Judgment.judge_id == judge_id, Judgment.query_id == query_id)).all())
        now = utcnow()
        rows = [{"judge_id": judge_id, "query_id": query_id, "listing_id": listing, "side": side, "grade": grade,
                 "created_at": now, "updated_at": now} for (listing, side), grade in sorted(graded.items())]
        if rows:
            session.execute(_upsert(session, rows))
        changed = [row for row in rows if before.get((row["listing_id"], row["side"])) != row["grade"]]
        if changed:
            session.execute(insert(JudgmentVersion), [
                {key: row[key] for key in ("judge_id", "query_id", "listing_id", "side", "grade")} | {"recorded_at": now}
                for row in changed])
        if assignment.status != "done" and seconds is not None:
            assignment.active_seconds = seconds
        assignment.status = "done"
        assignment.finished_at = assignment.finished_at or now
        if note:
            assignment.flagged, assignment.flag_note = True, note
    inserted = sum(1 for key in graded if key not in before)
    updated = sum(1 for key, grade in graded.items() if key in before and before[key] != grade)
    listings_updated = len({listing for (listing, side), grade in graded.items() if key_changed(before, listing, side, grade)})
    return SubmitResult(inserted, updated, len(graded) - inserted - updated, listings_updated)


def check_active_seconds(seconds: object) -> float | None:
    """A measured time on a query: a finite number of seconds, 0 or more (None: not measured)."""
    if seconds is None:
        return None
    try:
        value = float(seconds) if isinstance(seconds, (int, float)) and not isinstance(seconds, bool) else math.nan
    except OverflowError:  # an integer too large for a float
        value = math.inf
    if not math.isfinite(value) or value < 0:
        raise InputError(f"the time spent on a query must be a number of seconds, 0 or more: got {str(seconds)[:40]}")
    return value


def key_changed(before: dict, listing: str, side: str, grade: int) -> bool:
    return (listing, side) in before and before[(listing, side)] != grade


def _take_back_claim(session, assignment: Assignment) -> None:
    """Late grades for a released claim count while the query has fewer submitted judgments than
    its quota (the claim is taken back, even past the quota when another judge has taken the
    place meanwhile: a judgment is never thrown away while the query still needs one); refused
    once the query has all its judgments."""
    session.execute(update(SessionQuery).where(SessionQuery.id == assignment.query_id)  # locks the query's row
                    .values(claims=SessionQuery.claims + 1).execution_options(synchronize_session=False))
    quota = session.scalar(select(JudgingSession.judges_per_query).where(JudgingSession.id == assignment.session_id))
    quota += session.scalar(select(SessionQuery.extra_judges).where(SessionQuery.id == assignment.query_id)) or 0
    submitted = session.scalar(select(func.count()).select_from(Assignment)
                               .where(Assignment.query_id == assignment.query_id, Assignment.status == "done"))
    if submitted >= quota:
        raise NotNeeded(f"your claim on query {assignment.query_id} was released (idle too long, or by an organizer) "
                         f"and the query has meanwhile been judged by its {quota} judges: these grades are not needed")


def my_grades(store: Store, judge_id: int, query_id: int) -> dict[tuple[str, str], int]:
    """This judge's own grades of a query (a judge never sees anyone else's)."""
    with store.sessions() as session:
        return {(listing, side): grade for listing, side, grade in session.execute(
            select(Judgment.listing_id, Judgment.side, Judgment.grade)
            .where(Judgment.judge_id == judge_id, Judgment.query_id == query_id)).all()}


@dataclass(frozen=True)
class Submitted:
    """A query this judge submitted in a session, for revisiting."""

    query_id: int
    text: str
    finished_at: object
    edits: int  # versions stored beyond the first grade of each listing


def submitted_queries(store: Store, judge_id: int, session_id: int) -> list[Submitted]:
    """The queries this judge submitted in the session, most recent first."""
    with store.sessions() as session:
        versions = (select(JudgmentVersion.query_id, func.count().label("n"))
                    .where(JudgmentVersion.judge_id == judge_id).group_by(JudgmentVersion.query_id).subquery())
        grades = (select(Judgment.query_id, func.count().label("n"))
                  .where(Judgment.judge_id == judge_id).group_by(Judgment.query_id).subquery())
        rows = session.execute(
            select(SessionQuery.id, SessionQuery.text, Assignment.finished_at,
                   func.coalesce(versions.c.n, 0) - func.coalesce(grades.c.n, 0))
            .join(Assignment, Assignment.query_id == SessionQuery.id)
            .outerjoin(versions, versions.c.query_id == SessionQuery.id)
            .outerjoin(grades, grades.c.query_id == SessionQuery.id)
            .where(Assignment.judge_id == judge_id, Assignment.session_id == session_id, Assignment.status == "done")
            .order_by(Assignment.finished_at.desc(), SessionQuery.id.desc())).all()
    return [Submitted(query_id, text, finished, max(int(edits), 0)) for query_id, text, finished, edits in rows]


def history(store: Store, judge_id: int, query_id: int) -> list[tuple[str, str, int, object]]:
    """Every grade this judge stored for the query, oldest first: ``(listing_id, side, grade, recorded_at)``."""
    with store.sessions() as session:
        return [tuple(row) for row in session.execute(
            select(JudgmentVersion.listing_id, JudgmentVersion.side, JudgmentVersion.grade, JudgmentVersion.recorded_at)
            .where(JudgmentVersion.judge_id == judge_id, JudgmentVersion.query_id == query_id)
            .order_by(JudgmentVersion.id)).all()]
