"""A session's judgments out of the store: CSV, TREC qrels, and golden data for the harness.

Each export covers the queries graded by at least ``min_judges`` judges (``qcat judge export
--min-judges``; default: all of the session's judges, the queries the report counts); the golden
data read directly by ``qcat golden evaluate|import`` (:func:`golden_from_store`) takes every
finished judgment.

- CSV: one row per judgment, with the query, its segment, the judge, the screen side, the
  system behind that side, the listing's position and the grade;
- TREC qrels: ``qid 0 docno grade`` per (query, listing), the grade being the mean of every
  judgment of that listing for that query (all judges, both sides where it was shown on both),
  rounded half up; ``qid`` is the query's id in the store;
- :func:`golden_from_store`: a :class:`qcat.evaluation.golden.golden_set.GoldenSet`, one row per
  (query, listing, judge) (a judge who saw the listing on both sides gives the rounded mean of
  the two grades), relevant when Good or better, so ``qcat golden evaluate --golden URL
  --golden-session N`` evaluates classifiers against the session's human judgments.
"""

from __future__ import annotations

import csv
import math
from collections import defaultdict
from pathlib import Path

from qcat.errors import InputError
from qcat.evaluation.golden.golden_set import GRADE_NAMES, RELEVANT_GRADE, GoldenSet, ImportReport, from_rows
from qcat.judging.reporting.results import judged_by_enough, load_results
from qcat.judging.store.connection import Store, open_store, shown

CSV_COLUMNS = ("session", "query_id", "query", "segment", "judge", "side", "system", "position", "listing_id",
               "grade", "grade_name", "created_at", "updated_at")


def round_half_up(value: float) -> int:
    return int(math.floor(value + 0.5))


def _open(path: Path):
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return open(path, "w", encoding="utf-8", newline="")
    except OSError as exc:
        raise InputError(f"cannot write {path}: {exc}") from None


def selected(store: Store, key: str | int, min_judges: int | None = None):
    """The session's queries graded by at least ``min_judges`` judges (default: all the session's,
    as the report counts them) with their judgments: a :class:`qcat.judging.reporting.results.Selection`."""
    return judged_by_enough(load_results(store, key), min_judges)


def write_csv(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    results = selected(store, key, min_judges).results
    query = {q.id: q for q in results.queries}
    with _open(Path(path)) as handle:
        writer = csv.writer(handle)
        writer.writerow(CSV_COLUMNS)
        for j in results.judgments:
            writer.writerow([results.name, j.query_id, query[j.query_id].text, query[j.query_id].segment, j.judge,
                             j.side, j.system, j.position, j.listing_id, j.grade, GRADE_NAMES[j.grade],
                             j.created_at.isoformat(), j.updated_at.isoformat()])
    return len(results.judgments)


def qrels(store: Store, key: str | int, min_judges: int | None = None) -> list[tuple[int, str, int]]:
    results = selected(store, key, min_judges).results
    grades: dict[tuple[int, str], list[int]] = defaultdict(list)
    for j in results.judgments:
        grades[(j.query_id, j.listing_id)].append(j.grade)
    return [(query_id, listing, round_half_up(sum(g) / len(g))) for (query_id, listing), g in sorted(grades.items())]


def write_qrels(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    rows = qrels(store, key, min_judges)
    for _, listing, _ in rows:
        if not listing or any(c.isspace() for c in listing):
            raise InputError(f"listing id {listing!r} contains white space: it cannot be written as TREC qrels")
    with _open(Path(path)) as handle:
        for query_id, listing, grade in rows:
            handle.write(f"{query_id} 0 {listing} {grade}\n")
    return len(rows)


def golden_rows(store: Store, key: str | int,
                min_judges: int | None = None) -> tuple[list[tuple[str, str, int, int, str, bool]], str, int]:
    results = selected(store, key, min_judges).results
    text = {q.id: q.text for q in results.queries}
    grades: dict[tuple[str, str, str], list[int]] = defaultdict(list)
    for j in results.judgments:
        grades[(text[j.query_id], j.listing_id, j.judge)].append(j.grade)
    rows = []
    for (query, listing, judge), g in sorted(grades.items()):
        grade = round_half_up(sum(g) / len(g))
        rows.append((query, listing, int(grade >= RELEVANT_GRADE), grade, judge, False))
    return rows, results.name, len(results.judgments)


def golden_from_store(url: str, key: str | int) -> GoldenSet:
    """The session's judgments as golden data (the store at ``url``, the session by id or name)."""
    store = open_store(url)
    try:
        rows, name, judgments = golden_rows(store, key, min_judges=1)  # every finished judgment
        report = ImportReport(f"{shown(store.engine.url)} session {name!r} ({judgments:,} judgments, one row per "
                              "query, listing and judge)", rows_read=len(rows))
    finally:
        store.dispose()
    if not rows:
        raise InputError(f"judging session {name!r} has no finished judgments yet")
    return from_rows(rows, report)


def write_golden_csv(store: Store, key: str | int, path: Path, min_judges: int | None = None) -> int:
    rows, name, judgments = golden_rows(store, key, min_judges)
    if not rows:
        raise InputError(f"judging session {name!r} has no finished judgments yet")
    golden = from_rows(rows, ImportReport(f"session {name!r}", rows_read=len(rows)))
    golden.save_csv(path)
    return len(golden)
