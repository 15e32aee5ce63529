"""Submitting grades: validated, then upserted.

One judgment per (judge, query, listing, side) is enforced by the database's unique
constraint; a submission inserts the missing rows and updates only the grades that changed
(``INSERT ... ON CONFLICT DO UPDATE ... WHERE grade <> excluded.grade`` on both SQLite and
PostgreSQL), so resubmitting the same grades changes nothing. A submission covers every listing
of both groups of the query; the judge's assignment is then done.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Mapping

from sqlalchemy import select
from sqlalchemy.dialects import postgresql, sqlite

from judging_app.assignment import _assignment, check_note, screen
from judging_app.models import GRADE_NAMES, SIDES, Judgment, utcnow
from judging_app.store import Store
from qcat.errors import InputError


@dataclass(frozen=True)
class SubmitResult:
    inserted: int
    updated: int
    unchanged: int


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
           flag_note: str | None = None) -> SubmitResult:
    """Store this judge's grades of every listing shown for the query.

    ``grades`` maps ``(listing_id, side)`` to a grade 0–3 (or is a list of ``(listing_id, side,
    grade)``). Refused with :class:`InputError`: a grade out of range, a listing or side not
    shown for this query, a listing left ungraded, a query that does not exist or is not
    assigned to this judge, a skipped query."""
    graded = _normalize(grades)
    note = check_note(flag_note) if flag_note is not None else ""
    with store.transaction() as session:
        assignment = _assignment(session, judge_id, query_id)
        if assignment.status == "skipped":
            raise InputError(f"query {query_id!r} was skipped by this judge: it cannot be graded any more")
        expected = screen(session, query_id).expected()
        unknown = sorted(set(graded) - expected)
        if unknown:
            listing, side = unknown[0]
            raise InputError(f"listing {listing!r} is not shown on the {side} for query {query_id}")
        missing = expected - set(graded)
        if missing:
            raise InputError(f"grade every listing: {len(missing)} of {len(expected)} are not graded yet")
        before = dict(((listing, side), grade) for listing, side, grade in session.execute(
            select(Judgment.listing_id, Judgment.side, Judgment.grade)
            .where(Judgment.judge_id == judge_id, Judgment.query_id == query_id)).all())
        now = utcnow()
        rows = [{"judge_id": judge_id, "query_id": query_id, "listing_id": listing, "side": side, "grade": grade,
                 "created_at": now, "updated_at": now} for (listing, side), grade in sorted(graded.items())]
        if rows:
            session.execute(_upsert(session, rows))
        assignment.status = "done"
        assignment.finished_at = assignment.finished_at or now
        if note:
            assignment.flagged, assignment.flag_note = True, note
    inserted = sum(1 for key in graded if key not in before)
    updated = sum(1 for key, grade in graded.items() if key in before and before[key] != grade)
    return SubmitResult(inserted, updated, len(graded) - inserted - updated)


def my_grades(store: Store, judge_id: int, query_id: int) -> dict[tuple[str, str], int]:
    """This judge's own grades of a query (a judge never sees anyone else's)."""
    with store.sessions() as session:
        return {(listing, side): grade for listing, side, grade in session.execute(
            select(Judgment.listing_id, Judgment.side, Judgment.grade)
            .where(Judgment.judge_id == judge_id, Judgment.query_id == query_id)).all()}
